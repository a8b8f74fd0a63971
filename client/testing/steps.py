"""A case's steps: one class per step kind (its key, its shape, whether a miss halts the
case), and the registries derived from them.

A step is one entry of a case's ``steps:``: an action that drives the session (``send``,
``decide``, ``deliver``) or an assertion about where the nearest action above left it. The seed's
vocabulary is :data:`STEP_CLASSES`; this runtime's extension of the format
(docs/authoring/testing.md, "Cases that wait, crash and retry") is
:data:`EXTENSION_STEP_CLASSES`: ``advance: <duration>``, ``crash: { during, nth?, at? }`` and
``redeliver: {}``. Every other list of step keys is derived from these two.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from archmax_temporal.workflows.models import TrailKind

DEPRECATED_STEP_ALIASES: Final = {"judge": "grade"}
"""Step keys still accepted for one release, and the key they stand for."""


class CaseSchemaModel(BaseModel):
    """A model of the case schema: unknown keys refused, frozen, filled by alias or name."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


NonEmpty = Annotated[str, Field(min_length=1)]


class CaseStep(CaseSchemaModel):
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
"""Which activities a ``crash`` counts (:data:`archmax_temporal.client.testing.durable.CRASH_KINDS`
maps them)."""

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

STEP_MODELS: Final[dict[str, type[CaseStep]]] = {
    cls.key: cls for cls in (*STEP_CLASSES, *EXTENSION_STEP_CLASSES)
}
"""Every step class by its key, this runtime's included: what a step entry is built into."""
