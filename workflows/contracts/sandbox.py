"""``archmax.sandbox.run`` (a hook, an ``archmax_run`` script or an ``archmax_eval`` snippet in
QuickJS) and ``archmax.hook.custom`` (a host's executor of a custom hook kind): their limits,
wire types, timeouts and retries, and the calls that schedule them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow
from temporalio.common import RetryPolicy

from archmax_temporal.workflows.contracts.base import HEARTBEAT_TIMEOUT, ActivityContract
from archmax_temporal.workflows.models import (
    SandboxToolCall,
    ScriptJournal,
    ToolMock,
    Variable,
)
from archmax_temporal.workflows.spec import SettingsSpec, WorkflowSpec

SANDBOX_ACTIVITY: Final = "archmax.sandbox.run"
"""Runs one hook script or ``archmax_run`` script in QuickJS."""

CUSTOM_HOOK_ACTIVITY: Final = "archmax.hook.custom"
"""Runs a host-registered executor of a custom hook kind (``extensions.hooks``)."""

DEFAULT_TIMEOUT_MS: Final = 15_000
"""``settings.timeoutMs`` when unset (the value archmax's example sets)."""

DEFAULT_MEMORY_LIMIT_BYTES: Final = 64 * 1024 * 1024
"""``settings.memoryLimitBytes`` when unset: QuickJS's heap quota."""

DEFAULT_MAX_PTC_CALLS: Final = 200
"""``settings.maxPtcCalls`` when unset: tool calls one run may make."""

DEFAULT_MAX_RESULT_CHARS: Final = 20_000
"""``settings.maxResultChars`` when unset: the longest result (as JSON) a run may return."""

MAX_OUTPUT_LINES: Final = 100
"""Console lines one run keeps (each a ``hook-output`` event, and an eval's answer): the
rest are counted in ``SandboxRunResult.output_dropped``, not kept, so a hook that logs in a
loop leaves a bounded history."""

MAX_OUTPUT_LINE_CHARS: Final = 1000
"""The longest console line a run keeps; a longer one is cut, marked with ``OUTPUT_CUT``."""

OUTPUT_CUT: Final = " … (cut)"
"""What ends a console line cut at ``MAX_OUTPUT_LINE_CHARS``."""

ACTIVITY_MARGIN: Final = timedelta(seconds=30)
"""Start-to-close slack beyond ``timeoutMs``: spawning the process and serving its tool calls."""

SANDBOX_HEARTBEAT_TIMEOUT: Final = HEARTBEAT_TIMEOUT
"""A run heartbeats while its script runs (up to ``timeoutMs``): a worker that died mid-run is
noticed within this and the run retried, its ``tools.*`` writes replayed from the effect
journal rather than applied again."""

CUSTOM_HOOK_HEARTBEAT_TIMEOUT: Final = HEARTBEAT_TIMEOUT
"""A host's hook executor heartbeats while it runs (a webhook round trip): a dead worker's
call is retried within this, the executor told the same idempotency key."""

SANDBOX_ERRORS: Final = [
    "SandboxError",
    "ForbiddenSandboxImportError",
    "SandboxScriptError",
    "SandboxTimeoutError",
    "SandboxMemoryError",
    "SandboxResultTooLargeError",
    "SandboxCrashError",
]
"""The typed errors (:mod:`archmax_temporal.workflows.errors`) a run can end in: the script's own
failure."""

SANDBOX_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=SANDBOX_ERRORS,
)
"""A script's own failure (a throw, a timeout, a memory bomb) would fail again: never retried.
Only a lost worker retries."""

CUSTOM_HOOK_TIMEOUT: Final = timedelta(minutes=2)
"""Per-attempt bound on a host's hook executor (a webhook round trip, say)."""

CUSTOM_HOOK_RETRY: Final = RetryPolicy(maximum_attempts=3, non_retryable_error_types=SANDBOX_ERRORS)
"""An executor's own answer (a veto included) is never an error; only a lost worker or a
crashed executor retries, and a typed sandbox error never does."""


class _Model(BaseModel):
    """A wire model: unknown fields (from a newer version) are ignored, never refused."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class SandboxLimits(_Model):
    """The bounds of one run, from ``settings``."""

    timeout_ms: int = Field(default=DEFAULT_TIMEOUT_MS, gt=0)
    memory_limit_bytes: int = Field(default=DEFAULT_MEMORY_LIMIT_BYTES, gt=0)
    max_ptc_calls: int | None = DEFAULT_MAX_PTC_CALLS
    """None: unbounded (``maxPtcCalls: null``)."""
    max_result_chars: int = Field(default=DEFAULT_MAX_RESULT_CHARS, gt=0)

    @classmethod
    def from_settings(cls, settings: SettingsSpec) -> SandboxLimits:
        """The spec's settings, defaults filled in."""
        return cls(
            timeout_ms=settings.timeout_ms or DEFAULT_TIMEOUT_MS,
            memory_limit_bytes=settings.memory_limit_bytes or DEFAULT_MEMORY_LIMIT_BYTES,
            max_ptc_calls=DEFAULT_MAX_PTC_CALLS
            if settings.max_ptc_calls is None
            else settings.max_ptc_calls,
            max_result_chars=settings.max_result_chars or DEFAULT_MAX_RESULT_CHARS,
        )


class SandboxRunInput(_Model):
    """One run: what to evaluate, its ``args``, and what governs its ``tools.*`` calls.

    ``source`` is given for a hook (the loader snapshotted it with the spec); ``script_path``
    for ``archmax_run``, read from the workspace (a skill bundle) inside the activity.
    """

    session_id: str
    label: str
    """What the run is, for errors and the UI: ``hooks/check.js``, ``skills/x/scripts/y.js``."""
    kind: Literal["hook", "script", "eval"]
    """A hook (runtime authority), an ``archmax_run`` script or an ``archmax_eval`` snippet
    (the agent's authority; an eval's value is its completion value, never called)."""
    source: str | None = None
    script_path: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    spec: WorkflowSpec
    state: str
    variables: dict[str, Variable] = Field(default_factory=dict)
    mocks: list[ToolMock] = Field(default_factory=list)
    visible_skills: list[str] = Field(default_factory=list)
    """Skill bundles the run may read: a hook sees every bundle no workflow-wide denial
    removes; a script sees its state's enabled skills."""
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    workflow_tools: list[str] = Field(default_factory=list)
    """``archmax_workflow_<slug>`` tools a script may call (``tools.archmaxWorkflow<Slug>``).
    The activity cannot start a child workflow, so such a call ends the run with a
    :class:`SandboxDispatch` for the session workflow to carry out."""
    journal: ScriptJournal = Field(default_factory=ScriptJournal)
    """The answers of an earlier run of the same script, in call order: re-running after a
    dispatch replays them (no side effect runs twice) and the dispatch's answer comes last."""


class SandboxDispatch(_Model):
    """A sub-workflow call a script made, for the session workflow to dispatch."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class SandboxRunResult(_Model):
    """A run that settled: its value (JSON), its ``console`` lines and its tool calls."""

    value: Any = None
    returned_nothing: bool = True
    logs: list[str] = Field(default_factory=list)
    """The run's ``console.*`` lines, ``"<method> <text>"`` (``log checking intake``), at most
    ``MAX_OUTPUT_LINES`` of ``MAX_OUTPUT_LINE_CHARS``; a resumed script's lines start where
    its journal's replay ends (the earlier run reported the ones before)."""
    output_dropped: int = 0
    """Console lines past ``MAX_OUTPUT_LINES``, counted and not kept."""
    calls: list[SandboxToolCall] = Field(default_factory=list)
    """Every ``tools.*`` call, its content kept only for those that failed (cut short): the
    workflow reads statuses, and results must stay small in the history."""
    dispatch: SandboxDispatch | None = None
    """Set when the run stopped at a sub-workflow call: the value is not final; run the
    script again with ``journal`` and the dispatch's answer at its end."""
    journal: ScriptJournal | None = None
    """With ``dispatch``: every call of this run, answered, as stored for the next run."""
    terminal: str | None = None
    """Set when the run stopped at a call governance refused for good (an unresolvable
    guard, ``tool.unresolved-variable``): the value is not final, and the turn fails with this
    reason as it would for the agent's own call."""

    @property
    def failed_calls(self) -> list[SandboxToolCall]:
        """The calls that were refused or failed: each one fails a hook closed."""
        return [call for call in self.calls if call.status != "ok"]


class CustomHookInput(_Model):
    """A custom hook kind's invocation: its kind, its declaration's value, and ``args``."""

    session_id: str
    kind: str
    config: Any = None
    args: dict[str, Any] = Field(default_factory=dict)
    stored: dict[str, Variable] = Field(default_factory=dict)
    """The session's values by reference (``args.variables`` holds them as None): the
    activity reads them from the store into ``args`` before the executor runs."""


class CustomHookResult(_Model):
    """What the host's executor returned (read by
    :func:`archmax_temporal.workflows.hooks.custom_verdict`)."""

    value: Any = None
    error: str | None = None


def activity_timeout(limits: SandboxLimits) -> timedelta:
    """The activity's start-to-close bound: the script's own budget plus the margin."""
    return timedelta(milliseconds=limits.timeout_ms) + ACTIVITY_MARGIN


RUN: Final = ActivityContract(
    SANDBOX_ACTIVITY, SandboxRunInput, SandboxRunResult, "one hook, script or snippet in QuickJS"
)
CUSTOM_HOOK: Final = ActivityContract(
    CUSTOM_HOOK_ACTIVITY, CustomHookInput, CustomHookResult, "a host's custom hook executor"
)
CONTRACTS: Final[tuple[ActivityContract, ...]] = (RUN, CUSTOM_HOOK)


async def run(run: SandboxRunInput, *, summary: str) -> SandboxRunResult:
    """Schedule one sandboxed run, bounded by its own limits plus the margin, and wait for
    it (an ``ActivityError`` carrying the typed sandbox error when it failed)."""
    result: SandboxRunResult = await workflow.execute_activity(
        SANDBOX_ACTIVITY,
        run,
        result_type=SandboxRunResult,
        start_to_close_timeout=activity_timeout(run.limits),
        heartbeat_timeout=SANDBOX_HEARTBEAT_TIMEOUT,
        retry_policy=SANDBOX_RETRY,
        summary=summary,
    )
    return result


async def custom_hook(call: CustomHookInput, *, summary: str) -> CustomHookResult:
    """Schedule a host's executor of a custom hook kind and wait for what it returned."""
    result: CustomHookResult = await workflow.execute_activity(
        CUSTOM_HOOK_ACTIVITY,
        call,
        result_type=CustomHookResult,
        start_to_close_timeout=CUSTOM_HOOK_TIMEOUT,
        heartbeat_timeout=CUSTOM_HOOK_HEARTBEAT_TIMEOUT,
        retry_policy=CUSTOM_HOOK_RETRY,
        summary=summary,
    )
    return result
