"""Test cases: ``workflows/<slug>/tests/**/*.test.yaml`` documents, parsed fail closed.

One YAML document is one case: one conversation on one session, read like a script. This
module reads and validates a case document into its typed model (:func:`parse_case`, a
:class:`archmax_temporal.client.testing.case_model.CaseDocument`), a discovered case included
(:func:`load_case`); the document's steps are read by
:mod:`archmax_temporal.client.testing.step_parser`, its workspace seeds checked by
:mod:`archmax_temporal.client.testing.case_workspace`, and every problem is collected and reported
at once (:mod:`archmax_temporal.client.testing.case_issues`). Nothing here talks to Temporal or a
model.

Beside the seed's eight keys, this runtime reads its case fields ``repeat`` and ``passRate``
(docs/authoring/testing.md, "Cases that wait, crash and retry"). A case that uses none of this
runtime's extension parses to exactly what it did before.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError
from pydantic_core import to_json

from archmax_temporal.client.loader import YamlDocumentError, read_yaml
from archmax_temporal.client.testing.case_issues import (
    CaseIssues,
    CaseSchemaError,
    listed,
    suggestion,
)
from archmax_temporal.client.testing.case_model import (
    CASE_DESCRIPTION_MAX_LENGTH,
    CASE_TITLE_MAX_LENGTH,
    REPEAT_MAX,
    TOP_LEVEL_KEYS,
    CaseDocument,
    Mock,
    TriggerRef,
    WorkspaceFrom,
    WorkspaceValue,
)
from archmax_temporal.client.testing.case_workspace import from_problem, workspace_path_problem
from archmax_temporal.client.testing.discovery import DiscoveredCase
from archmax_temporal.client.testing.step_parser import StepParser
from archmax_temporal.client.testing.steps import DecideStep, DeliverStep, SendStep

# The shared matchers live in workflows.matching (the session matches mocks with them);
# re-exported here, where case authors look for them.
from archmax_temporal.workflows.matching import (  # noqa: F401 (re-exported)
    InvalidRegexError,
    compile_regex,
    find_mock,
    is_regex,
    match_token,
    mock_result_text,
    partial_match,
    regex_problem,
)

CASE_MAX_BYTES: Final = 1024 * 1024
"""The largest case file read, in bytes: a bigger one is refused before it is parsed. Depth,
alias and node limits are the loader's (``client/loader.py``, :func:`read_yaml`)."""

CASE_PAYLOAD_MAX_BYTES: Final = 256 * 1024
"""What a case puts in one Temporal payload, serialised: its ``mocks`` (they travel in the
session's start input, beside a spec held to ``SESSION_START_MAX_BYTES``), and a ``send``'s
message with the case's variables, a ``deliver``'s variables or a ``decide``'s comment (a
firing's input). Temporal refuses a payload over 2 MB; a case within its file size can still
expand past that through aliases and escapes (one ``\\x01`` is 6 bytes of JSON)."""


def collapse_whitespace(text: str) -> str:
    """``text`` with every whitespace run (newlines included) one space, ends trimmed."""
    return " ".join(text.split())


def parse_case(
    file: str, source: str | bytes | Path, tests_dir: Path | None = None
) -> CaseDocument:
    """Parse the YAML ``source`` of case ``file`` (its text, bytes or path) into a
    :class:`CaseDocument`.

    Validation is strict and reports every problem at once in a :class:`CaseSchemaError`.
    ``tests_dir`` is the workflow's ``tests/`` directory: ``workspace`` ``from:`` references
    resolve inside it and must exist. Without it only their form is checked. The YAML is read
    within :data:`CASE_MAX_BYTES` and the loader's depth and alias limits.
    """
    try:
        data = read_yaml(source, max_bytes=CASE_MAX_BYTES, kind="a case file")
    except YamlDocumentError as exc:
        raise CaseSchemaError(file, [exc.issue]) from None
    if data is None:
        raise CaseSchemaError(
            file, ["<root>: the document is empty (a case needs title, description and steps)"]
        )
    if not isinstance(data, dict):
        raise CaseSchemaError(file, ["<root>: a case document must be a mapping"])
    parser = _Parser(tests_dir)
    document = parser.document(data)
    if parser.issues or document is None:
        raise CaseSchemaError(file, parser.issues or ["<root>: invalid case"])
    oversized = payload_problems(document)
    if oversized:
        raise CaseSchemaError(file, oversized)
    return document


def payload_problems(document: CaseDocument) -> list[str]:
    """The parts of ``document`` that would not fit their Temporal payload: its mocks (the
    session's start input carries them) and each action's message and variables (a firing's
    input), each held to :data:`CASE_PAYLOAD_MAX_BYTES` serialised."""
    parts: list[tuple[str, Any]] = [("mocks", document.mocks)]
    for step in document.steps:
        where = f"steps[{step.index}].{step.kind}"
        if isinstance(step, SendStep):
            parts.append((where, {"message": step.message, "variables": document.variables}))
        elif isinstance(step, DeliverStep):
            parts.append((where, step.variables))
        elif isinstance(step, DecideStep):
            parts.append((where, step.comment))
    problems: list[str] = []
    for where, part in parts:
        size = len(to_json(part))
        if size > CASE_PAYLOAD_MAX_BYTES:
            problems.append(
                f"{where}: {size:,} bytes serialised is over the "
                f"{CASE_PAYLOAD_MAX_BYTES:,}-byte limit of what a case sends in one payload"
            )
    return problems


def load_case(case: DiscoveredCase, tests_dir: Path) -> CaseDocument:
    """Read and parse a discovered case; an unreadable file is a :class:`CaseSchemaError`."""
    return parse_case(case.file, case.path, tests_dir)


class _Parser(CaseIssues):
    """Collects the issues of one document while building its models (its steps by a
    :class:`StepParser` adding to the same issues)."""

    def __init__(self, tests_dir: Path | None) -> None:
        super().__init__()
        self.tests_dir = tests_dir

    def document(self, data: dict[Any, Any]) -> CaseDocument | None:
        for key in data:
            if key not in TOP_LEVEL_KEYS:
                self.fail(
                    str(key),
                    f"unknown key; known keys: {listed(TOP_LEVEL_KEYS)}"
                    + suggestion(str(key), TOP_LEVEL_KEYS),
                )
        title = self.text(data, "title", CASE_TITLE_MAX_LENGTH)
        description = self.text(data, "description", CASE_DESCRIPTION_MAX_LENGTH)
        skip = self.skip(data.get("skip"))
        trigger = self.trigger(data["trigger"]) if data.get("trigger") is not None else None
        variables = self.variables(data.get("variables"))
        workspace = self.workspace(data.get("workspace"))
        mocks = self.mocks(data.get("mocks"))
        steps = StepParser(self.issues).steps(data.get("steps"))
        repeat, pass_rate = self.repetition(data)
        if self.issues or title is None or description is None:
            return None
        try:
            return CaseDocument(
                title=title,
                description=description,
                skip=skip,
                trigger=trigger,
                variables=variables,
                workspace=workspace,
                mocks=mocks,
                steps=steps,
                repeat=repeat,
                pass_rate=pass_rate,
            )
        except ValidationError as exc:  # pragma: no cover - the checks above are the contract
            self.model_issues(exc, "", {})
            return None

    def text(self, data: dict[Any, Any], key: str, budget: int) -> str | None:
        if key not in data or data[key] is None:
            self.fail(key, "required")
            return None
        value = data[key]
        if not isinstance(value, str):
            self.fail(key, "must be a string")
            return None
        collapsed = collapse_whitespace(value)
        if not collapsed:
            self.fail(key, "must be a non-empty string")
            return None
        if len(collapsed) > budget:
            self.fail(
                key,
                f"{len(collapsed)} characters (whitespace collapsed) is over the {budget}-"
                "character budget; keep longer rationale in a YAML comment above the document",
            )
            return None
        return collapsed

    def repetition(self, data: dict[Any, Any]) -> tuple[int, float]:
        """``repeat`` and ``passRate`` (this runtime's): a count of runs, the share of them
        that must pass; passRate alone says nothing (there is one run)."""
        repeat, rate = data.get("repeat"), data.get("passRate")
        runs = 1
        if "repeat" in data:
            if isinstance(repeat, bool) or not isinstance(repeat, int):
                self.fail("repeat", f"must be a whole number of runs, 1 to {REPEAT_MAX}")
            elif not 1 <= repeat <= REPEAT_MAX:
                self.fail("repeat", f"must be 1 to {REPEAT_MAX} runs (got {repeat})")
            else:
                runs = repeat
        share = 1.0
        if "passRate" in data:
            if isinstance(rate, bool) or not isinstance(rate, int | float):
                self.fail("passRate", "must be a number above 0 and at most 1 (0.8: 4 runs of 5)")
            elif not (0 < rate <= 1) or not math.isfinite(rate):
                self.fail("passRate", f"must be above 0 and at most 1 (got {rate})")
            elif "repeat" not in data:
                self.fail(
                    "passRate",
                    "needs repeat: N beside it (the share of N runs that must pass)",
                )
            else:
                share = float(rate)
        return runs, share

    def skip(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail("skip", "must be a non-empty reason (skip: <why the case is skipped>)")
            return None
        return value.strip()

    def trigger(self, value: Any) -> TriggerRef | None:
        if not isinstance(value, dict):
            self.fail("trigger", "must be a mapping { id: <trigger-id> }")
            return None
        body = self.body("trigger", value, TriggerRef, extra_hint=_TRIGGER_ARGS_HINT)
        return self.build(TriggerRef, body, "trigger") if body is not None else None

    def variables(self, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail("variables", "must be a mapping of variable name to value")
            return {}
        self.variable_names("variables", value, seeded=True)
        for name, item in value.items():
            self.json_value(f"variables.{name}", item)
        return dict(value)

    def workspace(self, value: Any) -> dict[str, WorkspaceValue]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail("workspace", "must be a mapping of session path to content")
            return {}
        seeds: dict[str, WorkspaceValue] = {}
        for key, content in value.items():
            path = f"workspace[{key!r}]"
            problem = workspace_path_problem(key)
            if problem is not None:
                self.fail(path, problem)
                continue
            seed = self.workspace_value(path, content)
            if seed is not _INVALID:
                seeds[key] = seed
        return seeds

    def workspace_value(self, path: str, content: Any) -> Any:
        if isinstance(content, dict) and "from" in content:
            if set(content) != {"from"}:
                extra = ", ".join(str(k) for k in content if k != "from")
                self.fail(path, f"a from: reference takes no other keys (got {extra})")
                return _INVALID
            source = content["from"]
            if not isinstance(source, str) or not source.strip():
                self.fail(f"{path}.from", "must be a path relative to the tests/ directory")
                return _INVALID
            problem = from_problem(source, self.tests_dir)
            if problem is not None:
                self.fail(f"{path}.from", problem)
                return _INVALID
            return WorkspaceFrom(from_=source)
        if not self.json_value(path, content):
            return _INVALID
        return content

    def mocks(self, value: Any) -> list[Mock]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail("mocks", "must be a list of { tool, whenInput?, result }")
            return []
        mocks: list[Mock] = []
        for index, entry in enumerate(value):
            path = f"mocks[{index}]"
            if not isinstance(entry, dict):
                self.fail(path, "must be a mapping { tool, whenInput?, result }")
                continue
            body = self.body(path, entry, Mock)
            if body is None:
                continue
            when = body.get("whenInput")
            if when is not None and not isinstance(when, dict):
                self.fail(f"{path}.whenInput", "must be a mapping of input keys to values")
            elif when is not None:
                self.matcher_values(f"{path}.whenInput", when)
            if "result" not in body:
                self.fail(f"{path}.result", "required")
                continue
            self.json_value(f"{path}.result", body["result"])
            mock = self.build(Mock, body, path)
            if mock is not None:
                mocks.append(mock)
        return mocks


_INVALID: Final = object()

_TRIGGER_ARGS_HINT = " (a trigger carries only its id: the payload belongs in variables:)"
