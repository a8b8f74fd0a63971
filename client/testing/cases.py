"""Test cases: ``workflows/<slug>/tests/**/*.test.yaml`` documents, parsed fail closed.

One YAML document is one case: one conversation on one session, read like a script. This
module is the pure half of ``archmax test``: it reads and validates a case document into typed
models (:func:`parse_case`), discovers the cases of a workflow (:func:`discover_cases`) and
holds the partial matcher shared by ``calledTool`` inputs and a mock's ``whenInput``
(:func:`partial_match`). Nothing here talks to Temporal or a model.

The schema fails closed: an unknown top-level or step key is an error naming the known ones,
so a typo'd ``reachedstate:`` cannot silently pass. Every problem of a document is reported at
once, each addressed by its path (``steps[3].reply.includes[1]: ...``), in
:class:`CaseSchemaError`.

Beside the seed's vocabulary, this runtime reads its own extension of the format
(docs/authoring/testing.md, "Cases that wait, crash and retry"): the steps
``advance: <duration>``, ``crash: { during, nth?, at? }`` and ``redeliver: {}``
(:data:`EXTENSION_STEP_CLASSES`) and the case fields ``repeat`` and ``passRate``
(:data:`EXTENSION_TOP_LEVEL_KEYS`). A case that uses none of them parses to exactly what it did
before.
"""

from __future__ import annotations

import datetime
import difflib
import json
import math
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError
from pydantic_core import to_json

from archmax_temporal.client.loader import YamlDocumentError, read_yaml
from archmax_temporal.workflows.durations import InvalidUntilError, relative_duration

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
from archmax_temporal.workflows.models import TrailKind
from archmax_temporal.workflows.spec import VARIABLE_NAME
from archmax_temporal.workflows.variables import invalid_names
from archmax_temporal.workflows.zones import MOUNTS, SCRATCHPAD
from archmax_temporal.workflows.zones import RUNTIME_AREAS as RUNTIME_AREAS

CASE_TITLE_MAX_LENGTH: Final = 60
"""A case title's budget, in characters of whitespace-collapsed text."""

CASE_DESCRIPTION_MAX_LENGTH: Final = 200
"""A case description's budget, in characters of whitespace-collapsed text."""

CASE_MAX_BYTES: Final = 1024 * 1024
"""The largest case file read, in bytes: a bigger one is refused before it is parsed. Depth,
alias and node limits are the loader's (``client/loader.py``, :func:`read_yaml`)."""

CASE_PAYLOAD_MAX_BYTES: Final = 256 * 1024
"""What a case puts in one Temporal payload, serialised: its ``mocks`` (they travel in the
session's start input, beside a spec held to ``SESSION_START_MAX_BYTES``), and a ``send``'s
message with the case's variables, a ``deliver``'s variables or a ``decide``'s comment (a
firing's input). Temporal refuses a payload over 2 MB; a case within its file size can still
expand past that through aliases and escapes (one ``\\x01`` is 6 bytes of JSON)."""

CASE_SUFFIXES: Final = (".test.yaml", ".test.yml")
"""The file names discovery picks up; anything else under ``tests/`` is ignored silently."""

SEED_TOP_LEVEL_KEYS: Final = (
    "title",
    "description",
    "skip",
    "trigger",
    "variables",
    "workspace",
    "mocks",
    "steps",
)
"""The seed's eight keys of a case document, in the order a serializer writes them."""

EXTENSION_TOP_LEVEL_KEYS: Final = ("repeat", "passRate")
"""This runtime's case fields: ``repeat: N`` runs the case N times on fresh sessions, and it
passes when at least ``passRate`` of them passed (default 1: every run)."""

TOP_LEVEL_KEYS: Final = SEED_TOP_LEVEL_KEYS + EXTENSION_TOP_LEVEL_KEYS
"""Every key a case document may have: the seed's eight, then this runtime's."""

REPEAT_MAX: Final = 100
"""The most runs ``repeat`` asks for."""

ADVANCE_MAX: Final = datetime.timedelta(days=3650)
"""The furthest one ``advance`` moves the clock (ten years)."""

DEPRECATED_STEP_ALIASES: Final = {"judge": "grade"}
"""Step keys still accepted for one release, and the key they stand for."""

MOUNT_AREAS: Final = MOUNTS
"""Workspace names the runtime mounts from the authoring tree (read only, never seeded)."""

WRITABLE_AREA: Final = SCRATCHPAD
"""The one directory a case may seed files below (besides root-level files)."""


# --- errors -------------------------------------------------------------------------------


class CaseSchemaError(Exception):
    """A case document does not validate.

    ``issues`` holds every problem found, each ``"<path>: <message>"`` (``steps[3].reachedstate:
    unknown step key; known keys: ...``), so an author fixes them all in one pass.
    """

    def __init__(self, file: str, issues: list[str]) -> None:
        self.file = file
        self.issues = list(issues)
        lines = "\n".join(f"  - {issue}" for issue in self.issues)
        super().__init__(f"{file}: invalid test case\n{lines}")


# --- the document models ------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


NonEmpty = Annotated[str, Field(min_length=1)]


class TriggerRef(_Strict):
    """``trigger: { id }``: the declared trigger every driven turn of the case runs under."""

    id: NonEmpty


class WorkspaceFrom(_Strict):
    """``{ from: <path> }``: a workspace seed copied byte for byte from a file under tests/."""

    from_: NonEmpty = Field(alias="from")


WorkspaceValue = WorkspaceFrom | str | dict[str, Any] | list[Any] | int | float | bool | None
"""A seed: a string (written verbatim), a ``from:`` reference, or any JSON value."""


class Mock(_Strict):
    """A declared tool result: the first mock (in order) whose tool and whenInput match wins."""

    tool: NonEmpty
    when_input: dict[str, Any] | None = Field(default=None, alias="whenInput")
    result: Any


class CaseStep(_Strict):
    """One entry of ``steps``: its key is ``kind``; ``index`` is its position in ``steps``."""

    key: ClassVar[str]
    """The step's key in a case document: the one name of its kind."""
    shape: ClassVar[str | None] = None
    """The mapping an author writes, for errors that show it (None: a scalar or ``true``)."""
    structural: ClassVar[bool] = False
    """Whether a failure of this assertion halts the case (it pins where the session went
    and what it carries); content assertions let the case carry on."""
    is_action: ClassVar[bool] = False
    """Whether the step drives the session (``send``, ``decide``, ``deliver``; of this
    runtime's steps, all three: ``advance`` moves its clock, ``crash`` arms the next action,
    ``redeliver`` sends the previous one again)."""
    checked: ClassVar[bool] = False
    """Whether the step yields a record of its own beside the assertions' (this runtime's
    ``crash`` and ``redeliver``: what the runner checked by itself)."""

    kind: str
    index: StrictInt = Field(ge=0)


class SendStep(CaseStep):
    """``send: "<message>"``: one agent turn with a user message."""

    key: ClassVar[str] = "send"
    is_action: ClassVar[bool] = True

    kind: Literal["send"] = "send"
    message: NonEmpty


class DecideStep(CaseStep):
    """``decide: { to, comment? }``: resume a human park as the reviewer."""

    key: ClassVar[str] = "decide"
    shape: ClassVar[str | None] = "{ to, comment? }"
    is_action: ClassVar[bool] = True

    kind: Literal["decide"] = "decide"
    to: NonEmpty
    comment: str | None = None


class DeliverStep(CaseStep):
    """``deliver: { trigger, variables? }``: resume an input park with the trigger that arrived."""

    key: ClassVar[str] = "deliver"
    shape: ClassVar[str | None] = "{ trigger, variables? }"
    is_action: ClassVar[bool] = True

    kind: Literal["deliver"] = "deliver"
    trigger: NonEmpty
    variables: dict[str, Any] = Field(default_factory=dict)


class SucceededStep(CaseStep):
    """``succeeded: true``: the turn completed, without failing, raising or parking."""

    key: ClassVar[str] = "succeeded"
    structural: ClassVar[bool] = True

    kind: Literal["succeeded"] = "succeeded"


class ParkedStep(CaseStep):
    """``parked: true | decision | input | { channel?, state? }``."""

    key: ClassVar[str] = "parked"
    structural: ClassVar[bool] = True

    kind: Literal["parked"] = "parked"
    channel: Literal["decision", "input"] | None = None
    state: NonEmpty | None = None


class RaisedStep(CaseStep):
    """``raised: true | <code> | { code?, reason? }``; ``reason`` may be a regex."""

    key: ClassVar[str] = "raised"
    structural: ClassVar[bool] = True

    kind: Literal["raised"] = "raised"
    code: NonEmpty | None = None
    reason: NonEmpty | None = None


class ReachedStateStep(CaseStep):
    """``reachedState: <slug>``: a committed (non-trigger) trail step entered the state."""

    key: ClassVar[str] = "reachedState"
    structural: ClassVar[bool] = True

    kind: Literal["reachedState"] = "reachedState"
    state: NonEmpty


class ReplyStep(CaseStep):
    """``reply: { includes?, excludes? }``: substring or regex tokens over the transcript."""

    key: ClassVar[str] = "reply"
    shape: ClassVar[str | None] = "{ includes?, excludes? }"

    kind: Literal["reply"] = "reply"
    includes: list[NonEmpty] = Field(default_factory=list)
    excludes: list[NonEmpty] = Field(default_factory=list)


class _ToolStep(CaseStep):
    name: NonEmpty
    input: dict[str, Any] | None = None


class CalledToolStep(_ToolStep):
    """``calledTool: { name, input? }``: a recorded call whose input partially matches."""

    key: ClassVar[str] = "calledTool"
    shape: ClassVar[str | None] = "{ name, input? }"

    kind: Literal["calledTool"] = "calledTool"


class NotCalledToolStep(_ToolStep):
    """``notCalledTool: { name, input? }``: no recorded call matches."""

    key: ClassVar[str] = "notCalledTool"
    shape: ClassVar[str | None] = "{ name, input? }"

    kind: Literal["notCalledTool"] = "notCalledTool"


class BlockedToolStep(_ToolStep):
    """``blockedTool: { name, input? }``: a matching call was made and refused by governance."""

    key: ClassVar[str] = "blockedTool"
    shape: ClassVar[str | None] = "{ name, input? }"

    kind: Literal["blockedTool"] = "blockedTool"


class UsedNoToolsStep(CaseStep):
    """``usedNoTools: true``: the session recorded no tool calls at all."""

    key: ClassVar[str] = "usedNoTools"

    kind: Literal["usedNoTools"] = "usedNoTools"


class RanWorkflowStep(CaseStep):
    """``ranWorkflow: { workflow, status?, count? }``: sub-workflow dispatches on the trail."""

    key: ClassVar[str] = "ranWorkflow"
    shape: ClassVar[str | None] = "{ workflow, status?, count? }"

    kind: Literal["ranWorkflow"] = "ranWorkflow"
    workflow: NonEmpty
    status: Literal["ok", "error"] = "ok"
    count: StrictInt | None = Field(default=None, ge=0)


class TrailAssertionStep(CaseStep):
    """``trail: { to?, kind?, reason?, count }``: exactly ``count`` trail steps match.

    The trail step's ``kind`` is held as ``trail_kind`` (``kind`` is the step's own key).
    """

    key: ClassVar[str] = "trail"
    shape: ClassVar[str | None] = "{ to?, kind?, reason?, count }"
    structural: ClassVar[bool] = True

    kind: Literal["trail"] = "trail"
    to: NonEmpty | None = None
    trail_kind: TrailKind | None = None
    reason: NonEmpty | None = None
    count: StrictInt = Field(ge=0)


class NoTraversalStep(CaseStep):
    """``noTraversal: true``: the trail holds only trigger arrivals."""

    key: ClassVar[str] = "noTraversal"
    structural: ClassVar[bool] = True

    kind: Literal["noTraversal"] = "noTraversal"


class TriggerArrivalStep(CaseStep):
    """``triggerArrival: <id>``: some trigger step of the trail has that id as its reason."""

    key: ClassVar[str] = "triggerArrival"
    structural: ClassVar[bool] = True

    kind: Literal["triggerArrival"] = "triggerArrival"
    trigger: NonEmpty


class VariablesStep(CaseStep):
    """``variables: { expect, path?, locked? }``: deep equality per name, lock states."""

    key: ClassVar[str] = "variables"
    shape: ClassVar[str | None] = "{ expect, path?, locked? }"
    structural: ClassVar[bool] = True

    kind: Literal["variables"] = "variables"
    expect: dict[str, Any]
    path: dict[str, NonEmpty] | None = None
    locked: dict[str, StrictBool] | None = None


class GradeStep(CaseStep):
    """``grade: { closedQA, atLeast }``: a model scores the turn; under ``atLeast`` fails.

    ``written_as`` is ``judge`` for the deprecated alias.
    """

    key: ClassVar[str] = "grade"
    shape: ClassVar[str | None] = "{ closedQA, atLeast }"

    kind: Literal["grade"] = "grade"
    closed_qa: NonEmpty = Field(alias="closedQA")
    at_least: Annotated[float, Field(ge=0, le=1, strict=True)] = Field(alias="atLeast")
    written_as: Literal["grade", "judge"] = "grade"


# --- this runtime's extension of the format -------------------------------------------------


class AdvanceStep(CaseStep):
    """``advance: <duration>`` (``until``'s relative syntax: ``90s``, ``3d``): the session's
    clock moves on by that much; every durable timer due in the span fires (a parked
    ``until``, a human state's deadline, an idle close) and the turns they wake run to their
    end before the next step. The case runs on Temporal's time-skipping test server."""

    key: ClassVar[str] = "advance"
    is_action: ClassVar[bool] = True

    kind: Literal["advance"] = "advance"
    by: NonEmpty
    """As written (``3d``)."""
    duration: datetime.timedelta


CrashKind = Literal["model", "tool", "hook", "store"]
"""Which activities a ``crash`` counts (client.testing.durable.CRASH_KINDS maps them)."""

CRASH_KINDS: Final[tuple[CrashKind, ...]] = ("model", "tool", "hook", "store")
"""What ``crash.during`` may name, in the order the errors list them."""


class CrashStep(CaseStep):
    """``crash: { during, nth?, at? }``: arms the next action. The worker running that
    action's turn is killed without draining right after the ``nth`` activity of the kind
    ``during`` names starts (``at: start``, the default) or has done its work and not yet
    reported it (``at: complete``); a fresh worker resumes the session."""

    key: ClassVar[str] = "crash"
    shape: ClassVar[str | None] = "{ during, nth?, at? }"
    is_action: ClassVar[bool] = True
    checked: ClassVar[bool] = True

    kind: Literal["crash"] = "crash"
    during: CrashKind
    nth: StrictInt = Field(default=1, ge=1)
    at: Literal["start", "complete"] = "start"


class RedeliverStep(CaseStep):
    """``redeliver: {}``: the previous ``send``, ``decide`` or ``deliver`` sent again with the
    same idempotency key, as a retried webhook would be; the session must answer with the
    first outcome and apply nothing twice."""

    key: ClassVar[str] = "redeliver"
    shape: ClassVar[str | None] = "{}"
    is_action: ClassVar[bool] = True
    checked: ClassVar[bool] = True

    kind: Literal["redeliver"] = "redeliver"


Step = Annotated[
    SendStep
    | DecideStep
    | DeliverStep
    | SucceededStep
    | ParkedStep
    | RaisedStep
    | ReachedStateStep
    | ReplyStep
    | CalledToolStep
    | NotCalledToolStep
    | BlockedToolStep
    | UsedNoToolsStep
    | RanWorkflowStep
    | TrailAssertionStep
    | NoTraversalStep
    | TriggerArrivalStep
    | VariablesStep
    | GradeStep
    | AdvanceStep
    | CrashStep
    | RedeliverStep,
    Field(discriminator="kind"),
]
"""A parsed step, discriminated by its key."""

ToolStep = CalledToolStep | NotCalledToolStep | BlockedToolStep


class CaseDocument(_Strict):
    """One validated case document.

    ``title`` and ``description`` are held whitespace-collapsed: the one-line label the CLI
    prints and the sentence it was measured as.
    """

    title: NonEmpty
    description: NonEmpty
    skip: NonEmpty | None = None
    trigger: TriggerRef | None = None
    variables: dict[str, Any] = Field(default_factory=dict)
    workspace: dict[str, WorkspaceValue] = Field(default_factory=dict)
    mocks: list[Mock] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    repeat: StrictInt = Field(default=1, ge=1, le=REPEAT_MAX)
    """This runtime's ``repeat``: how many runs, each on a fresh session."""
    pass_rate: float = Field(default=1.0, gt=0, le=1, alias="passRate")
    """This runtime's ``passRate``: the share of runs that must pass."""

    @property
    def actions(self) -> list[CaseStep]:
        """The steps that drive the session, in order."""
        return [step for step in self.steps if step.is_action]

    @property
    def assertions(self) -> list[CaseStep]:
        """The assertion steps, in order."""
        return [step for step in self.steps if not step.is_action]

    @property
    def recorded(self) -> list[CaseStep]:
        """The steps that yield records: the assertions, and this runtime's checks
        (``crash``, ``redeliver``); one that never ran is reported not-executed."""
        return [step for step in self.steps if not step.is_action or step.checked]

    @property
    def advances(self) -> bool:
        """Whether the case moves the clock (then it runs on the time-skipping server)."""
        return any(isinstance(step, AdvanceStep) for step in self.steps)

    @property
    def crashes(self) -> bool:
        """Whether the case kills a worker (then it runs on workers of its own)."""
        return any(isinstance(step, CrashStep) for step in self.steps)


STEP_CLASSES: Final[tuple[type[CaseStep], ...]] = (
    SendStep,
    DecideStep,
    DeliverStep,
    SucceededStep,
    ParkedStep,
    RaisedStep,
    ReachedStateStep,
    ReplyStep,
    CalledToolStep,
    NotCalledToolStep,
    BlockedToolStep,
    UsedNoToolsStep,
    RanWorkflowStep,
    TrailAssertionStep,
    NoTraversalStep,
    TriggerArrivalStep,
    VariablesStep,
    GradeStep,
)
"""Every step kind, once, in the seed's order: the one list the schema, the assertions and
the validator read (each class carries its key, shape and whether it is structural)."""


ACTION_KINDS: Final = tuple(cls.key for cls in STEP_CLASSES if cls.is_action)
"""Step keys that drive the session; every other step is an assertion about the last one."""

ASSERTION_KINDS: Final = tuple(cls.key for cls in STEP_CLASSES if not cls.is_action)
"""The documented assertion keys (``judge`` is accepted as a deprecated alias of ``grade``)."""

STEP_KINDS: Final = ACTION_KINDS + ASSERTION_KINDS
"""Every documented step key, as an unknown-step error lists them."""

STRUCTURAL_KINDS: Final = frozenset(cls.key for cls in STEP_CLASSES if cls.structural)
"""Assertions that pin where the session went and what it carries: a miss halts the case."""

EXTENSION_STEP_CLASSES: Final[tuple[type[CaseStep], ...]] = (
    AdvanceStep,
    CrashStep,
    RedeliverStep,
)
"""This runtime's step kinds, once: the seed's vocabulary above stays the seed's."""

EXTENSION_STEP_KINDS: Final = tuple(cls.key for cls in EXTENSION_STEP_CLASSES)
"""``advance``, ``crash``, ``redeliver``: as an unknown-step error names them."""

CRASH_ARMS: Final = ("send", "decide", "deliver", "advance")
"""The steps a ``crash`` may arm (the one right after it)."""

REDELIVERABLE: Final = ("send", "decide", "deliver")
"""The actions a ``redeliver`` may send again."""

_STEP_MODELS: Final[dict[str, type[CaseStep]]] = {
    cls.key: cls for cls in (*STEP_CLASSES, *EXTENSION_STEP_CLASSES)
}


# --- discovery ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DiscoveredCase:
    """A case file found under a workflow's ``tests/``.

    ``id`` is its tests-relative path without the extension (``refund/approved``); ``path``
    is where it lives on disk.
    """

    id: str
    path: Path

    @property
    def file(self) -> str:
        """The tests-relative file name, extension included (``refund/approved.test.yaml``)."""
        suffix = next(s for s in CASE_SUFFIXES if self.path.name.endswith(s))
        return self.id + suffix


def case_id(relative: str) -> str | None:
    """The id of the tests-relative posix path ``relative``, or None if it is no case file."""
    for suffix in CASE_SUFFIXES:
        if relative.endswith(suffix) and len(relative) > len(suffix):
            return relative[: -len(suffix)]
    return None


def discover_cases(workflow_dir: Path, filter: str | None = None) -> list[DiscoveredCase]:
    """The cases under ``workflow_dir/tests/``, recursively, sorted by path.

    Only ``*.test.yaml`` / ``*.test.yml`` files are cases; anything else is ignored without a
    diagnostic. ``filter`` keeps the cases whose tests-relative path contains it. A missing
    tests directory is an empty suite.
    """
    tests_dir = workflow_dir / "tests"
    if not tests_dir.is_dir():
        return []
    found: list[tuple[str, DiscoveredCase]] = []
    for path in tests_dir.rglob("*"):
        if not path.is_file():
            continue
        relative = path.relative_to(tests_dir).as_posix()
        identifier = case_id(relative)
        if identifier is None or (filter is not None and filter not in relative):
            continue
        found.append((relative, DiscoveredCase(id=identifier, path=path)))
    found.sort(key=lambda pair: pair[0])
    return [case for _, case in found]


def load_case(case: DiscoveredCase, tests_dir: Path) -> CaseDocument:
    """Read and parse a discovered case; an unreadable file is a :class:`CaseSchemaError`."""
    return parse_case(case.file, case.path, tests_dir)


# --- parsing ------------------------------------------------------------------------------


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


def _known(keys: Any) -> str:
    return ", ".join(keys)


def _either(keys: tuple[str, ...]) -> str:
    """``a, b or c``."""
    return f"{', '.join(keys[:-1])} or {keys[-1]}" if len(keys) > 1 else keys[0]


def _suggestion(key: str, known: tuple[str, ...]) -> str:
    """`` (did you mean "reachedState"?)`` for a near miss of a known key, else nothing."""
    folded = {k.lower(): k for k in known}
    close = difflib.get_close_matches(key.lower(), list(folded), n=1, cutoff=0.8)
    return f' (did you mean "{folded[close[0]]}"?)' if close else ""


class _Parser:
    """Collects the issues of one document while building its models."""

    def __init__(self, tests_dir: Path | None) -> None:
        self.tests_dir = tests_dir
        self.issues: list[str] = []

    def fail(self, path: str, message: str) -> None:
        line = f"{path}: {message}"
        if line not in self.issues:
            self.issues.append(line)

    # -- the document --

    def document(self, data: dict[Any, Any]) -> CaseDocument | None:
        for key in data:
            if key not in TOP_LEVEL_KEYS:
                self.fail(
                    str(key),
                    f"unknown key; known keys: {_known(TOP_LEVEL_KEYS)}"
                    + _suggestion(str(key), TOP_LEVEL_KEYS),
                )
        title = self.text(data, "title", CASE_TITLE_MAX_LENGTH)
        description = self.text(data, "description", CASE_DESCRIPTION_MAX_LENGTH)
        skip = self.skip(data.get("skip"))
        trigger = self.trigger(data["trigger"]) if data.get("trigger") is not None else None
        variables = self.variables(data.get("variables"))
        workspace = self.workspace(data.get("workspace"))
        mocks = self.mocks(data.get("mocks"))
        steps = self.steps(data.get("steps"))
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

    def variable_names(self, path: str, value: dict[Any, Any], *, seeded: bool) -> None:
        names = list(value)
        bad = (
            invalid_names(names)
            if seeded
            else [n for n in names if not isinstance(n, str) or not VARIABLE_NAME.match(n)]
        )
        for name in bad:
            if name == "trigger":
                self.fail(
                    f"{path}.trigger",
                    "'trigger' is set by the runtime from the trigger id, never seeded "
                    "(write the case's trigger: { id })",
                )
            else:
                self.fail(f"{path}.{name}", "invalid variable name (^[a-z][a-z0-9_]*$)")

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
            problem = self.from_problem(source)
            if problem is not None:
                self.fail(f"{path}.from", problem)
                return _INVALID
            return WorkspaceFrom(from_=source)
        if not self.json_value(path, content):
            return _INVALID
        return content

    def from_problem(self, source: str) -> str | None:
        normalized = posixpath.normpath(source.replace("\\", "/"))
        if (
            posixpath.isabs(normalized)
            or normalized == ".."
            or normalized.startswith("../")
            or re.match(r"^[A-Za-z]:", normalized)
        ):
            return f"{source!r} escapes the tests/ directory"
        if self.tests_dir is None:
            return None
        base = self.tests_dir.resolve()
        target = (base / normalized).resolve()
        if not target.is_relative_to(base):
            return f"{source!r} escapes the tests/ directory"
        if not target.is_file():
            return f"{source!r} names no file under tests/"
        return None

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

    # -- steps --

    def steps(self, value: Any) -> list[CaseStep]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail("steps", "must be a list of single-key step mappings")
            return []
        steps: list[CaseStep] = []
        acted = False
        for index, entry in enumerate(value):
            path = f"steps[{index}]"
            if not isinstance(entry, dict) or len(entry) != 1:
                got = (
                    f"a mapping with {len(entry)} keys ({_known(str(k) for k in entry)})"
                    if isinstance(entry, dict)
                    else type(entry).__name__
                    if entry is not None
                    else "null"
                )
                self.fail(
                    path,
                    f"a step must be a single-key mapping such as send: or reachedState: "
                    f"(got {got}); write each action and assertion as its own list entry",
                )
                continue
            ((key, body),) = entry.items()
            key = str(key)
            written_as = key
            key = DEPRECATED_STEP_ALIASES.get(key, key)
            if key not in _STEP_MODELS:
                known = STEP_KINDS + EXTENSION_STEP_KINDS
                hint = _suggestion(written_as, known) or (
                    f"; this runtime's extensions: {_known(EXTENSION_STEP_KINDS)}"
                )
                self.fail(
                    f"{path}.{written_as}",
                    f"unknown step key; known keys: {_known(STEP_KINDS)}{hint}",
                )
                continue
            if key in ACTION_KINDS or key in ("advance", "redeliver"):
                acted = True
            elif key == "crash":
                pass  # it arms the action after it: the order is checked below
            elif not acted:
                acted = True  # reported once, at the first assertion with no action above it
                self.fail(
                    f"{path}.{written_as}",
                    "an assertion needs an action above it (send, decide or deliver): it "
                    "evaluates against the view of the nearest action before it",
                )
            step = self.step(f"{path}.{written_as}", index, key, written_as, body)
            if step is not None:
                steps.append(step)
        self.order(value)
        return steps

    def order(self, entries: list[Any]) -> None:
        """Where this runtime's steps may stand: a ``crash`` right before the action it arms,
        an ``advance`` after the session exists, a ``redeliver`` after what it sends again."""
        keys = [
            str(next(iter(entry))) if isinstance(entry, dict) and len(entry) == 1 else None
            for entry in entries
        ]
        for index, key in enumerate(keys):
            path = f"steps[{index}].{key}"
            before = [k for k in keys[:index] if k in ACTION_KINDS]
            if key == "crash":
                after = keys[index + 1] if index + 1 < len(keys) else None
                if after not in CRASH_ARMS:
                    got = f"got {after}" if after else "nothing follows it"
                    self.fail(
                        path,
                        "a crash arms the action right after it, which must be "
                        f"{_either(CRASH_ARMS)} ({got})",
                    )
            elif key == "advance" and not before:
                self.fail(
                    path,
                    "advance moves the clock of the case's session: a send must come before it",
                )
            elif key == "redeliver":
                previous = next(
                    (
                        k
                        for k in reversed(keys[:index])
                        if k is not None
                        and k != "redeliver"
                        and k in _STEP_MODELS
                        and (_STEP_MODELS[k].is_action)
                    ),
                    None,
                )
                if previous == "advance":
                    self.fail(
                        path,
                        "redeliver cannot follow an advance: once the clock moved on the "
                        "session may have closed idle and reopened in a new run, which no "
                        "longer knows the first delivery's idempotency key (Temporal answers "
                        "an update id within its run only); put the redeliver right after the "
                        "send, decide or deliver it repeats",
                    )
                elif previous not in REDELIVERABLE:
                    got = f"the action before it is {previous}" if previous else "none came"
                    self.fail(
                        path,
                        f"redeliver sends the previous send, decide or deliver again ({got})",
                    )

    def step(
        self, path: str, index: int, kind: str, written_as: str, value: Any
    ) -> CaseStep | None:
        model = _STEP_MODELS[kind]
        fields = self.step_fields(path, kind, value)
        if fields is None:
            return None
        if kind == "grade":
            fields["written_as"] = written_as
        return cast("CaseStep | None", self.build(model, {**fields, "index": index}, path))

    def step_fields(self, path: str, kind: str, value: Any) -> dict[str, Any] | None:
        """The model fields of one step, its shorthand forms expanded; None on an issue."""
        if kind == "send":
            if not isinstance(value, str) or not value.strip():
                self.fail(path, 'must be the non-empty user message (send: "<message>")')
                return None
            return {"message": value}
        if kind in ("succeeded", "usedNoTools", "noTraversal"):
            if value is not True:
                self.fail(path, f"must be true ({kind}: true)")
                return None
            return {}
        if kind in ("reachedState", "triggerArrival"):
            field = "state" if kind == "reachedState" else "trigger"
            noun = "a state slug" if kind == "reachedState" else "a trigger id"
            if not isinstance(value, str) or not value.strip():
                self.fail(path, f"must be {noun} ({kind}: <{field}>)")
                return None
            return {field: value}
        if kind == "advance":
            return self.advance(path, value)
        if kind == "redeliver":
            if value != {}:
                self.fail(path, "takes nothing: write redeliver: {}")
                return None
            return {}
        if kind == "parked":
            return self.parked(path, value)
        if kind == "raised":
            return self.raised(path, value)
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping {_STEP_SHAPES[kind]}")
            return None
        body = self.body(path, value, _STEP_MODELS[kind])
        if body is None:
            return None
        if kind == "deliver":
            variables = body.get("variables")
            if isinstance(variables, dict):
                self.variable_names(f"{path}.variables", variables, seeded=True)
                for name, item in variables.items():
                    self.json_value(f"{path}.variables.{name}", item)
        elif kind == "reply":
            return self.reply(path, body)
        elif kind in ("calledTool", "notCalledTool", "blockedTool"):
            tool_input = body.get("input")
            if isinstance(tool_input, dict):
                self.matcher_values(f"{path}.input", tool_input)
        elif kind == "trail":
            if not any(body.get(k) is not None for k in ("to", "kind", "reason")):
                self.fail(path, "needs at least one of to, kind or reason beside count")
                return None
            if "kind" in body:
                body["trail_kind"] = body.pop("kind")
        elif kind == "variables":
            return self.variables_assertion(path, body)
        return body

    def advance(self, path: str, value: Any) -> dict[str, Any] | None:
        if not isinstance(value, str) or not value.strip():
            self.fail(path, "must be a duration in until's relative syntax (90s, 30m, 2h, 3d)")
            return None
        try:
            duration = relative_duration(value)
        except InvalidUntilError as exc:
            self.fail(path, str(exc))
            return None
        if duration <= datetime.timedelta(0):
            self.fail(path, "must be a duration above zero (90s, 30m, 2h, 3d)")
            return None
        if duration > ADVANCE_MAX:
            self.fail(path, f"moves the clock at most {ADVANCE_MAX.days}d at once")
            return None
        return {"by": value.strip(), "duration": duration}

    def parked(self, path: str, value: Any) -> dict[str, Any] | None:
        if value is True:
            return {}
        if value in ("decision", "input"):
            return {"channel": value}
        if isinstance(value, dict):
            body = self.body(path, value, ParkedStep)
            if body is not None and not body:
                self.fail(path, "an empty mapping pins nothing (write parked: true)")
                return None
            return body
        self.fail(path, "must be true, decision, input or { channel?, state? }")
        return None

    def raised(self, path: str, value: Any) -> dict[str, Any] | None:
        if value is True:
            return {}
        if isinstance(value, str) and value.strip():
            return {"code": value}
        if isinstance(value, dict):
            body = self.body(path, value, RaisedStep)
            if body is None:
                return None
            if not body:
                self.fail(path, "an empty mapping pins nothing (write raised: true)")
                return None
            reason = body.get("reason")
            if isinstance(reason, str):
                self.regex(f"{path}.reason", reason)
            return body
        self.fail(path, "must be true, an error code or { code?, reason? }")
        return None

    def reply(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if body.get("includes") is None and body.get("excludes") is None:
            self.fail(path, "needs includes, excludes or both")
            return None
        fields: dict[str, Any] = {}
        before = len(self.issues)
        for key in ("includes", "excludes"):
            if body.get(key) is None:
                continue
            tokens = body[key] if isinstance(body[key], list) else [body[key]]
            if not tokens:
                self.fail(f"{path}.{key}", "must name at least one token")
                continue
            for position, token in enumerate(tokens):
                where = (
                    f"{path}.{key}"
                    if not isinstance(body[key], list)
                    else (f"{path}.{key}[{position}]")
                )
                if not isinstance(token, str) or not token:
                    self.fail(where, "a token is a non-empty substring or /pattern/flags string")
                else:
                    self.regex(where, token)
            fields[key] = tokens
        return fields if len(self.issues) == before else None

    def variables_assertion(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        expect = body.get("expect")
        if expect is None:
            self.fail(f"{path}.expect", "required (a mapping of variable name to value)")
            return None
        if not isinstance(expect, dict) or not expect:
            self.fail(f"{path}.expect", "must be a non-empty mapping of variable name to value")
            return None
        self.variable_names(f"{path}.expect", expect, seeded=False)
        for name, item in expect.items():
            self.json_value(f"{path}.expect.{name}", item)
        paths = body.get("path")
        if isinstance(paths, dict):
            for name, dotted in paths.items():
                if name not in expect:
                    self.fail(f"{path}.path.{name}", "names no variable of expect")
                elif not isinstance(dotted, str) or not all(dotted.split(".")):
                    self.fail(
                        f"{path}.path.{name}",
                        "must be a dotted path into the value (items.-1.sku)",
                    )
        locked = body.get("locked")
        if isinstance(locked, dict):
            self.variable_names(f"{path}.locked", locked, seeded=False)
        return body

    # -- shared checks --

    def body(
        self,
        path: str,
        value: dict[Any, Any],
        model: type[BaseModel],
        extra_hint: str = "",
    ) -> dict[str, Any] | None:
        """``value`` if it names only the keys ``model`` declares (by their written names)."""
        known = _written_keys(model)
        unknown = [key for key in value if key not in known]
        for key in unknown:
            self.fail(f"{path}.{key}", f"unknown key; known keys: {_known(known)}{extra_hint}")
        return None if unknown else {str(k): v for k, v in value.items()}

    def build(self, model: type[Any], fields: dict[str, Any], path: str) -> Any:
        try:
            return model.model_validate(fields)
        except ValidationError as exc:
            self.model_issues(exc, path, fields)
            return None

    def model_issues(self, exc: ValidationError, prefix: str, data: Any) -> None:
        for error in exc.errors():
            where = _address(prefix, error["loc"], data, missing=error["type"] == "missing")
            if error["type"] == "missing":
                self.fail(where, "required")
            elif error["type"] == "literal_error":
                expected = _sorted_choices(str(error.get("ctx", {}).get("expected", "")))
                self.fail(where, f"must be one of {expected}")
            else:
                self.fail(where, str(error["msg"]).removeprefix("Value error, "))

    def regex(self, path: str, text: str) -> None:
        problem = regex_problem(text)
        if problem is not None:
            self.fail(path, problem)

    def matcher_values(self, path: str, value: Any) -> None:
        """Every string of a partial-match pattern that is a regex must compile."""
        if isinstance(value, dict):
            for key, item in value.items():
                self.matcher_values(f"{path}.{key}", item)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.matcher_values(f"{path}[{index}]", item)
        elif isinstance(value, str):
            self.regex(path, value)
        else:
            self.json_value(path, value)

    def json_value(self, path: str, value: Any) -> bool:
        problem = _json_problem(value)
        if problem is not None:
            self.fail(path, problem)
            return False
        return True


_INVALID: Final = object()

_TRIGGER_ARGS_HINT = " (a trigger carries only its id: the payload belongs in variables:)"

_STEP_SHAPES: Final = {key: cls.shape for key, cls in _STEP_MODELS.items() if cls.shape is not None}

_INTERNAL_FIELDS: Final = frozenset({"index", "kind", "written_as", "trail_kind"})


def _written_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys an author writes for ``model``: aliases first, internal fields left out."""
    keys = [
        info.alias or name
        for name, info in model.model_fields.items()
        if name not in _INTERNAL_FIELDS
    ]
    if model is TrailAssertionStep:
        keys.insert(1, "kind")
    return tuple(keys)


def _address(prefix: str, loc: tuple[int | str, ...], data: Any, *, missing: bool) -> str:
    """``prefix`` extended by the parts of ``loc`` that index into ``data``.

    A part that indexes nothing is a pydantic tag (a union branch) and is dropped, except the
    last part of a ``missing`` error: that is the absent key itself.
    """
    path = prefix
    node = data
    for position, part in enumerate(loc):
        if _indexes(node, part):
            node = node[part]
        elif not (missing and position == len(loc) - 1):
            continue
        if isinstance(part, int):
            path = f"{path}[{part}]"
        else:
            name = "kind" if part == "trail_kind" else part
            path = f"{path}.{name}" if path else name
    return path or "<root>"


def _indexes(node: Any, part: object) -> bool:
    if isinstance(node, dict):
        return part in node
    if isinstance(node, list):
        return isinstance(part, int) and 0 <= part < len(node)
    return False


def _json_problem(value: Any) -> str | None:
    """Why ``value`` is no JSON value (a YAML date, a set, binary data), or None."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else "must be a finite number (JSON has no NaN)"
    if isinstance(value, list):
        return next((p for p in map(_json_problem, value) if p), None)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return "mapping keys must be strings (quote them)"
        return next((p for p in map(_json_problem, value.values()) if p), None)
    if isinstance(value, datetime.date | datetime.datetime):
        return "a YAML date is not a JSON value (quote it to make it a string)"
    return f"a YAML {type(value).__name__} is not a JSON value"


def workspace_path_problem(path: Any) -> str | None:
    """Why ``path`` cannot be seeded into a session workspace, or None.

    Seeds go to agent-visible session paths only: a root-level file (``trigger.json``) or a
    file under ``scratchpad/``. Mounts (``skills/…``, ``AGENTS.md``) and runtime areas
    (``artifacts/``, ``checkpoints/``…) are refused.
    """
    if not isinstance(path, str) or not path:
        return "a workspace key must be a non-empty session path"
    if path.startswith("/") or "\\" in path or re.match(r"^[A-Za-z]:", path):
        return "must be a workspace-relative path (no leading '/', no '\\')"
    if re.search(r"[\x00-\x1f\x7f]", path):
        return "must not contain control characters"
    segments = path.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        return "must be a canonical relative path (no empty, '.' or '..' segments)"
    head = segments[0]
    if head in MOUNT_AREAS:
        return f"{head}{'/' if len(segments) > 1 else ''} is a mount, not a seedable session path"
    if head in RUNTIME_AREAS:
        return f"{head}/ is a runtime area, not a seedable session path"
    if head == WRITABLE_AREA:
        return None if len(segments) > 1 else "scratchpad is a directory; seed a file below it"
    if len(segments) > 1:
        return (
            f"{head}/ is not an agent-visible session area; seed a root-level file "
            "(trigger.json) or a file under scratchpad/"
        )
    return None


def workspace_seeds(document: CaseDocument, tests_dir: Path) -> dict[str, bytes]:
    """The workspace files a case seeds, as bytes: strings verbatim, other values as pretty
    JSON, ``from:`` references copied byte for byte from under ``tests_dir``."""
    seeds: dict[str, bytes] = {}
    for path, content in document.workspace.items():
        if isinstance(content, WorkspaceFrom):
            seeds[path] = (tests_dir / content.from_).read_bytes()
        elif isinstance(content, str):
            seeds[path] = content.encode("utf-8")
        else:
            seeds[path] = json.dumps(content, indent=2, ensure_ascii=False).encode("utf-8")
    return seeds


def _sorted_choices(expected: str) -> str:
    """Pydantic's ``'a', 'b' or 'c'`` in sorted order: its own order varies between processes
    (string literals are hashed), and a diagnostic must read the same on every run."""
    head, _, last = expected.rpartition(" or ")
    choices = (
        [c.strip() for c in head.split(",") if c.strip()] + [last.strip()]
        if head
        else [last.strip()]
    )
    choices = sorted(c for c in choices if c)
    if len(choices) < 2:
        return expected
    return ", ".join(choices[:-1]) + " or " + choices[-1]
