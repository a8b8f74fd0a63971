"""The ``workflow.yaml`` schema as strict pydantic models.

Fail closed: every block forbids unknown keys, so a typo (``transtions``) is a load error that
names the key and its path instead of a silently ignored setting. The only loose slots are the
ones archmax leaves loose: ``metadata`` (root, state) and a trigger declaration's own keys.

Field names are snake_case; the camelCase spellings of archmax's schema (``timeoutMs``,
``maxParks``) are the aliases, so an archmax user's tree loads unchanged.

Bounded: every name, text and list of an authored spec has a limit (``MAX_*`` below), checked
by :func:`parse_spec`, so a spec that loads is one a session can start with: the whole spec
travels in the session workflow's input, beside its hook sources and its delegates' specs (the
loader holds their sum to its budget). Decoding a running session's input skips the limits.

Pure: the workflow receives a parsed :class:`WorkflowSpec`; parsing and hashing happen on the
host (``client/loader.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sized
from datetime import timedelta
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from archmax_temporal.workflows.durations import InvalidUntilError, relative_duration
from archmax_temporal.workflows.errors import SpecValidationError
from archmax_temporal.workflows.paths import InvalidPathError, parse_path

SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*\Z")
"""State, workflow and skill slugs: kebab-case ASCII, no trailing newline."""

VARIABLE_NAME = re.compile(r"^[a-z][a-z0-9_]*\Z")
"""Variable names: flat, lower snake case, never dotted, no trailing newline."""

MANUAL_TRIGGER = "manual"
"""The reserved trigger id of ``archmax run``, a plain host invoke and every delegation."""

TIMER_TRIGGER = "timer"
"""The trigger a timed ``archmax_wait`` delivers to its own session when ``until`` passes."""

RESERVED_VARIABLES = frozenset({"trigger", "title", "note"})
"""Names the runtime owns: ``trigger`` (always locked), ``title`` (agent-owned) and ``note``.

A trigger's ``returns`` may not name them.
"""

WILDCARD = "*"
"""The every-tool pattern: a forbid entry may use it, an allow entry never."""

MAX_SLUG_LENGTH: Final = 64
"""State, workflow and skill slugs, trigger ids and variable names, in characters. A slug is
also a folder name (``workflows/<slug>``, ``skills/<slug>``) and part of a tool name
(``archmax_workflow_<slug>``); 64 keeps each one far inside a file name's 255 bytes."""

MAX_NAME_LENGTH: Final = 128
"""Every other short string of a spec, in characters: tool names, model ids, paths, approvers,
connections, hook kinds, a trigger's ``session`` and ``message`` paths."""

MAX_TITLE_LENGTH: Final = 200
"""A workflow's or a state's ``title``: one line of a canvas or a listing."""

MAX_DESCRIPTION_LENGTH: Final = 2_000
"""A state's ``summary``; the ``description`` of a transition, a trigger or a signature entry;
a tool grant's argument pattern or path glob: a paragraph at most."""

MAX_INSTRUCTIONS_LENGTH: Final = 32_000
"""The root's, a state's and a rubric's ``instructions``, in characters (some 8,000 tokens).
Longer guidance belongs in ``WORKFLOW.md`` or a skill, where the agent reads it on demand."""

MAX_STATES: Final = 100
"""States of one machine."""

MAX_TRANSITIONS: Final = 32
"""Outgoing transitions of one state (the agent chooses among them every turn)."""

MAX_TRIGGERS: Final = 32
"""Triggers one state declares."""

MAX_HOOKS: Final = 16
"""Hooks of one phase (``before`` or ``after``) of one state."""

MAX_LIST_ENTRIES: Final = 128
"""Any other list of a spec: tool, skill and mount grants and denials, ``requires``,
``returns``, ``evidence``, ``approvers``, ``extensions.hooks``, a grant's ``args`` and
``paths``."""

MAX_REPORTED_ISSUES: Final = 100
"""Problems one :class:`SpecValidationError` lists; a last line counts the others."""

AUTHORED: Final = "authored"
"""The validation context key under which the ``MAX_*`` limits apply: :func:`parse_spec` (an
authored ``workflow.yaml``) sets it. Decoding a session's input does not, so a session that
started with a spec is never refused it by a limit that came later."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def shown(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters with an ellipsis, so a message that quotes
    authored input stays one readable line however long the input is."""
    if isinstance(value, str) and len(value) > limit:
        return repr(f"{value[: limit - 3]}…")
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _authored(info: ValidationInfo) -> bool:
    return isinstance(info.context, dict) and info.context.get(AUTHORED) is True


def _at_most(limit: int, unit: str, kinds: tuple[type[Sized], ...] = (str, list, dict)) -> Any:
    """A validator holding an authored value of one of ``kinds`` to ``limit`` (characters of
    a string, entries of a list or mapping); values of other types pass untouched, so it can
    sit outside a union (``str | ToolGrant``) and name a long string once."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if _authored(info) and isinstance(value, kinds) and len(value) > limit:
            raise ValueError(f"{len(value):,} {unit}; the limit is {limit:,}")
        return value

    return AfterValidator(check)


def _text(limit: int) -> Any:
    """:func:`_at_most` for the string branch of a union."""
    return _at_most(limit, "characters", (str,))


Slug = Annotated[str, _text(MAX_SLUG_LENGTH)]
Name = Annotated[str, _text(MAX_NAME_LENGTH)]
Title = Annotated[str, _text(MAX_TITLE_LENGTH)]
Description = Annotated[str, _text(MAX_DESCRIPTION_LENGTH)]
Instructions = Annotated[str, _text(MAX_INSTRUCTIONS_LENGTH)]
Entries = _at_most(MAX_LIST_ENTRIES, "entries")
"""The bound of a list or mapping of :data:`MAX_LIST_ENTRIES`."""

_TRIGGER_REFUSED_KEYS = {
    "entry": "a trigger's entry is the state that declares it",
    "name": "a trigger's id is its key",
}

SignatureType = Literal[
    "string", "integer", "number", "boolean", "date", "date-time", "object", "array", "file"
]
"""``file`` is a workspace path (``scratchpad/...``): a sub-workflow's file argument is copied
into the child's ``scratchpad/attachments/``, a file return into the caller's."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, defer_build=True)


class SignatureEntry(_Strict):
    """A typed entry of a trigger's ``requires`` / ``returns``."""

    name: Slug
    type: SignatureType | None = None
    description: Description | None = None


Signature = Annotated[list[Annotated[str | SignatureEntry, _text(MAX_SLUG_LENGTH)]], Entries]


class TriggerSpec(BaseModel):
    """A trigger declaration; its key is the id and the state it sits on its entry state.

    Unknown keys are preserved (archmax lints them rather than refusing them).
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True, defer_build=True)

    session: Name | None = None
    requires: Signature = Field(default_factory=list)
    returns: Signature = Field(default_factory=list)
    description: Description | None = None
    message: Annotated[str | Literal[False], _text(MAX_NAME_LENGTH)] | None = None
    connection: Name | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_entry_or_name(cls, value: Any) -> Any:
        if isinstance(value, dict):
            refused = [
                f'key "{key}" is not allowed ({why})'
                for key, why in _TRIGGER_REFUSED_KEYS.items()
                if key in value
            ]
            if refused:
                raise ValueError("; ".join(refused))
        return value

    @field_validator("session")
    @classmethod
    def _session_is_a_path(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_path(value)
            except InvalidPathError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @field_validator("description", "connection")
    @classmethod
    def _non_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a non-empty string")
        return value


class TransitionSpec(_Strict):
    """An outgoing edge: the only thing the agent learns about its target is ``description``."""

    to: Slug
    description: Description
    type: Literal["approve", "reject", "refine", "none"] = "none"

    @field_validator("description")
    @classmethod
    def _description_required(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a transition needs a non-empty description")
        return value


class BudgetSpec(_Strict):
    """Per-state bounds: model calls per visit, per-call timeout, parks per turn."""

    max_turns: StrictInt | None = Field(default=None, alias="maxTurns", gt=0)
    timeout_ms: StrictInt | None = Field(default=None, alias="timeoutMs", gt=0)
    max_parks: StrictInt | None = Field(default=None, alias="maxParks", gt=0)


Pattern = Annotated[str, _text(MAX_DESCRIPTION_LENGTH)]
Patterns = Annotated[list[Pattern], Entries]


class ToolGrant(_Strict):
    """An argument- or path-scoped ``tools.allow`` / ``tools.forbid`` entry."""

    tool: Name
    args: Annotated[dict[Name, Pattern | Patterns], Entries] | None = None
    paths: Patterns | None = None
    connection: Name | None = None
    source: Name | None = None


ToolEntry = Annotated[str | ToolGrant, _text(MAX_NAME_LENGTH)]


def _no_wildcard_grant(entry: ToolEntry) -> ToolEntry:
    """An allow entry grants named tools only: ``*`` belongs to forbid entries."""
    tool = entry if isinstance(entry, str) else entry.tool
    if WILDCARD in tool:
        raise ValueError(f"{tool!r}: an allow entry cannot use '*' (only a forbid entry may)")
    return entry


AllowedTool = Annotated[ToolEntry, AfterValidator(_no_wildcard_grant)]
"""A ``tools.allow`` / ``tools.allow_always`` entry: a named tool, never ``*``."""


class StateToolsSpec(_Strict):
    """A state's tool grants and denials (closed by default)."""

    allow: Annotated[list[AllowedTool], Entries] = Field(default_factory=list)
    forbid: Annotated[list[ToolEntry], Entries] = Field(default_factory=list)


class RootToolsSpec(_Strict):
    """Workflow-wide tool grants and denials."""

    allow_always: Annotated[list[AllowedTool], Entries] = Field(default_factory=list)
    forbid_always: Annotated[list[ToolEntry], Entries] = Field(default_factory=list)


ListEntry = Annotated[str | Annotated[dict[Name, Name], Entries], _text(MAX_NAME_LENGTH)]


def _skill_slug(entry: Any, info: ValidationInfo) -> Any:
    """A skill is named by its slug (a string, or each key of a mapping entry): never a path,
    never a glob, and (authored) at most :data:`MAX_SLUG_LENGTH` characters.

    It runs before the entry's own validation, so a slug that is too long is one problem
    named as such, not one per branch of the entry's union.
    """
    slugs = [entry] if isinstance(entry, str) else list(entry) if isinstance(entry, dict) else []
    for slug in slugs:
        if not isinstance(slug, str):
            continue  # the entry's own validation names it
        if _authored(info) and len(slug) > MAX_SLUG_LENGTH:
            raise ValueError(
                f"skill {shown(slug)} is {len(slug):,} characters; the limit is {MAX_SLUG_LENGTH}"
            )
        if not SLUG.match(slug):
            raise ValueError(f"skill {slug!r} must be a kebab-case slug (no paths, no globs)")
    return entry


def _forbidden_skill(entry: Any, info: ValidationInfo) -> Any:
    """A forbidden skill is a slug, or ``*`` for every skill."""
    return entry if entry == WILDCARD else _skill_slug(entry, info)


SkillEntry = Annotated[ListEntry, BeforeValidator(_skill_slug)]
ForbiddenSkill = Annotated[str, BeforeValidator(_forbidden_skill)]


class StateListSpec(_Strict):
    """A state's ``mounts`` block."""

    allow: Annotated[list[ListEntry], Entries] = Field(default_factory=list)
    forbid: Annotated[list[Name], Entries] = Field(default_factory=list)


class RootListSpec(_Strict):
    """The root ``mounts`` block."""

    allow_always: Annotated[list[ListEntry], Entries] = Field(default_factory=list)
    forbid_always: Annotated[list[Name], Entries] = Field(default_factory=list)


class StateSkillsSpec(_Strict):
    """A state's ``skills`` block: entries are skill slugs."""

    allow: Annotated[list[SkillEntry], Entries] = Field(default_factory=list)
    forbid: Annotated[list[ForbiddenSkill], Entries] = Field(default_factory=list)


class RootSkillsSpec(_Strict):
    """The root ``skills`` block: entries are skill slugs."""

    allow_always: Annotated[list[SkillEntry], Entries] = Field(default_factory=list)
    forbid_always: Annotated[list[ForbiddenSkill], Entries] = Field(default_factory=list)


class RubricSpec(BaseModel):
    """A model-graded hook."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, defer_build=True)

    instructions: Instructions
    model: Name | None = None
    max_iterations: StrictInt | None = Field(default=None, ge=0)
    metadata: dict[str, Any] | None = None


class HookSpec(BaseModel):
    """One lifecycle hook: ``{script: path}``, ``{rubric: {...}}`` or a declared custom kind."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True, defer_build=True)

    script: Name | None = None
    rubric: RubricSpec | None = None
    max_iterations: StrictInt | None = Field(default=None, ge=0)

    @field_validator("script")
    @classmethod
    def _script_is_text(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and _authored(info) and _CONTROL.search(value):
            raise ValueError("a hook script path has no control characters")
        return value


HookList = Annotated[list[HookSpec], _at_most(MAX_HOOKS, "hooks")]


class DeadlineSpec(_Strict):
    """A human state's deadline (this runtime's extension of archmax's format): ``after`` the
    park, the decision is taken along ``onTimeout`` by ``deadline``; ``warn`` before that, a
    notification says the decision is about to expire.

    Durations are written in ``archmax_wait``'s relative ``until`` syntax (``90s``, ``30m``,
    ``48h``, ``3d``) and counted from the park."""

    after: Annotated[str, _text(MAX_SLUG_LENGTH)]
    warn: Annotated[str, _text(MAX_SLUG_LENGTH)] | None = None
    on_timeout: Slug = Field(alias="onTimeout")

    @field_validator("after", "warn", mode="before")
    @classmethod
    def _written_with_a_unit(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):  # 48 is not read as seconds
            raise ValueError(f"{value!r} is not a duration: write one such as 90s, 30m, 48h, 3d")
        return value

    @field_validator("after", "warn")
    @classmethod
    def _a_duration(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            span = relative_duration(value)
        except InvalidUntilError as exc:
            raise ValueError(str(exc)) from None
        if span <= timedelta(0):
            raise ValueError(f"duration {value!r} must be longer than zero")
        return value

    @model_validator(mode="after")
    def _warn_before_the_deadline(self) -> DeadlineSpec:
        warn = self.warn_before
        if warn is not None and warn >= self.due_after:
            raise ValueError(
                f"warn ({self.warn}) must be shorter than after ({self.after}): the warning "
                "goes out that long before the deadline"
            )
        return self

    @property
    def due_after(self) -> timedelta:
        """How long after the park the deadline passes."""
        return relative_duration(self.after)

    @property
    def warn_before(self) -> timedelta | None:
        """How long before the deadline the ``approval.expiring`` notification goes out."""
        return None if self.warn is None else relative_duration(self.warn)


class StateSpec(_Strict):
    """One state of the machine; its key in ``states`` is its slug and identity."""

    type: Literal["agent", "human"] = "agent"
    title: Title | None = None
    summary: Description | None = None
    instructions: Instructions | None = None
    transitions: Annotated[list[TransitionSpec], _at_most(MAX_TRANSITIONS, "transitions")] = Field(
        default_factory=list
    )
    triggers: Annotated[dict[Slug, TriggerSpec], _at_most(MAX_TRIGGERS, "triggers")] = Field(
        default_factory=dict
    )
    before: HookList = Field(default_factory=list)
    after: HookList = Field(default_factory=list)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    on_error: Slug | None = None
    model: Name | None = None
    requires: Annotated[list[Slug], Entries] = Field(default_factory=list)
    tools: StateToolsSpec = Field(default_factory=StateToolsSpec)
    skills: StateSkillsSpec = Field(default_factory=StateSkillsSpec)
    mounts: StateListSpec = Field(default_factory=StateListSpec)
    evidence: Annotated[list[Name], Entries] = Field(default_factory=list)
    approvers: Annotated[list[Name], Entries] = Field(default_factory=list)
    deadline: DeadlineSpec | None = Field(default=None, exclude_if=lambda value: value is None)
    """A human state's deadline (:class:`DeadlineSpec`). Left out of the dump when absent, so
    a spec without one hashes and travels exactly as before the key existed."""
    metadata: dict[str, Any] | None = None

    @field_validator("triggers", mode="before")
    @classmethod
    def _null_declarations(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: ({} if decl is None else decl) for key, decl in value.items()}
        return value

    @field_validator("before", "after", mode="before")
    @classmethod
    def _single_hook_is_a_list(cls, value: Any) -> Any:
        if value is None:
            return []
        return value if isinstance(value, list) else [value]

    @field_validator("model")
    @classmethod
    def _model_non_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a non-empty model id")
        return value

    @property
    def is_terminal(self) -> bool:
        """A state with no outgoing transitions: a turn that finishes here is completed."""
        return not self.transitions

    @property
    def is_human(self) -> bool:
        """A human decision node: a person picks one of its edges."""
        return self.type == "human"


class SettingsSpec(_Strict):
    """Runtime knobs."""

    model: Name | None = None
    timeout_ms: StrictInt | None = Field(default=None, alias="timeoutMs", gt=0)
    memory_limit_bytes: StrictInt | None = Field(default=None, alias="memoryLimitBytes", gt=0)
    max_ptc_calls: StrictInt | None = Field(default=None, alias="maxPtcCalls", ge=0)
    max_result_chars: StrictInt | None = Field(default=None, alias="maxResultChars", gt=0)
    prompt_cache: dict[str, Any] | None = None

    @field_validator("model")
    @classmethod
    def _model_non_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a non-empty model id")
        return value


JUDGE_MODEL_OPTIONS: Final = {"temperature": "a number", "maxTokens": "a positive integer"}
"""The keys ``tests.judge.modelOptions`` takes; any other is a load error (as archmax)."""


class JudgeSpec(_Strict):
    """The grading model of ``grade`` assertions."""

    model: Name | None = None
    model_options: dict[str, Any] | None = Field(default=None, alias="modelOptions")

    @field_validator("model_options")
    @classmethod
    def _known_options(
        cls, value: dict[str, Any] | None, info: ValidationInfo
    ) -> dict[str, Any] | None:
        """``temperature`` and ``maxTokens`` only, each of its type (authored specs: a running
        session decodes the spec it started with)."""
        if value is None or not _authored(info):
            return value
        problems = [
            f'unknown key "{key}" (known keys: {", ".join(JUDGE_MODEL_OPTIONS)})'
            for key in value
            if key not in JUDGE_MODEL_OPTIONS
        ]
        temperature = value.get("temperature")
        if temperature is not None and (
            isinstance(temperature, bool) or not isinstance(temperature, int | float)
        ):
            problems.append("temperature must be a number")
        tokens = value.get("maxTokens")
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1
        ):
            problems.append("maxTokens must be a positive integer")
        if problems:
            raise ValueError("; ".join(problems))
        return value


class TestsSpec(_Strict):
    """Suite configuration for ``archmax test``."""

    __test__ = False  # not a pytest class

    max_concurrency: StrictInt | None = Field(default=None, alias="maxConcurrency", gt=0)
    case_timeout_ms: StrictInt | None = Field(default=None, alias="caseTimeoutMs", gt=0)
    judge: JudgeSpec | None = None

    @field_validator("judge", mode="before")
    @classmethod
    def _empty_judge(cls, value: Any) -> Any:
        return {} if value is None else value


class RuntimeSpec(_Strict):
    """The contract pin, ``{engine: archmax-harness, version: "2"}``."""

    engine: Literal["archmax-harness"] = "archmax-harness"
    version: str = "1"

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # never through float: 10**400 has no float
        elif isinstance(value, float):
            value = str(int(value)) if value.is_integer() else str(value)
        if value not in ("1", "2"):
            raise ValueError(f"unsupported runtime version {value!r} (supported: 1, 2)")
        return value


class ExtensionsSpec(_Strict):
    """Custom hook kinds the host registers executors for."""

    hooks: Annotated[list[Name], Entries] = Field(default_factory=list)


class WorkflowSpec(_Strict):
    """A whole ``workflow.yaml``: the enforced state machine of one workflow."""

    title: Title | None = None
    instructions: Instructions | None = None
    disabled: StrictBool = False
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    settings: SettingsSpec = Field(default_factory=SettingsSpec)
    tests: TestsSpec = Field(default_factory=TestsSpec)
    tools: RootToolsSpec = Field(default_factory=RootToolsSpec)
    skills: RootSkillsSpec = Field(default_factory=RootSkillsSpec)
    mounts: RootListSpec = Field(default_factory=RootListSpec)
    extensions: ExtensionsSpec = Field(default_factory=ExtensionsSpec)
    metadata: dict[str, Any] | None = None
    states: Annotated[dict[Slug, StateSpec], _at_most(MAX_STATES, "states")]

    @model_validator(mode="before")
    @classmethod
    def _policy_forbid_tools(cls, value: Any, info: ValidationInfo) -> Any:
        """The sessions seed's spelling, ``policy.forbid_tools: [...]``, read as what it means:
        entries of ``tools.forbid_always`` (its one current spelling). Any other ``policy``
        key is refused with the spelling to use."""
        if not (isinstance(value, dict) and "policy" in value and _authored(info)):
            return value
        policy = value["policy"]
        hint = "write tools: { forbid_always: [...] } (policy.forbid_tools is its older spelling)"
        if not isinstance(policy, dict) or set(policy) != {"forbid_tools"}:
            raise ValueError(f"policy: only policy.forbid_tools is read; {hint}")
        denied = policy["forbid_tools"]
        if not isinstance(denied, list):
            raise ValueError(f"policy.forbid_tools: must be a list of tools; {hint}")
        tools = value.get("tools")
        if tools is None:
            tools = {}
        if not isinstance(tools, dict):
            return value  # the tools block's own validation names the problem
        merged = {**tools, "forbid_always": [*(tools.get("forbid_always") or []), *denied]}
        return {key: item for key, item in value.items() if key != "policy"} | {"tools": merged}

    @field_validator("states", mode="before")
    @classmethod
    def _bare_states(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {slug: ({} if state is None else state) for slug, state in value.items()}
        return value

    @field_validator("disabled", mode="before")
    @classmethod
    def _null_is_enabled(cls, value: Any) -> Any:
        return False if value is None else value

    @field_validator("instructions")
    @classmethod
    def _instructions_non_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a non-empty string")
        return value

    def state(self, slug: str) -> StateSpec:
        """The state named ``slug`` (a KeyError for an undeclared one is a programming error)."""
        return self.states[slug]

    def trigger_entry(self, trigger_id: str) -> str | None:
        """The entry state of ``trigger_id``, or None when no state declares it."""
        for slug, state in self.states.items():
            if trigger_id in state.triggers:
                return slug
        return None

    def trigger(self, trigger_id: str) -> TriggerSpec | None:
        """The declaration of ``trigger_id``, or None when no state declares it."""
        entry = self.trigger_entry(trigger_id)
        return None if entry is None else self.states[entry].triggers[trigger_id]

    def trigger_ids(self) -> list[str]:
        """Every declared trigger id, in declaration order."""
        return [tid for state in self.states.values() for tid in state.triggers]

    @property
    def entry(self) -> str:
        """The machine's entry: the ``manual`` start state, else the first start state."""
        manual = self.trigger_entry(MANUAL_TRIGGER)
        if manual is not None:
            return manual
        for slug, state in self.states.items():
            if state.triggers:
                return slug
        return next(iter(self.states))

    def start_state_for(self, trigger_id: str) -> str | None:
        """Where a fresh session under ``trigger_id`` opens.

        ``manual`` opens at the machine's entry even when no state declares it, so a workflow
        whose only start state declares other triggers still runs under ``archmax run``.
        """
        entry = self.trigger_entry(trigger_id)
        if entry is None and trigger_id == MANUAL_TRIGGER:
            return self.entry
        return entry


def machine_problems(spec: WorkflowSpec) -> list[str]:
    """Graph-level errors a field validator cannot see, each ``"<path>: <message>"``."""
    problems: list[str] = []
    if not spec.states:
        return ["states: Machine spec is missing or has empty 'states'"]
    declared_by: dict[str, str] = {}
    for slug, state in spec.states.items():
        if not SLUG.match(slug):
            problems.append(f"states.{slug}: state slug must be kebab-case ([a-z0-9-])")
        for index, transition in enumerate(state.transitions):
            if transition.to not in spec.states:
                problems.append(
                    f"states.{slug}.transitions.{index}.to: "
                    f"transition to undeclared state {transition.to!r}"
                )
        if state.on_error is not None and state.on_error not in spec.states:
            problems.append(f"states.{slug}.on_error: undeclared state {state.on_error!r}")
        problems.extend(deadline_problems(slug, state))
        for trigger_id, declaration in state.triggers.items():
            if trigger_id in declared_by:
                problems.append(
                    f"states.{slug}.triggers.{trigger_id}: trigger {trigger_id!r} is declared "
                    f"by both {declared_by[trigger_id]!r} and {slug!r}"
                )
            declared_by.setdefault(trigger_id, slug)
            for kind in ("requires", "returns"):
                names = [e if isinstance(e, str) else e.name for e in getattr(declaration, kind)]
                for name in names:
                    if not VARIABLE_NAME.match(name):
                        problems.append(
                            f"states.{slug}.triggers.{trigger_id}.{kind}: "
                            f"invalid variable name {name!r}"
                        )
                    elif kind == "returns" and name in RESERVED_VARIABLES:
                        problems.append(
                            f"states.{slug}.triggers.{trigger_id}.returns: {name!r} is reserved "
                            "for the runtime and cannot be returned"
                        )
                if len(set(names)) != len(names):
                    problems.append(f"states.{slug}.triggers.{trigger_id}.{kind}: duplicated names")
    if not declared_by:
        problems.append("states: Workflow has no start state (no state declares a trigger)")
    return problems


def deadline_problems(slug: str, state: StateSpec) -> list[str]:
    """What is wrong with ``state``'s ``deadline``: declared on a state that is not human,
    or an ``onTimeout`` that is not one of the state's edges."""
    deadline = state.deadline
    if deadline is None:
        return []
    where = f"states.{slug}.deadline"
    if not state.is_human:
        return [f"{where}: only a human state (type: human) takes a deadline"]
    edges = [t.to for t in state.transitions]
    if deadline.on_timeout not in edges:
        return [
            f"{where}.onTimeout: {deadline.on_timeout!r} is not an edge of {slug!r} "
            f"(its edges: {', '.join(edges) or 'none'})"
        ]
    return []


def parse_spec(data: Any, source: str = "workflow.yaml") -> WorkflowSpec:
    """Validate parsed YAML into a :class:`WorkflowSpec`, or raise :class:`SpecValidationError`.

    Every problem is reported at once, each addressed by its dotted path:
    ``states.review: unknown key "transtions"``.
    """
    if not isinstance(data, dict):
        raise SpecValidationError(source, ["<root>: a workflow spec must be a mapping"])
    if not data.get("states"):
        raise SpecValidationError(source, ["states: Machine spec is missing or has empty 'states'"])
    try:
        spec = WorkflowSpec.model_validate(data, context={AUTHORED: True})
    except ValidationError as exc:
        raise SpecValidationError(source, _capped(format_validation_errors(exc, data))) from None
    problems = machine_problems(spec)
    if problems:
        raise SpecValidationError(source, _capped(problems))
    return spec


def _capped(issues: list[str]) -> list[str]:
    """The first :data:`MAX_REPORTED_ISSUES` issues, and a line counting any others."""
    if len(issues) <= MAX_REPORTED_ISSUES:
        return issues
    rest = len(issues) - MAX_REPORTED_ISSUES
    return [*issues[:MAX_REPORTED_ISSUES], f"<spec>: {rest:,} more problems not listed"]


def format_validation_errors(exc: ValidationError, data: Any) -> list[str]:
    """Pydantic's errors as ``"<dotted.path>: <message>"`` lines, unknown keys named.

    ``data`` is the input that was validated: each error's ``loc`` is walked through it and
    only the parts that index into it are kept, so union-branch tags (``str``, ``ToolGrant``,
    ``dict[str,str]``) drop out while every mapping key (``EmailIn``, ``Review``) stays.
    """
    lines: dict[str, None] = {}  # ordered and de-duplicated
    for error in exc.errors():
        missing = error["type"] == "missing"
        loc = [_clipped(part) for part in _data_path(error["loc"], data, missing=missing)]
        if error["type"] == "extra_forbidden":
            key = loc[-1] if loc else "?"
            where = ".".join(loc[:-1]) or "<root>"
            line = f'{where}: unknown key "{key}"'
        else:
            where = ".".join(loc) or "<root>"
            message = error["msg"].removeprefix("Value error, ")
            line = f"{where}: {message}"
        lines.setdefault(line)
    return list(lines)


def _clipped(part: str) -> str:
    """A path part as a message shows it: a key longer than any name is cut (``aaaa…``)."""
    return part if len(part) <= MAX_NAME_LENGTH else f"{part[: MAX_SLUG_LENGTH - 1]}…"


def _data_path(loc: tuple[int | str, ...], data: Any, *, missing: bool) -> list[str]:
    """The parts of ``loc`` that index into ``data``, as strings.

    A part that indexes nothing is a pydantic tag and is dropped, except the last part of a
    ``missing`` error: that is the absent key itself.
    """
    path: list[str] = []
    node = data
    for position, part in enumerate(loc):
        if _indexes(node, part):
            node = node[part]
        elif not (missing and position == len(loc) - 1 and isinstance(node, dict)):
            continue
        path.append(str(part))
    return path


def _indexes(node: Any, part: object) -> bool:
    """Whether ``node[part]`` is an element of the input (a mapping key, a list position)."""
    if isinstance(node, dict):
        try:
            return part in node
        except TypeError:
            return False
    if isinstance(node, list):
        return isinstance(part, int) and not isinstance(part, bool) and 0 <= part < len(node)
    return False
