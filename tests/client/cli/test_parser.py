"""A CLI that talks: every option has help text, ``worker`` and ``dev`` list their options, and
the commands and flags messages name exist."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from archmax_temporal.client.cli.parser import build_parser
from tests.support.paths import REPO


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _walk(
    parser: argparse.ArgumentParser, path: str = "archmax"
) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _walk(child, f"{path} {name}")
        else:
            yield path, action


def _flags() -> set[str]:
    return {flag for _, action in _walk(build_parser()) for flag in action.option_strings}


class TestHelpText:
    def test_every_option_and_argument_has_help(self) -> None:
        """Walk the whole argparse tree: no option or positional without help text."""
        missing = [
            f"{path} {action.option_strings or action.dest}"
            for path, action in _walk(build_parser())
            if not isinstance(action, argparse._HelpAction)
            and (not action.help or action.help == argparse.SUPPRESS)
        ]
        assert missing == []

    def test_every_command_has_a_help_line(self) -> None:
        """``archmax --help`` describes each command."""
        sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
        helps = {choice.dest: choice.help for choice in sub._choices_actions}
        assert set(helps) == set(sub.choices) and all(helps.values())

    @pytest.mark.parametrize(
        "command, flags",
        [
            (
                "worker",
                [
                    "--max-concurrent-workflow-tasks",
                    "--max-concurrent-activities",
                    "--max-cached-workflows",
                    "--shutdown-grace",
                    "--metrics-address",
                    "--health-address",
                    "--address",
                    "--namespace",
                    "--profile",
                    "--tls",
                ],
            ),
            ("dev", ["--metrics-address", "--health-address", "--address", "--namespace"]),
        ],
    )
    def test_worker_and_dev_list_their_options(self, command: str, flags: list[str]) -> None:
        """``archmax worker --help`` and ``archmax dev --help`` show their options."""
        text = _commands(build_parser())[command].format_help()
        for flag in flags:
            assert flag in text


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for statement in body:
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    ids.add(id(statement.value))
    return ids


def _messages() -> Iterator[tuple[str, str]]:
    """Every string literal of the runtime's code that can reach a user: not a docstring,
    not a lone token (an argv entry for the ``temporal`` binary)."""
    for folder in ("client", "activities", "workflows"):
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = _docstrings(tree)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in docstrings
                    and " " in node.value.strip()
                ):
                    yield f"{path.relative_to(REPO)}:{node.lineno}", node.value


_COMMAND = re.compile(r"\barchmax ([a-z][a-z-]*)\b")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]+)")
_PROSE = {"starts", "needs", "event", "sub-workflow", "workflows", "command", "session", "error"}
"""Words after "archmax" in messages that are prose, not a command."""


class TestMessagesNameWhatExists:
    def test_commands_named_in_messages_exist(self) -> None:
        """``archmax <word>`` in any message names a real command."""
        commands = set(_commands(build_parser()))
        wrong = [
            f"{where}: archmax {word}"
            for where, text in _messages()
            for word in _COMMAND.findall(text)
            if word not in commands and word not in _PROSE
        ]
        assert wrong == []

    def test_flags_named_in_messages_exist(self) -> None:
        """``--flag`` in any message of the CLI's own code is a flag some command takes (a
        line about the ``temporal`` binary's own flags aside)."""
        flags = _flags() | {"--help"}
        wrong = [
            f"{where}: {flag}"
            for where, text in _messages()
            if where.startswith("client/") and "temporal " not in text
            for flag in _FLAG.findall(text)
            if flag not in flags
        ]
        assert wrong == []


class TestVersion:
    def test_version_prints_the_installed_package_version(self) -> None:
        """``archmax --version`` prints the distribution's version on stdout, exit 0."""
        from importlib.metadata import version

        done = subprocess.run(
            [sys.executable, "-m", "archmax_temporal", "--version"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == f"archmax {version('archmax-temporal')}\n"
