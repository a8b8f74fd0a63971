"""The data that crosses a boundary: workflow input, updates, signals, queries, activities.

One module both sides import, one pydantic model per message, so fields can be added
compatibly (new fields get defaults). Rolling upgrades put clients and workers of different
versions on one namespace, so every model here ignores the fields it does not know: an older
worker decodes a newer client's payload (and the other way round) instead of failing it. What
a user authors (the workflow.yaml spec, case files) is parsed strictly elsewhere. Pure: no
I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
)
from pydantic.alias_generators import to_camel

from archmax_temporal.workflows.limits import Limits
from archmax_temporal.workflows.spec import WorkflowSpec

SessionStatus = Literal[
    "new", "running", "awaiting_input", "awaiting_decision", "completed", "failed", "rejected"
]
"""``new``: the session's workflow started but no firing has been accepted yet (it never
ran a turn); then open (running, parked) or finished, as the seeds partition them."""
FINISHED_STATUSES: frozenset[str] = frozenset({"completed", "failed", "rejected"})
OPEN_STATUSES: frozenset[str] = frozenset({"running", "awaiting_input", "awaiting_decision"})

OutcomeKind = Literal["completed", "parked", "failed", "rejected"]
Disposition = Literal["turn", "reply", "deliver", "decide"]
NoteKind = Literal["decision", "event", "error", "after", "sub-workflow", "opening"]
TrailKind = Literal["trigger", "agent", "human", "sub-workflow", "reset", "on_error"]
DecidedBy = Literal["deadline"]
"""Who took a decision at a human state when no person did: its ``deadline``."""
ApprovalEvent = Literal["approval.expiring", "approval.expired"]
"""The notifications a human state's deadline sends: ``warn`` before it, and when it passes."""
TodoStatus = Literal["pending", "in_progress", "completed"]


def is_finished(status: str) -> bool:
    """True for completed, failed and rejected: the turn is over, the next event is a new turn.

    A parked session (awaiting input or a decision) is open, never finished.
    """
    return status in FINISHED_STATUSES


def build_deferred() -> int:
    """Build every project model whose schema was deferred, and say how many.

    The wire models defer their schemas (``defer_build``), so a command that validates few of
    them (``archmax sessions``) does not pay for all. Workers and replayers build them all
    before workflow code runs (:func:`archmax_temporal.worker.workflow_runner`): no schema is
    then built inside a workflow task or by two activity threads at once."""
    built = 0
    seen: set[type[BaseModel]] = set()
    pending: list[type[BaseModel]] = [BaseModel]
    while pending:
        for model in pending.pop().__subclasses__():
            if model in seen:
                continue
            seen.add(model)
            pending.append(model)
            if model.__module__.startswith("archmax_temporal.") and not model.__pydantic_complete__:
                model.model_rebuild()
                built += 1
    return built


def _unset(value: object) -> bool:
    """Whether a wire field holds nothing (None, an empty list or map, False): left out of
    the JSON, it reads back as its default."""
    return value is None or value is False or (isinstance(value, list | dict) and not value)


class _Model(BaseModel):
    """A wire model: unknown fields (from a newer version) are ignored, never refused."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class Variable(_Model):
    """One session variable: its value and who set it (locked = the host).

    A value whose JSON is over :data:`~archmax_temporal.workflows.limits.INLINE_VARIABLE_BYTES`
    lives in the session store by reference (``ref``: ``<id>/checkpoints/variables/<ref>.json``, the
    SHA-256 of its JSON): it travels as ``{"value": null, "locked": …, "ref": …, "size": …,
    "preview": …}``, so no history carries it beyond the firing that brought it. The workflow holds
    the value while it has it (and loads it when it needs it); a host reads it back from the store
    (``sessions.get``, ``sessions.view`` and every outcome do), so every reader sees the value
    whole.
    """

    value: Any = None
    locked: bool = False
    ref: str | None = None
    """The SHA-256 of the value's JSON, when the value lives in the session store."""
    size: int | None = None
    """With ``ref``: the size of the value's JSON in bytes."""
    preview: str | None = None
    """With ``ref``: the value as the system prompt shows it (its JSON's first 200
    characters), so the prompt never needs the value itself."""

    @model_serializer(mode="wrap")
    def _by_reference(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """On the wire, a value by reference is its reference alone, and an inline one has
        no reference fields (the record stays ``{value, locked}``)."""
        data: dict[str, Any] = handler(self)
        if self.ref is None:
            for name in ("ref", "size", "preview"):
                data.pop(name, None)
        else:
            data["value"] = None
        return data

    @property
    def stored(self) -> bool:
        """The value lives in the session store (this copy may hold it or not)."""
        return self.ref is not None


class ToolCall(_Model):
    """A tool call as the model made it; ``arguments`` is the raw JSON text it produced."""

    id: str
    name: str
    arguments: str = "{}"


class Message(_Model):
    """One transcript entry, in Chat Completions shape plus archmax's markers.

    ``note`` marks both halves of a runtime note (the synthetic ``archmax_note`` call and its
    result): hosts read the marker rather than infer authorship from a role or a prefix.
    ``status`` is a tool result's outcome (``ok``, ``error``, ``blocked``).
    """

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    note: NoteKind | None = None
    status: Literal["ok", "error", "blocked"] | None = None
    rule: str | None = None
    """For a blocked call: the governance rule that refused it."""
    state: str | None = None


def is_runtime_note(message: Message) -> bool:
    """Whether ``message`` is half of a runtime note (never something the model said)."""
    return message.note is not None


class TrailStep(_Model):
    """A committed step of the audit trail: trigger arrivals, advances, decisions, routes."""

    to: str
    kind: TrailKind
    reason: str | None = None
    workflow: str | None = None
    status: Literal["ok", "error"] | None = None
    ts: datetime
    spec_hash: str | None = None
    """On the step that opens a turn: the hash of the spec the turn runs under."""
    by: DecidedBy | None = Field(default=None, exclude_if=lambda value: value is None)
    """On a ``human`` step no person took: who decided instead (``deadline``: the state's
    deadline passed and its ``onTimeout`` edge was taken). Absent from archmax's shape
    otherwise."""


class PendingInput(_Model):
    """The park record of ``archmax_wait``: where, why, since when, and when it wakes itself."""

    channel: Literal["input"] = "input"
    state: str
    title: str | None = None
    reason: str
    parked_at: datetime
    resume_at: datetime | None = None


class DecisionEdge(_Model):
    """One choice a reviewer has at a human state."""

    to: str
    description: str | None = None
    type: str | None = None


class PendingDecision(_Model):
    """The park record of a human state: where, which edges, since when."""

    channel: Literal["decision"] = "decision"
    state: str
    title: str | None = None
    seq: int
    transitions: list[DecisionEdge]
    evidence: list[str] = Field(default_factory=list)
    created_at: datetime
    due_at: datetime | None = None
    """When the state's ``deadline`` takes its ``onTimeout`` edge as the decision (None: the
    state declares no deadline and the decision waits for a person)."""


Pending = Annotated[PendingInput | PendingDecision, Field(discriminator="channel")]


class SandboxToolCall(_Model):
    """One ``tools.*`` call a sandboxed run made, and how it ended."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "error", "blocked"]
    content: str
    mocked: bool = False
    replayed: bool = False
    """Answered from the run's journal rather than run again."""


class ScriptJournal(_Model):
    """A resumed script's earlier answers, in call order: the calls of its last run, kept in
    the session store (``stored``, named by the digest of their JSON, so no history carries
    file contents), then the answers that came after it (``tail``: the dispatches')."""

    stored: str | None = None
    """Store path of the last run's calls (``checkpoints/scripts/<sha256>.json``)."""
    digest: str | None = None
    count: int = 0
    tail: list[SandboxToolCall] = Field(default_factory=list)

    def then(self, entry: SandboxToolCall) -> ScriptJournal:
        """This journal with one more answer at its end."""
        return self.model_copy(update={"tail": [*self.tail, entry]})


class PendingScript(_Model):
    """An ``archmax_run`` script stopped at a sub-workflow call whose child parked: what it
    takes to run it again when the child finishes (its journal, then the child's answer)."""

    arguments: dict[str, Any] = Field(default_factory=dict)
    """The ``archmax_run`` call's arguments, references substituted."""
    journal: ScriptJournal = Field(default_factory=ScriptJournal)
    """Every call the script made before the dispatch, answered."""
    tool: str
    """The dispatch: ``archmax_workflow_<slug>``."""
    tool_arguments: dict[str, Any] = Field(default_factory=dict)


class PendingDelegation(_Model):
    """A sub-workflow call whose child session parked: the caller parks with it.

    The caller's status mirrors the child's park (``channel``); a delivery or decision goes to
    the child's own session id, and when the child finishes its result answers the call.
    """

    state: str
    """The calling state."""
    workflow: str
    session_id: str
    """The child's session id: deliver to it, decide on it."""
    tool_call_id: str
    tool: str
    channel: Literal["input", "decision"]
    pending: Pending | None = None
    """The child's own park record."""
    script: PendingScript | None = None
    """Set when a script made the call: ``tool_call_id`` is then its ``archmax_run`` call."""


class SessionExit(_Model):
    """How the agent ended a finished turn: success, or the code and reason it raised."""

    success: bool
    code: str | None = None
    reason: str | None = None


class Usage(_Model):
    """Token usage, per call and summed per session.

    ``prompt_tokens`` includes the cached ones: ``cache_read_tokens`` were served from the
    provider's prompt cache, ``cache_write_tokens`` written to it (where it says so).
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages, counter by counter."""
        return Usage(**{n: getattr(self, n) + getattr(other, n) for n in Usage.model_fields})

    def since(self, earlier: Usage) -> Usage:
        """What was spent after ``earlier`` (a snapshot of the same session's usage)."""
        return Usage(
            **{n: max(0, getattr(self, n) - getattr(earlier, n)) for n in Usage.model_fields}
        )


class Raised(_Model):
    """What ``archmax_raise`` recorded: the agent's code, its reason and the state."""

    code: str
    reason: str
    state: str


class Todo(_Model):
    """One item of the agent's plan (``write_todos``)."""

    content: str
    status: TodoStatus


class SessionState(_Model):
    """Everything a session carries: the durable part of the workflow, and what
    continue-as-new hands to the next run."""

    status: SessionStatus = "running"
    state: str | None = None
    entry_state: str | None = None
    trigger: str | None = None
    variables: dict[str, Variable] = Field(default_factory=dict)
    transcript: list[Message] = Field(default_factory=list)
    """The newest messages of the conversation (:mod:`archmax_temporal.workflows.transcript`): those
    not yet in the store's log, and a window of the latest before them; the whole conversation is
    the log (``checkpoints/transcript.jsonl``) followed by the unlogged ones."""
    transcript_offset: int = 0
    """The conversation index of ``transcript[0]``."""
    logged: int = 0
    """How many of the conversation's messages the store's log holds."""
    logged_hash: str = ""
    """The log's chained digest after ``logged`` messages (what the next write extends)."""
    result_refs: dict[int, str] = Field(default_factory=dict, exclude_if=lambda value: not value)
    """Unlogged tool results the store keeps by digest (conversation index → SHA-256 of the
    text): the next model call names them instead of carrying them again."""
    prompts_kept: list[str] = Field(default_factory=list, exclude_if=lambda value: not value)
    """Digests of the system prompts a model call carried in full, this run or an earlier one
    (newest last, at most :data:`PROMPTS_KEPT`): the store keeps them, so a call names them by
    digest, a new run's first call too (one the store lost is a ``PromptMissing``, and the
    call is sent again with the text). Tool lists are named by digest always (histories of
    earlier versions hold their digests here too)."""
    last_reply: str | None = None
    """The agent's latest text (None: read it off ``transcript``, a state carried by an
    older version)."""
    trail: list[TrailStep] = Field(default_factory=list)
    """The newest steps of the audit trail: those the store's ``trail.json`` does not hold
    yet, and a window before them (the whole trail is the store's, then these)."""
    trail_offset: int = 0
    """The trail index of ``trail[0]``."""
    trail_persisted: int = 0
    """How many trail steps the store's ``artifacts/trail.json`` holds."""
    usage: Usage = Field(default_factory=Usage)
    todos: list[Todo] = Field(default_factory=list)
    """The plan the agent keeps with ``write_todos`` (replaced whole by each call)."""
    park_counts: dict[str, int] = Field(default_factory=dict)
    pending_input: PendingInput | None = None
    pending_decision: PendingDecision | None = None
    decisions: int = 0
    raised: Raised | None = None
    rejected: str | None = None
    turns: int = 0
    deliveries: int = 0
    before_done: bool = False
    """Whether the current visit's ``before`` hooks have run (an advance runs them before it
    commits; any other entry runs them before the state's first model call)."""
    hook_corrections: dict[str, int] = Field(default_factory=dict)
    """``correct`` verdicts taken this visit, per hook position (``after#0``); reset on
    every entry."""
    pending_delegations: list[PendingDelegation] = Field(default_factory=list)
    """Sub-workflow calls waiting on a parked child, oldest first."""
    mocks: list[ToolMock] | None = None
    """The declared tool mocks the latest firing carried (a case's, for its own turns); None
    until a firing carries some: then the session's start input's mocks apply."""
    dispatches: dict[str, int] = Field(default_factory=dict)
    """Sub-workflow slug → how many children this session has started (child ids count on)."""
    follow_up: bool = False
    """The turn continues a conversation (its prompt says so)."""
    visit_calls: int = 0
    """Model calls in the current visit of the current state (``budget.maxTurns``)."""
    routes: int = 0
    """``on_error`` routes taken in the current turn."""
    inflight: InflightTurn | None = None
    """A turn that continued as new mid-way: the new run drives it on from here."""
    recent_firings: dict[str, Outcome] = Field(default_factory=dict)
    """The outcomes of the session's last firings by idempotency key (the update id), so a
    retry after continue-as-new still gets the first outcome (Temporal itself dedupes update
    ids within a run); the newest :data:`RECENT_FIRINGS` are kept, without their variables
    (``variables_delta`` with none: the host reads the session's)."""
    warned: int | None = Field(default=None, exclude_if=lambda value: value is None)
    """The ``seq`` of the pending decision whose ``approval.expiring`` notification went out
    (its deadline's ``warn``), so a later run never warns of it again."""
    outbox: list[NotifyInput] = Field(default_factory=list, exclude_if=lambda value: not value)
    """Notifications scheduled and not yet delivered (or given up): a run that ends with one
    in flight hands it on, and the next run sends it again under the same ``webhook-id``."""


class InflightTurn(_Model):
    """The firing whose turn a run handed to the next (continue-as-new mid-turn): its key
    (the update id its caller waits on) and what the session made of it."""

    key: str | None = None
    disposition: Disposition
    trail_from: int = 0
    """The trail index the firing's own steps start at (its outcome's trail)."""
    changed: list[str] = Field(default_factory=list)
    """The variables the firing set or changed before it was handed on (its outcome's)."""


PROMPTS_KEPT = 8
"""How many system prompt digests a session carries from run to run."""

RECENT_FIRINGS = 32
"""How many firings' outcomes a session remembers by idempotency key."""


class PromptParts(_Model):
    """Authored prose beside the spec that joins the system prompt."""

    workflow_md: str | None = None
    agents_md: str | None = None
    skills: dict[str, str] = Field(default_factory=dict)
    """Skill slug → its SKILL.md ``description``; only the state's enabled ones are shown."""


class ToolMock(_Model):
    """A case's declared mock: the first whose ``tool`` and ``when_input`` match a governed
    call answers it with ``result`` instead of running the tool."""

    tool: str
    when_input: dict[str, Any] | None = None
    result: Any = None


class DelegateSpec(_Model):
    """A workflow a session may call (``archmax_workflow_<slug>``), pinned when the session
    starts: workflow code reads no files, so the caller carries its callees' specs."""

    workflow: str
    spec: WorkflowSpec | None = None
    spec_hash: str | None = None
    prompt: PromptParts = Field(default_factory=PromptParts)
    load_error: str | None = None
    """Why the target did not load (then ``spec`` is None and every call is refused)."""


class DelegationLink(_Model):
    """What a delegated child knows of its caller: whom to report its settled turns to."""

    session_id: str
    workflow: str
    state: str
    tool_call_id: str


class TurnSpec(_Model):
    """The workflow as the host loaded it when it fired: a turn the firing opens runs under
    it (and a parked turn resumes under the one it parked with). ``revision`` digests the
    whole of it, prose, hooks and callees included (``spec_hash`` is the spec's alone)."""

    revision: str
    spec: WorkflowSpec
    spec_hash: str
    prompt: PromptParts = Field(default_factory=PromptParts)
    hook_sources: dict[str, str] = Field(default_factory=dict)
    delegates: dict[str, DelegateSpec] = Field(default_factory=dict)


class SessionInput(_Model):
    """The input of one ``ArchmaxSession`` run: the parsed, hashed spec and, after
    continue-as-new, the carried session state."""

    session_id: str
    workflow: str
    spec: WorkflowSpec
    spec_hash: str
    prompt: PromptParts = Field(default_factory=PromptParts)
    carried: SessionState | None = None
    requests_per_run: int | None = None
    """Continue-as-new after this many turns and deliveries (None: the runtime default)."""
    host_tools: list[ToolSchema] = Field(default_factory=list)
    """Schemas of the host's Python tools (``create_agent(tools=[...])``); they run on the
    worker as the ``archmax.tool.host`` activity."""
    mocks: list[ToolMock] = Field(default_factory=list)
    """Declared tool mocks (a test case's ``mocks:``), matched after governance allows a
    call; a matched call is recorded like any other but runs nothing."""
    hook_sources: dict[str, str] = Field(default_factory=dict)
    """The workflow's hook scripts (``hooks/check.js`` → source), snapshotted by the loader
    with the spec, so a running session's hooks never change under it."""
    search_attributes: bool = True
    """Publish the Archmax* search attributes. Off only for a namespace that has not
    registered them (an upsert of an unregistered attribute fails every workflow task)."""
    delegates: dict[str, DelegateSpec] = Field(default_factory=dict)
    """Every workflow reachable through ``archmax_workflow_<slug>`` grants (transitively),
    by slug: the pinned snapshot children are started from."""
    parent: DelegationLink | None = None
    """Set on a delegated child: it reports each settled turn to the caller and its workflow
    run ends when the child finishes."""
    ancestors: list[str] = Field(default_factory=list)
    """The callers' workflow slugs, outermost first (cycle and depth checks)."""
    initial: SendInput | None = None
    """A firing the session runs as soon as it starts (a child's ``manual`` arrival)."""
    model_calls_per_run: int | None = None
    """Continue as new mid-turn after this many model calls in a run (None: only when
    Temporal suggests it); for tests and for keeping runs short."""
    limits: Limits = Field(default_factory=Limits)
    """How big a firing may be (:mod:`archmax_temporal.workflows.limits`), fixed when the session
    starts."""
    idle_close_s: float | None = None
    """Seconds a finished session waits for its next firing before it checkpoints its state
    to the store and its run ends (the next firing starts a new run from the checkpoint);
    None: the run stays open (and a session started by an older version)."""
    revision: str | None = None
    """The :class:`TurnSpec` revision ``spec``, ``prompt``, ``hook_sources`` and ``delegates``
    are (None: a session started by a version that did not send one). A turn that opens
    under another revision replaces them; continue-as-new carries the current ones."""
    store_id: str | None = None
    """The identity of the session store the session was created in (``_store.json``'s ``id``):
    every activity it schedules carries it, and a worker of another store refuses them
    (:mod:`archmax_temporal.workflows.store_binding`). Kept across continue-as-new, idle close and
    reopening, and handed to its sub-workflows. None: a session started by a version that did not
    record one (any worker serves it, as before)."""
    store_description: str | None = None
    """Where that store was, as the host that created the session named it (a folder, or a
    URL without credentials): for the message of a worker that refuses its activities."""

    @field_serializer("spec", mode="wrap")
    def _spec_without_defaults(
        self, spec: WorkflowSpec, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        """On the wire (every run's start, every continue-as-new, every checkpoint) the spec
        leaves out each field at its default: it reads back equal, with the same
        :func:`~archmax_temporal.client.loader.spec_hash` (a spec's defaults are archmax's
        format, never changed), and a session's history carries about half the bytes of it."""
        return spec_on_the_wire(spec) if info.mode_is_json() else handler(spec)


def spec_on_the_wire(spec: WorkflowSpec) -> dict[str, Any]:
    """``spec`` as a run's input carries it: JSON, without the fields at their defaults."""
    return spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)


class FileUpload(_Model):
    """A file a host hands a session: its name and either its content inline (text, or
    base64 for bytes; small files) or ``ref``, the SHA-256 of bytes the host wrote to the
    session store's uploads (large files never travel in a history)."""

    name: str
    content: str = ""
    encoding: Literal["utf-8", "base64"] = "utf-8"
    ref: str | None = None
    size: int | None = None
    """The file's size in bytes (set with ``ref``)."""


class SendInput(_Model):
    """A host's firing: a message, the trigger it came through and the variables it brought.

    ``files`` (variable → file) are placed in ``scratchpad/attachments/`` before the turn,
    and each variable is seeded, locked, with the placed path."""

    message: str | None = None
    trigger: str = "manual"
    variables: dict[str, Any] = Field(default_factory=dict)
    files: dict[str, FileUpload] = Field(default_factory=dict)
    mocks: list[ToolMock] | None = None
    """A test case's declared mocks, for the turn this firing drives (None: keep the
    session's)."""
    revision: str | None = None
    """The revision of the workflow as the host loaded it (:class:`TurnSpec`); None: the
    session keeps the spec it has."""
    spec: TurnSpec | None = None
    """That workflow itself, sent only when the session asked for it (it refuses a firing
    that would open a turn under a revision it does not hold with ``SpecNeededError``)."""


class DeliverInput(_Model):
    """An event delivered to a session parked with ``archmax_wait``."""

    trigger: str | None = None
    variables: dict[str, Any] = Field(default_factory=dict)
    message: str | None = None
    mocks: list[ToolMock] | None = None
    """A test case's declared mocks, for the turn this delivery resumes (None: keep them)."""


class DecideInput(_Model):
    """A reviewer's choice at a human state: one of its edges, and an optional comment."""

    to: str
    comment: str | None = None
    mocks: list[ToolMock] | None = None
    """A test case's declared mocks, for the turn this decision resumes (None: keep them)."""
    seq: int | None = None
    """The ``seq`` of the park this decision answers (``PendingDecision.seq``): refused when
    the session was decided since and parks again (a stale form). None: whichever park
    stands."""


class ApprovalNotice(_Model):
    """What an ``approval.expiring`` / ``approval.expired`` notification says: the decision
    a human state waits for, when it is due, and the edge its deadline takes. On the wire its
    fields are archmax's camelCase (``sessionId``, ``dueAt``, ``onTimeout``)."""

    model_config = ConfigDict(
        extra="ignore", alias_generator=to_camel, populate_by_name=True, defer_build=True
    )

    event: ApprovalEvent
    session_id: str
    workflow: str
    state: str
    title: str | None = None
    seq: int
    """The decision's number in the session (:attr:`PendingDecision.seq`)."""
    created_at: datetime
    due_at: datetime
    on_timeout: str
    transitions: list[DecisionEdge] = Field(default_factory=list)
    handoff: str | None = None
    """The agent's message to the person at the park (cut to a few thousand characters)."""


class NotifyInput(_Model):
    """One outbound notification the session asks a worker to send
    (``archmax.notify.send``). ``message_id`` is its ``webhook-id``: derived from the
    session and the decision, the same on every attempt and in every run."""

    message_id: str
    notice: ApprovalNotice
    resent: bool = False
    """Sent again by a run that inherited it in flight (the events read no new fact in it)."""


class NotifyResult(_Model):
    """What became of a notification: POSTed and taken (``sent``, with the receiver's
    status), or not sent because the worker has no ``ARCHMAX_NOTIFY_URL``."""

    sent: bool
    status: int | None = None


class ReplyInput(_Model):
    """A person's message to a session parked at a human state."""

    message: str


class Outcome(_Model):
    """What a settled turn came to, returned by ``send`` / ``deliver``."""

    session_id: str
    kind: OutcomeKind
    disposition: Disposition
    status: SessionStatus
    state: str | None = None
    parked_channel: Literal["input", "decision"] | None = None
    pending: Pending | None = None
    reply: str = ""
    rejected: str | None = None
    exit: SessionExit | None = None
    variables: dict[str, Variable] = Field(default_factory=dict)
    """The session's variables, or, with ``variables_delta``, only those this firing set or
    changed (the host's ``send`` / ``deliver`` / ``decide`` / ``reply`` complete them)."""
    variables_delta: bool = False
    """``variables`` holds what this firing changed, not the whole map: the session's
    variables never travel whole in an outcome (its history would grow with them). False: an
    older worker's outcome, whole."""
    variable_count: int | None = None
    """How many variables the session holds (set with ``variables_delta``)."""
    trail: list[TrailStep] = Field(default_factory=list)
    """The trail steps this firing committed, as far as the session still holds them (the
    newest hundred of a longer firing); the whole trail is ``sessions.view``'s."""
    trail_offset: int = 0
    """The trail index of ``trail[0]`` (how many steps the session had before)."""
    usage: Usage = Field(default_factory=Usage)
    delegation: PendingDelegation | None = None
    """For a park mirrored from a sub-workflow: the child session it waits on."""
    spec_hash: str | None = None
    """The spec the session's latest turn runs (or ran, or is parked) under."""


class ListedSession(_Model):
    """What a session publishes in its memo (``archmax.summary``) at every settled turn: its
    summary as a listing needs it, so a host lists sessions from visibility alone, with no
    query and no worker. Bounded: texts are cut (reasons 200 characters, the handoff to its
    first line), variables are named, never valued."""

    status: SessionStatus = "running"
    state: str | None = None
    spec_hash: str = ""
    trigger: str | None = None
    turns: int = 0
    pending_input: PendingInput | None = None
    pending_decision: PendingDecision | None = None
    delegation: PendingDelegation | None = None
    handoff: str | None = None
    exit: SessionExit | None = None
    rejected: str | None = None
    variable_names: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    parent_session_id: str | None = None


class SessionSummary(_Model):
    """A session as a host lists it: status, classification, where it stands, what it holds."""

    session_id: str
    workflow: str
    status: SessionStatus
    classification: Literal["new", "open", "finished"]
    state: str | None = None
    spec_hash: str
    pending_input: PendingInput | None = None
    pending_decision: PendingDecision | None = None
    wait_reason: str | None = None
    resume_at: datetime | None = None
    exit: SessionExit | None = None
    rejected: str | None = None
    trigger: str | None = None
    variables: dict[str, Variable] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    turns: int = 0
    delegation: PendingDelegation | None = None
    """For a park mirrored from a sub-workflow: the child session it waits on."""
    parent_session_id: str | None = None
    """For a delegated child: its caller's session id."""
    build_id: str | None = None
    """Set by the host (``sessions.list(outdated=True)``): the Worker Deployment build the
    session's run is pinned to."""
    waiting_on: str | None = None
    """Set by the host for a running session whose activity is being retried (``waiting on
    the model: <its last failure>``), or one no worker serves (``due 12 min ago — no worker
    is polling …``): the deployment's problem, visible, not the agent's."""
    handoff: str | None = None
    """At a human state: the first line of the agent's handoff to the person."""
    source: Literal["session", "visibility"] = "session"
    """``visibility``: read off the search attributes and memo because no worker could
    answer (``variables`` then holds each name with no value)."""


class SubWorkflowReport(_Model):
    """A delegated child's settled turn, signalled to its caller (parked or finished)."""

    session_id: str
    outcome: Outcome


class SessionView(_Model):
    """The whole recorded session (summary, transcript and trail), for hosts and cases."""

    summary: SessionSummary
    transcript: list[Message]
    trail: list[TrailStep]
    transcript_offset: int = 0
    """The conversation index of ``transcript[0]``: from the workflow, the newest messages
    only; the host prepends the store's log (``sessions.view`` does)."""
    logged: int = 0
    """How many messages the store's log holds (the host reads that many)."""
    logged_hash: str = ""
    """The chained digest of the log's first ``logged`` messages (names its chain)."""
    trail_offset: int = 0
    """The trail index of ``trail[0]`` (the host prepends the store's ``trail.json``)."""
    trail_persisted: int = 0
    """How many trail steps the store's ``trail.json`` holds."""
    todos: list[Todo] = Field(default_factory=list)
    """The plan the agent keeps with ``write_todos``."""


# --- activities -------------------------------------------------------------------------


class TranscriptLog(_Model):
    """Where the store's log of a conversation stands: its length and chained digest."""

    base: int = 0
    base_hash: str = ""


class ToolSchema(_Model):
    """A tool as the model is told about it (an OpenAI function definition)."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelCallInput(_Model):
    """One model call. Carries no endpoint and no key: those live on the worker.

    On the wire (in every model call's scheduled event) a field at its default is left out:
    it reads back the same, and a step carries fewer bytes into the history."""

    session_id: str
    state: str
    model: str | None = Field(default=None, exclude_if=_unset)
    messages: list[Message]
    tools: list[ToolSchema] = Field(default_factory=list, exclude_if=_unset)
    tool_choice: Literal["auto", "none"] = Field(default="auto", exclude_if=lambda v: v == "auto")
    budget_ms: int | None = Field(default=None, exclude_if=_unset)
    """The state's ``budget.timeoutMs``: the activity races each attempt against it."""
    log: TranscriptLog | None = Field(default=None, exclude_if=_unset)
    """With a log, ``messages`` are only what is new since ``log.base`` (the activity appends
    them to the store's log and reads the rest from it): each message enters the history
    once. Without one, ``messages`` are the whole conversation (a rubric's, an old run's)."""
    system: str | None = Field(default=None, exclude_if=_unset)
    """The system prompt, sent when its digest changed since the run's last call."""
    system_digest: str | None = Field(default=None, exclude_if=_unset)
    """The system prompt's SHA-256: the activity reads a prompt it was sent before."""
    tools_digest: str | None = Field(default=None, exclude_if=_unset)
    """The tool schemas' SHA-256; ``tools`` is empty when they were sent before."""
    refs: dict[int, str] = Field(default_factory=dict, exclude_if=_unset)
    """Tool results named by digest (position in ``messages`` → SHA-256 of the text; that
    message's ``content`` is None): the activity reads them from the store
    (``checkpoints/results/``), where the tool's activity kept them, so each result enters
    the history once, as the tool's result."""

    log_answer: bool = Field(default=False, exclude_if=_unset)
    """The activity appends its answer (an assistant message in ``state``: text and tool
    calls) to the log with ``messages``, so ``logged`` counts it and no later call carries
    it again (the answer is in the history once: the call's result)."""

    @field_serializer("messages")
    def _messages_without_defaults(self, messages: list[Message]) -> list[dict[str, Any]]:
        """Each message on the wire without its unset fields (``"note": null``, …): they
        read back the same, and every model call carries fewer bytes into the history."""
        return [message.model_dump(mode="json", exclude_defaults=True) for message in messages]


class ModelCallResult(_Model):
    """The model's answer: text, tool calls, and what it cost (on the wire without the fields
    at their defaults, as :class:`ModelCallInput`)."""

    content: str | None = Field(default=None, exclude_if=_unset)
    tool_calls: list[ToolCall] = Field(default_factory=list, exclude_if=_unset)
    model: str
    finish_reason: str | None = Field(default=None, exclude_if=_unset)
    usage: Usage = Field(default_factory=Usage)
    logged: int | None = Field(default=None, exclude_if=_unset)
    """The store log's length after the call's new messages were appended."""
    log_hash: str | None = Field(default=None, exclude_if=_unset)
    """The log's chained digest at ``logged``."""

    @field_serializer("usage")
    def _usage_without_zeros(self, usage: Usage) -> dict[str, Any]:
        """The counts that are not zero (``cache_write_tokens``, most often, is)."""
        return usage.model_dump(mode="json", exclude_defaults=True)


class CheckpointInput(_Model):
    """An idle finished session's state, written to the store before its run ends: the run's
    input with the session carried (what the next run starts from)."""

    session_id: str
    checkpoint: SessionInput


class Checkpoint(_Model):
    """``<id>/checkpoints/session.json``: the checkpoint and the run that wrote it."""

    run_id: str | None = None
    written_at: datetime | None = None
    checkpoint: SessionInput


class StoreVariablesInput(_Model):
    """Values by reference to write to the session store (reference → the value's JSON)."""

    session_id: str
    texts: dict[str, str] = Field(default_factory=dict)


class LoadVariablesInput(_Model):
    """Values by reference to read back from the session store."""

    session_id: str
    refs: list[str] = Field(default_factory=list)


class LoadVariablesResult(_Model):
    """The values read (reference → the value's JSON)."""

    texts: dict[str, str] = Field(default_factory=dict)


class PersistTurnInput(_Model):
    """What the store activity writes at the end of every turn, a parked one included."""

    session_id: str
    workflow: str
    spec_hash: str
    spec: WorkflowSpec | None = None
    """Sent once a run (the snapshot ``_specs/<hash>.json`` is written when missing)."""
    status: SessionStatus
    state: str | None
    trail: list[TrailStep]
    """With ``trail_base``: the steps ``trail.json`` does not hold yet; without: all."""
    trail_base: int | None = None
    """How many steps ``trail.json`` already holds (the activity keeps them, appends)."""
    variables: dict[str, Variable]
    usage: Usage
    transcript: list[Message] = Field(default_factory=list)
    """With ``log``: the messages not yet in the store's log; without: the conversation so
    far. Written (after the log's) as ``trajectory.json``."""
    log: TranscriptLog | None = None
    """The store log the trajectory starts with (its first ``log.base`` messages)."""
    scheduled_at: datetime | None = None
    """Set when the save runs as a local activity: the workflow's time when it was scheduled,
    its place in the session's order of saves (activities.store ``_order``)."""
