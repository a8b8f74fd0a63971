"""Every command and code block in the docs, the README and CONTRIBUTING.md is checked against
the code, so no example rots.

- python blocks compile (top-level ``await`` allowed); their ``archmax_temporal`` imports
  resolve, and their calls on ``agent.workflow`` and ``agent.sessions`` bind to the host
  API's signatures;
- yaml blocks parse; a whole case file quoted from ``examples/`` is verbatim and parses with
  the case loader; a state or a ``states:`` fragment validates as ``StateSpec``;
- json and toml blocks parse (a ``temporal.toml`` profile with Temporal's own loader, strict);
- shell blocks are valid ``bash`` (``bash -n``); each ``archmax`` command parses with the
  CLI's parser; ``python -m`` modules exist; ``tasks.py`` commands and ``pip`` extras exist;
  a ``curl`` body sent to an API route is that route's request model; ``archmax help`` and
  ``archmax --version`` run;
- every inline ``archmax <command> --flag`` names a command and flags the parser has, every
  repository path in code spans exists, and the README's and CONTRIBUTING.md's links resolve.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel
from temporalio.envconfig import ClientConfig

from archmax_temporal.client.cli.parser import UsageError, build_parser
from archmax_temporal.client.http import wire
from archmax_temporal.client.sessions_surface import SessionsSurface
from archmax_temporal.client.testing.cases import parse_case
from archmax_temporal.client.workflow_surface import WorkflowSurface
from archmax_temporal.workflows.spec import StateSpec
from tests.support.paths import REPO

PAGES = sorted(
    [REPO / "README.md", REPO / "CONTRIBUTING.md", *(REPO / "docs").rglob("*.md")],
    key=lambda path: path.as_posix(),
)
"""Every markdown file a reader is sent to."""

LANGUAGES = frozenset({"sh", "python", "yaml", "json", "toml", "text"})
"""The languages a block may be written in: each has its check below (``text`` is output)."""


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language and its text."""

    page: Path
    line: int
    language: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text(encoding="utf-8").split("\n")
    start: int | None = None
    language = ""
    for number, line in enumerate(lines, 1):
        if not line.startswith("```"):
            continue
        if start is None:
            start, language = number, line.removeprefix("```").strip()
        else:
            yield Block(page, start, language, "\n".join(lines[start : number - 1]) + "\n")
            start = None
    assert start is None, f"{page.relative_to(REPO)}:{start}: a code block is never closed"


BLOCKS = [block for page in PAGES for block in _blocks(page)]


def _of(language: str) -> list[Block]:
    return [block for block in BLOCKS if block.language == language]


def _ids(blocks: list[Block]) -> list[str]:
    return [block.where for block in blocks]


def test_there_are_blocks_of_every_kind() -> None:
    """The collection itself works: the pages hold blocks of each checked language."""
    assert {block.language for block in BLOCKS} == LANGUAGES
    assert len(BLOCKS) >= 30


def test_every_block_names_a_checked_language() -> None:
    unnamed = [block.where for block in BLOCKS if block.language not in LANGUAGES]
    assert unnamed == [], f"name the block's language, one of {sorted(LANGUAGES)}"


# --- python --------------------------------------------------------------------------------

_SURFACES: dict[str, type] = {"workflow": WorkflowSurface, "sessions": SessionsSurface}


def _python_tree(block: Block) -> ast.Module:
    code = compile(
        block.body, block.where, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    assert isinstance(code, ast.Module)
    return code


@pytest.mark.parametrize("block", _of("python"), ids=_ids(_of("python")))
def test_python_blocks_compile_and_their_imports_resolve(block: Block) -> None:
    tree = _python_tree(block)
    compile(tree, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("archmax_temporal"):
            module = importlib.import_module(str(node.module))
            for alias in node.names:
                assert hasattr(module, alias.name), f"{block.where}: {node.module}.{alias.name}"


@pytest.mark.parametrize("block", _of("python"), ids=_ids(_of("python")))
def test_python_blocks_call_the_host_api_as_it_is(block: Block) -> None:
    """``agent.workflow.send(None, "…", trigger=…)`` binds to ``WorkflowSurface.send``."""
    for node in ast.walk(_python_tree(block)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        if not (
            isinstance(owner, ast.Attribute)
            and owner.attr in _SURFACES
            and isinstance(owner.value, ast.Name)
            and owner.value.id == "agent"
        ):
            continue
        method = getattr(_SURFACES[owner.attr], node.func.attr, None)
        assert method is not None, f"{block.where}: agent.{owner.attr}.{node.func.attr}"
        signature = inspect.signature(method)
        # bound as a method: None stands for self and for every argument's value
        signature.bind(
            None, *[None] * len(node.args), **{k.arg: None for k in node.keywords if k.arg}
        )


# --- yaml ----------------------------------------------------------------------------------

_QUOTED = re.compile(r"# (examples/\S+\.yaml)\n")


def _check_yaml(block: Block) -> str:
    """Validate one yaml block and say how."""
    data = yaml.safe_load(block.body)
    quoted = _QUOTED.match(block.body)
    if quoted:
        source = REPO / quoted.group(1)
        text = source.read_text(encoding="utf-8")
        excerpt = block.body.split("\n", 1)[1]
        assert excerpt in text, f"{block.where}: not verbatim from {quoted.group(1)}"
        if source.name.endswith(".test.yaml"):
            parse_case(source.name, text, source.parent)
        return "quoted"
    if isinstance(data, dict) and set(data) == {"states"}:
        for state in data["states"].values():
            StateSpec.model_validate(state)
        return "states"
    if isinstance(data, dict) and len(data) == 1:
        StateSpec.model_validate(next(iter(data.values())))
        return "state"
    raise AssertionError(
        f"{block.where}: a yaml block must quote an example file (first line "
        "`# examples/...`), or be a state or `states:` fragment; teach this test the new kind"
    )


@pytest.mark.parametrize("block", _of("yaml"), ids=_ids(_of("yaml")))
def test_yaml_blocks_are_valid_specs_or_verbatim_cases(block: Block) -> None:
    assert _check_yaml(block) in ("quoted", "states", "state")


def test_a_yaml_check_can_fail() -> None:
    """A state fragment with a key the schema lacks is refused."""
    bad = Block(REPO / "README.md", 1, "yaml", "review:\n  type: human\n  deadlin: {}\n")
    with pytest.raises(ValueError, match="deadlin"):
        _check_yaml(bad)


# --- json, toml ----------------------------------------------------------------------------


@pytest.mark.parametrize("block", _of("json"), ids=_ids(_of("json")))
def test_json_blocks_parse(block: Block) -> None:
    assert isinstance(json.loads(block.body), dict | list)


@pytest.mark.parametrize("block", _of("toml"), ids=_ids(_of("toml")))
def test_toml_blocks_parse_as_temporal_profiles(block: Block) -> None:
    data = tomllib.loads(block.body)
    assert set(data) == {"profile"}, f"{block.where}: only temporal.toml profiles are checked"
    config = ClientConfig.load(config_source=block.body.encode(), config_file_strict=True)
    assert set(config.profiles) == set(data["profile"])


# --- shell ---------------------------------------------------------------------------------

_ROUTE_BODIES: list[tuple[re.Pattern[str], type[BaseModel]]] = [
    (re.compile(r"/v1/workflows/[^/]+/triggers/[^/]+$"), wire.TriggerFiring),
    (re.compile(r"/v1/sessions/[^/]+/deliver$"), wire.Delivery),
    (re.compile(r"/v1/sessions/[^/]+/decide$"), wire.Decision),
    (re.compile(r"/v1/sessions/[^/]+/reply$"), wire.Reply),
    (re.compile(r"/v1/sessions/[^/]+/messages$"), wire.SessionMessage),
]
_OTHER_COMMANDS = frozenset(
    {
        "base64",
        "cd",
        "date",
        "docker",
        "done",
        "export",
        "for",
        "grep",
        "head",
        "mkdocs",
        "od",
        "openssl",
        "printf",
        "temporal",
        "tr",
    }
)
"""Commands the docs run that are not this project's: their syntax is bash's to check."""


def _commands(body: str) -> Iterator[list[str]]:
    """The simple commands of a shell block: continuations joined, comments dropped, split at
    ``|``, ``&``, ``;`` and ``&&``, leading ``VAR=value`` assignments removed."""
    text = body.replace("\\\n", " ")
    for line in text.split("\n"):
        lexer = shlex.shlex(line, posix=True, punctuation_chars="();|&")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        command: list[str] = []
        for token in [*lexer, ";"]:
            if set(token) <= set("();|&"):  # a separator, a subshell's or $( … )'s edge
                while command and (
                    re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", command[0])
                    or command[0] in ("do", "then", "else")
                ):
                    command.pop(0)
                if command:
                    yield command
                command = []
            else:
                command.append(token)


def _parse_archmax(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def _check_command(command: list[str], where: str) -> str:
    """Check one simple command against the code; say what kind it was."""
    name = command[0]
    if name == "archmax":
        try:
            _parse_archmax(command[1:])
        except (UsageError, SystemExit) as exc:
            raise AssertionError(f"{where}: {shlex.join(command)}: {exc}") from None
        return "archmax"
    if re.fullmatch(r"(\.venv/bin/)?python3?", name) and command[1:2] == ["-m"]:
        module = command[2]
        assert importlib.util.find_spec(module) is not None, f"{where}: no module {module}"
        return "python -m"
    if re.fullmatch(r"python3?", name) and command[1:2] == ["tasks.py"]:
        assert command[2] in ("demo", "test"), f"{where}: tasks.py has no {command[2]}"
        return "tasks.py"
    if name == "pip":
        extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
            "optional-dependencies"
        ]
        for argument in command[2:]:
            for extra in re.findall(r"\[([\w,-]+)\]", argument):
                assert set(extra.split(",")) <= set(extras), f"{where}: no extra {extra}"
        return "pip"
    if name == "curl":
        if "-d" in command:
            data = command[command.index("-d") + 1]
            url = next(arg for arg in command if arg.startswith("http"))
            path = re.sub(r"^https?://[^/]+", "", url).split("?")[0]
            model = next((m for pattern, m in _ROUTE_BODIES if pattern.search(path)), None)
            if data.startswith("{") and model is not None:
                model.model_validate_json(data)
                return "curl body"
        return "curl"
    assert name in _OTHER_COMMANDS, f"{where}: teach this test the command {name!r}"
    return "other"


_SHELL = _of("sh")


@pytest.mark.parametrize("block", _SHELL, ids=_ids(_SHELL))
def test_shell_blocks_are_bash_and_their_commands_exist(block: Block) -> None:
    bash = shutil.which("bash")
    if bash is not None:
        # <namespace>, <key>: placeholders for the reader, words for bash
        text = re.sub(r"<[\w .-]+>", "PLACEHOLDER", block.body)
        checked = subprocess.run(
            [bash, "-n"], input=text, capture_output=True, text=True, timeout=30
        )
        assert checked.returncode == 0, f"{block.where}: {checked.stderr}"
    kinds = [_check_command(command, block.where) for command in _commands(block.body)]
    assert kinds, f"{block.where}: no command"


def test_every_kind_of_shell_command_is_checked() -> None:
    """The docs' shell blocks hold archmax commands, modules, curl bodies and pip extras, so
    each check above ran on something."""
    kinds = {
        _check_command(command, block.where)
        for block in _SHELL
        for command in _commands(block.body)
    }
    assert {"archmax", "python -m", "tasks.py", "pip", "curl body"} <= kinds


def test_a_command_check_can_fail() -> None:
    with pytest.raises(AssertionError, match="--no-such-flag"):
        _check_command(["archmax", "sessions", "--no-such-flag"], "here")
    with pytest.raises(ValueError, match="extra"):
        _check_command(
            ["curl", "http://h/v1/sessions/s/deliver", "-d", '{"trigger":"t","extra":1}'], "here"
        )


def test_the_cheap_archmax_commands_run() -> None:
    """``archmax help <command>`` for every command the docs run, and ``--version``."""
    named = sorted(
        {
            command[1]
            for block in _SHELL
            for command in _commands(block.body)
            if command[0] == "archmax" and not command[1].startswith("-")
        }
    )
    assert "run" in named and "serve" in named
    done = subprocess.run(
        [sys.executable, "-m", "archmax_temporal", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.startswith("archmax "), done.stderr
    from archmax_temporal.client.cli.parser import print_help

    for command in named:
        assert print_help(command) == 0, command


# --- prose ---------------------------------------------------------------------------------

_INLINE = re.compile(r"`(archmax (?:[a-z|]+|--[a-z-]+)[^`]*)`")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_inline_archmax_commands_name_real_commands_and_flags() -> None:
    parser = build_parser()
    commands = _subparsers()
    top_flags = {flag for action in parser._actions for flag in action.option_strings}
    problems: list[str] = []
    for page in PAGES:
        for span in _INLINE.findall(page.read_text(encoding="utf-8")):
            words = span.split()
            if words[1].startswith("--"):
                named: list[str] = []
                flags = [w.split("=")[0] for w in words[1:] if w.startswith("--")]
            else:
                named = words[1].split("|")
                flags = [
                    w.strip("[]").split("=")[0] for w in words[2:] if w.strip("[").startswith("--")
                ]
            for command in named:
                if command not in commands:
                    problems.append(f"{page.name}: `{span}`: no command {command!r}")
                    continue
                own = {f for a in commands[command]._actions for f in a.option_strings}
                problems += [
                    f"{page.name}: `{span}`: {command} has no {flag}"
                    for flag in flags
                    if flag not in own | top_flags
                ]
            if not named:
                problems += [f"{page.name}: `{span}`: no {f}" for f in flags if f not in top_flags]
    assert problems == []


_REPO_PATH = re.compile(
    r"`((?:workflows|activities|client|tests|bench|examples|archmax_temporal|docs|\.ci)/"
    r"[\w./-]*)`"
)


_MADE_AT_RUN_TIME = frozenset({".archmax", "sessions"})
"""Folders a run creates (git ignores them): the docs may name them before they exist."""


def test_repository_paths_in_code_spans_exist() -> None:
    missing = [
        f"{page.relative_to(REPO)}: {path}"
        for page in PAGES
        for path in _REPO_PATH.findall(page.read_text(encoding="utf-8"))
        if not (REPO / path).exists() and not _MADE_AT_RUN_TIME & set(Path(path).parts)
    ]
    assert missing == []


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md"])
def test_the_front_pages_links_resolve(name: str) -> None:
    """The README and CONTRIBUTING.md are read on their own (GitHub, the package's page):
    their relative links must name files of the repository."""
    text = (REPO / name).read_text(encoding="utf-8")
    links = [link for link in _LINK.findall(text) if not re.match(r"[a-z]+:", link)]
    assert links
    assert [link for link in links if not (REPO / link).exists()] == []
