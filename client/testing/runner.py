"""``archmax test``'s engine: run a workflow's cases against the real session workflow.

:func:`run_tests` discovers a workflow's cases, builds one target agent and runs each case on
its own session, returning :class:`RunTestsResult` data and printing nothing (the CLI's test
view is one renderer of it). Its halves, :func:`discover_cases` and :func:`run_case`, are
exported for a host that schedules cases itself.

A case is interpreted on the host: ``send``/``decide``/``deliver`` go through the same host
API a production caller uses (``agent.workflow.*``), so every turn is a real Temporal update
on a real ``ArchmaxSession``; assertions read the session's recorded view after the nearest
action. A failed structural assertion *halts* the case (a verdict); a thrown action, a refused
start or a ``caseTimeoutMs`` overrun makes it *die* (``error`` is set). Either way every
assertion that never ran is reported ``not-executed``.

This runtime's extension of the format runs here too: ``redeliver`` sends the previous action again
under its idempotency key (every action is fired under one, :func:`action_key`) and checks the
session answered as before and applied nothing twice; ``repeat`` runs the case on N fresh sessions
and judges it by ``passRate``; a case with an ``advance`` or a ``crash`` runs on workers of its own
(:mod:`archmax_temporal.client.testing.durable`), and each ``crash`` records what the runner checked
of the turn it killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Final, Literal, Protocol

import openai
from temporalio.client import WorkflowExecutionStatus

from archmax_temporal.activities.model import ModelConfig, openai_client
from archmax_temporal.activities.store_errors import WorkspaceError
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.devserver import TemporalCliNotFoundError
from archmax_temporal.client.host import Agent
from archmax_temporal.client.loader import load_workflow
from archmax_temporal.client.testing import assertions
from archmax_temporal.client.testing.assertions import TurnView
from archmax_temporal.client.testing.case_issues import CaseSchemaError
from archmax_temporal.client.testing.case_model import CaseDocument
from archmax_temporal.client.testing.case_workspace import workspace_seeds
from archmax_temporal.client.testing.cases import load_case
from archmax_temporal.client.testing.discovery import DiscoveredCase
from archmax_temporal.client.testing.discovery import discover_cases as _discover
from archmax_temporal.client.testing.durable import (
    CrashReport,
    DurableCase,
    DurableEnvironment,
    applied_twice,
    needs_durable,
)
from archmax_temporal.client.testing.grader import grade_step
from archmax_temporal.client.testing.results import (
    AssertionRecord,
    CaseResult,
    CaseRun,
    RepeatSummary,
    RunTestsResult,
    Verdict,
    exit_code_for,
    reduce_verdict,
)
from archmax_temporal.client.testing.steps import (
    AdvanceStep,
    CaseStep,
    CrashStep,
    DecideStep,
    DeliverStep,
    GradeStep,
    RedeliverStep,
    SendStep,
)
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    InvalidTargetError,
    UnknownTriggerError,
    UnsupportedConcurrencyError,
)
from archmax_temporal.workflows.models import Outcome, ToolMock, TrailStep, Usage
from archmax_temporal.workflows.spec import MANUAL_TRIGGER, JudgeSpec, WorkflowSpec

DEFAULT_CASE_TIMEOUT_MS: Final = 120_000
"""``tests.caseTimeoutMs`` when a workflow declares none."""

JUDGE_RETRIES: Final = 2
"""The judge's own client retries: it runs on the host, with no Temporal retry around it."""


GradeFn = Callable[[GradeStep, TurnView], Awaitable[AssertionRecord]]
"""Scores a ``grade`` step against the turn (client.grader builds the default one)."""


class CaseListener(Protocol):
    """What a renderer (the CLI's test view, a host's reporter) hears while a suite runs.

    A listener may also have, and is then told of this runtime's steps: ``run_started(case_id,
    run, runs)`` (a repeated case's next run), ``clock_advanced(case_id, by)`` (an
    ``advance`` done, its turns ended) and ``worker_killed(case_id, text)`` (a ``crash``
    struck and a fresh worker took over)."""

    def case_started(self, case_id: str, title: str, session_id: str) -> None: ...

    def trail_step(self, case_id: str, from_state: str | None, step: TrailStep) -> None:
        """A step committed to the case session's trail, in order, as the case drives it."""

    def case_finished(self, result: CaseResult) -> None: ...


def discover_cases(root: Path, workflow: str, filter: str | None = None) -> list[DiscoveredCase]:
    """The cases of ``workflows/<workflow>/tests/`` under the authoring ``root``, sorted by
    path, optionally filtered by a tests-relative path substring."""
    return _discover(root / "workflows" / workflow, filter)


def default_session_id(run_id: str, case: DiscoveredCase) -> str:
    """``test-<run>-<case id with / as ->``: unique per run, readable in the Temporal UI."""
    return f"test-{run_id}-{re.sub(r'[^A-Za-z0-9._-]', '-', case.id)}"


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:6]}"


@dataclass
class _CaseProgress:
    """What a case produced so far; kept outside the timeout scope so a case that dies still
    reports every record it made."""

    records: list[AssertionRecord] = field(default_factory=list)
    executed: set[int] = field(default_factory=set)
    halted: bool = False
    usage: Usage | None = None
    """The session's spend as of its latest view."""


@dataclass(frozen=True)
class _Run:
    """One run of a case on one session: its records, why it died, what it spent."""

    session_id: str
    records: list[AssertionRecord]
    error: str | None
    usage: Usage | None

    @property
    def verdict(self) -> Verdict:
        return reduce_verdict(self.records, self.error)


async def run_case(
    case: DiscoveredCase,
    agent: Agent,
    *,
    tests_dir: Path,
    session_id: str,
    grade: GradeFn | None = None,
    case_timeout_ms: int | None = None,
    listener: CaseListener | None = None,
    durable: DurableEnvironment | None = None,
    end_session: bool = False,
    disposals: list[asyncio.Task[None]] | None = None,
) -> CaseResult:
    """Run one case on the session ``session_id`` and return its result (never raises for
    anything the case or the session did).

    A case using this runtime's extension runs as it asks: one that advances the clock or crashes a
    worker on workers of its own (``durable``, the suite's
    :class:`~archmax_temporal.client.testing.durable.DurableEnvironment`; by default one for this
    case alone), a repeated one N times on sessions ``<session_id>-r1`` … ``-rN``. ``end_session``
    ends each session the case ran on once its run is over (as :func:`dispose_case_session` does;
    the suite does it for the sessions it named); with ``disposals``, a session of the suite agent's
    is ended in the background (the task is appended there, for the caller to await) while the next
    case runs."""
    try:
        document = load_case(case, tests_dir)
    except CaseSchemaError as exc:
        message = str(exc)
        return _announced(
            listener,
            session_id,
            CaseResult(
                id=case.id,
                title=case.id,
                description="",
                verdict=Verdict(status="failed", failures=[message]),
                error=message,
            ),
        )
    if document.skip is not None:
        return _announced(
            listener,
            session_id,
            CaseResult(
                id=case.id,
                title=document.title,
                description=document.description,
                verdict=Verdict(status="skipped"),
                skip_reason=document.skip,
            ),
        )
    if listener is not None:
        listener.case_started(case.id, document.title, session_id)
    own = durable is None and needs_durable(document)
    environment = DurableEnvironment() if own else durable
    runs: list[_Run] = []
    ended: list[str] = []
    try:
        for number in range(1, document.repeat + 1):
            sid = session_id if document.repeat == 1 else f"{session_id}-r{number}"
            if document.repeat > 1:
                _tell(listener, "run_started", case.id, number, document.repeat)
            runs.append(
                await _run_once(
                    case,
                    document,
                    agent,
                    tests_dir=tests_dir,
                    session_id=sid,
                    grade=grade,
                    case_timeout_ms=case_timeout_ms,
                    listener=listener,
                    durable=environment,
                    end_session=end_session,
                )
            )
            if end_session and document.repeat > 1 and not needs_durable(document):
                await _dispose(agent, sid, disposals)
                ended.append(sid)
    finally:
        if own and environment is not None:
            await environment.close()
    result = _case_result(case, document, runs)
    if listener is not None:
        listener.case_finished(result)
    if end_session and not needs_durable(document):
        for sid in {run.session_id for run in runs} - set(ended):
            await _dispose(agent, sid, disposals)
    return result


async def _dispose(agent: Agent, session_id: str, into: list[asyncio.Task[None]] | None) -> None:
    """End a case's session now, or (``into``) in the background, its task kept there."""
    if into is None:
        await dispose_case_session(agent, session_id)
    else:
        into.append(asyncio.get_running_loop().create_task(dispose_case_session(agent, session_id)))


def _crash_steps(case: DiscoveredCase, tests_dir: Path) -> int:
    """How many ``crash`` steps a case holds (none when it does not parse or is skipped)."""
    try:
        document = load_case(case, tests_dir)
    except CaseSchemaError:
        return 0
    if document.skip is not None:
        return 0
    return document.repeat * sum(1 for step in document.steps if isinstance(step, CrashStep))


def _case_result(case: DiscoveredCase, document: CaseDocument, runs: list[_Run]) -> CaseResult:
    """The case's result from its runs: one run's as it is; a repeated case's by its pass
    rate, with the records of the first run whose verdict is the case's."""
    environment = "time-skipping" if document.advances else None
    usage = _summed([run.usage for run in runs])
    if document.repeat == 1:
        (run,) = runs
        return CaseResult(
            id=case.id,
            title=document.title,
            description=document.description,
            session_id=run.session_id,
            verdict=run.verdict,
            records=run.records,
            error=run.error,
            usage=usage,
            environment=environment,
        )
    verdicts = [run.verdict for run in runs]
    passed = sum(1 for verdict in verdicts if verdict.status == "passed")
    rate = passed / len(runs)
    status: Literal["passed", "failed"] = (
        "passed" if rate + 1e-9 >= document.pass_rate else "failed"
    )
    shown = next(run for run, v in zip(runs, verdicts, strict=True) if v.status == status)
    failures: list[str] = []
    if status == "failed":
        failures.append(
            f"passRate: {passed} of {len(runs)} runs passed ({rate:g} < {document.pass_rate:g})"
        )
        for number, verdict in enumerate(verdicts, start=1):
            failures += [f"run {number}: {failure}" for failure in verdict.failures]
    return CaseResult(
        id=case.id,
        title=document.title,
        description=document.description,
        session_id=shown.session_id,
        verdict=Verdict(status=status, failures=failures),
        records=shown.records,
        error=shown.error if status == "failed" else None,
        usage=usage,
        environment=environment,
        repeat=RepeatSummary(
            runs=len(runs), passed=passed, rate=round(rate, 6), pass_rate=document.pass_rate
        ),
        runs=[
            CaseRun(run=number, session_id=run.session_id, verdict=verdict, error=run.error)
            for number, (run, verdict) in enumerate(zip(runs, verdicts, strict=True), start=1)
        ],
    )


def _summed(usages: list[Usage | None]) -> Usage | None:
    spent = [usage for usage in usages if usage is not None]
    if not spent:
        return None
    total = Usage()
    for usage in spent:
        total = total.plus(usage)
    return total


async def _run_once(
    case: DiscoveredCase,
    document: CaseDocument,
    agent: Agent,
    *,
    tests_dir: Path,
    session_id: str,
    grade: GradeFn | None,
    case_timeout_ms: int | None,
    listener: CaseListener | None,
    durable: DurableEnvironment | None,
    end_session: bool,
) -> _Run:
    """One run of the case on ``session_id``: driven within ``caseTimeoutMs``; the steps that
    never ran reported not-executed."""
    progress = _CaseProgress()
    error: str | None = None
    timeout_ms = case_timeout_ms or DEFAULT_CASE_TIMEOUT_MS
    budget = asyncio.timeout(timeout_ms / 1000)
    overrun = f"case exceeded tests.caseTimeoutMs ({timeout_ms} ms)"
    own: DurableCase | None = None
    try:
        async with budget:
            if durable is not None and needs_durable(document):
                try:
                    own = await durable.open(agent, document)
                except TemporalCliNotFoundError as exc:
                    raise _CaseDied(
                        "advance runs on Temporal's time-skipping test server, which is not "
                        f"installed (pip install 'archmax-temporal[time-skipping]'): {exc}"
                    ) from None
            await _drive_case(
                case,
                document,
                own.agent if own is not None else agent,
                tests_dir,
                session_id,
                grade,
                listener,
                progress,
                own,
            )
    except TimeoutError:
        error = overrun
    except _CaseDied as died:
        # The client may turn the cancellation into its own error (an update's RPC
        # cancelled); the budget still says why the action stopped.
        error = overrun if budget.expired() else died.message
    except Exception as exc:  # the runner's own failure: this case dies, the suite goes on
        error = f"the case runner failed: {type(exc).__name__}: {exc}"
    finally:
        if own is not None:
            if end_session:
                with contextlib.suppress(Exception):  # a worker to take the cancellation
                    await own.ensure_worker()
                await dispose_case_session(own.agent, session_id)
            await own.close()
    records = progress.records + [
        assertions.not_executed(step)
        for step in document.recorded
        if step.index not in progress.executed
    ]
    records.sort(key=lambda record: record.step)
    return _Run(session_id=session_id, records=records, error=error, usage=progress.usage)


def _tell(listener: CaseListener | None, hook: str, *args: Any) -> None:
    """Call a listener's optional hook (this runtime's: ``run_started``, ``clock_advanced``,
    ``worker_killed``) when it has one."""
    method = getattr(listener, hook, None)
    if callable(method):
        method(*args)


def _announced(listener: CaseListener | None, session_id: str, result: CaseResult) -> CaseResult:
    """A case that drives nothing (skipped, or refused by the schema) is still heard of: its
    header and its verdict line, with the reason, like any other case."""
    if listener is not None:
        listener.case_started(result.id, result.title, session_id)
        listener.case_finished(result)
    return result


class _CaseDied(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _message(exc: Exception) -> str:
    return str(exc) if isinstance(exc, ArchmaxError) else f"{type(exc).__name__}: {exc}"


def _mocks(document: CaseDocument) -> list[ToolMock]:
    return [ToolMock(tool=m.tool, when_input=m.when_input, result=m.result) for m in document.mocks]


def _check_trigger(spec: WorkflowSpec, document: CaseDocument) -> str:
    trigger = document.trigger.id if document.trigger else MANUAL_TRIGGER
    if spec.start_state_for(trigger) is None:
        declared = ", ".join(spec.trigger_ids()) or "(none)"
        raise _CaseDied(
            str(
                UnknownTriggerError(
                    f"trigger {trigger!r} is not declared by the workflow; "
                    f"declared triggers: {declared}"
                )
            )
        )
    return trigger


def action_key() -> str:
    """The idempotency key of one action of a case (``redeliver`` sends it again)."""
    return f"archmax-test-{uuid.uuid4().hex}"


@dataclass
class _Fired:
    """The latest send, decide or deliver: what a ``redeliver`` sends again."""

    step: CaseStep
    key: str
    outcome: Outcome


async def _drive_case(
    case: DiscoveredCase,
    document: CaseDocument,
    agent: Agent,
    tests_dir: Path,
    session_id: str,
    grade: GradeFn | None,
    listener: CaseListener | None,
    progress: _CaseProgress,
    durable: DurableCase | None = None,
) -> None:
    trigger = _check_trigger(agent.loaded.spec, document)
    if document.workspace:
        try:
            seeds = workspace_seeds(document, tests_dir)
            await agent.sessions.seed(session_id, seeds)
        except (OSError, ArchmaxError, WorkspaceError) as exc:
            raise _CaseDied(f"workspace: seeding failed: {exc}") from None
    mocks = _mocks(document)
    turn: TurnView | None = None
    seen_trail = 0
    seen_event = 0
    hears_events = listener is not None and getattr(listener, "hears_output", False)
    armed: CrashStep | None = None
    fired: _Fired | None = None
    for step in document.steps:
        if isinstance(step, CrashStep):
            armed = step  # it arms the next action
            continue
        if step.is_action:
            start = len(turn.view.transcript) if turn is not None else 0
            crash, armed = armed, None
            try:
                if isinstance(step, RedeliverStep):
                    assert fired is not None and turn is not None  # the schema's order
                    progress.executed.add(step.index)
                    progress.records.append(
                        await _redeliver(step, fired, agent, session_id, turn, trigger, document)
                    )
                elif isinstance(step, AdvanceStep):
                    assert durable is not None  # an advancing case runs on its own workers
                    await _advance(step, durable, session_id, crash)
                    _tell(listener, "clock_advanced", case.id, step.by)
                else:
                    key = action_key()
                    outcome = await _fire(
                        step, agent, session_id, trigger, document, mocks, key, durable, crash
                    )
                    fired = _Fired(step, key, outcome)
                view = await agent.sessions.view(session_id)
            except Exception as exc:  # an action that throws: the case dies, the suite goes on
                if crash is not None and durable is not None and durable.last_crash:
                    progress.executed.add(crash.index)
                    progress.records.append(_crash_record(durable.last_crash))
                raise _CaseDied(f"steps[{step.index}] {step.kind}: {_message(exc)}") from None
            if crash is not None and durable is not None and durable.last_crash is not None:
                progress.executed.add(crash.index)
                report = durable.last_crash
                progress.records.append(_crash_record(report))
                if report.struck is not None:
                    _tell(listener, "worker_killed", case.id, _struck_line(report))
            if not isinstance(step, RedeliverStep):
                turn = TurnView(view=view, turn_start=start)
            progress.usage = view.summary.usage
            if listener is not None:
                for position in range(seen_trail, len(view.trail)):
                    before = view.trail[position - 1].to if position else None
                    listener.trail_step(case.id, before, view.trail[position])
            seen_trail = len(view.trail)
            if hears_events:
                seen_event = await _relay_output(agent, session_id, case.id, listener, seen_event)
            continue
        assert turn is not None  # the schema refuses an assertion before any action
        progress.executed.add(step.index)
        records = await _assert(step, turn, grade)
        progress.records.extend(records)
        if step.structural and any(r.status == "failed" for r in records):
            progress.halted = True
            return


async def _fire(
    step: CaseStep,
    agent: Agent,
    session_id: str,
    trigger: str,
    document: CaseDocument,
    mocks: list[ToolMock],
    key: str,
    durable: DurableCase | None,
    crash: CrashStep | None,
) -> Outcome:
    """A send, decide or deliver under ``key``; on a case's own workers, with ``crash``
    armed for it."""

    def action() -> Awaitable[Outcome]:
        return _act(step, agent, session_id, trigger, document, mocks, key)

    if durable is None:
        return await action()
    return await durable.act(action, crash)


async def _advance(
    step: AdvanceStep, durable: DurableCase, session_id: str, crash: CrashStep | None
) -> None:
    """Move the case's clock on, then wait until every turn the timers woke has ended."""

    async def advance() -> None:
        await durable.advance(step.duration)
        await durable.settle(session_id)

    await durable.act(advance, crash)


def _struck_line(report: CrashReport) -> str:
    step = report.step
    return f"crash during {step.during} #{step.nth}: {report.killed}; a fresh worker took over"


def _crash_record(report: CrashReport) -> AssertionRecord:
    """What the runner checked of an armed crash: that it struck, and that the turn it hit
    applied no side effect twice (the effect journal, as the workers heard it)."""
    step = report.step
    if report.struck is None:
        return AssertionRecord(
            kind="crash",
            status="failed",
            detail=(
                f"the armed crash never struck: the action's turn started fewer than "
                f"{step.nth} {step.during} activit{'y' if step.nth == 1 else 'ies'} "
                f"on its worker"
            ),
            step=step.index,
        )
    violations, notes = applied_twice(report.events)
    where = report.killed
    if violations:
        return AssertionRecord(
            kind="crash",
            status="failed",
            detail=f"{where}; applied twice: " + "; ".join(v.detail for v in violations),
            step=step.index,
        )
    detail = f"{where}; resumed by a fresh worker; nothing applied twice"
    if notes:
        detail += " (" + "; ".join(notes) + ")"
    return AssertionRecord(kind="crash", status="passed", detail=detail, step=step.index)


async def _redeliver(
    step: RedeliverStep,
    fired: _Fired,
    agent: Agent,
    session_id: str,
    turn: TurnView,
    trigger: str,
    document: CaseDocument,
) -> AssertionRecord:
    """Send the previous action again under its key, as a retried webhook would, and check
    that the session answered with the first outcome and applied nothing twice."""
    before = turn.view
    what = f"{fired.step.kind} (steps[{fired.step.index}])"
    try:
        again = await _act(
            fired.step,
            agent,
            session_id,
            trigger,
            document,
            _mocks(document),
            redelivery_key(fired.key),
        )
    except Exception as exc:
        return AssertionRecord(
            kind="redeliver",
            status="failed",
            detail=f"{what} sent again was refused: {_message(exc)}",
            step=step.index,
        )
    after = await agent.sessions.view(session_id)
    problems: list[str] = []
    if again != fired.outcome:
        first, second = fired.outcome.model_dump(), again.model_dump()
        changed = [name for name in first if first[name] != second[name]]
        problems.append(f"answered another outcome ({', '.join(changed)} differ)")
    calls = after.summary.usage.calls - before.summary.usage.calls
    if calls:
        problems.append(f"made {calls} more model call{'s' if calls > 1 else ''}")
    steps = len(after.trail) - len(before.trail)
    if steps:
        problems.append(f"committed {steps} more trail step{'s' if steps > 1 else ''}")
    messages = len(after.transcript) - len(before.transcript)
    if messages:
        problems.append(f"added {messages} message{'s' if messages > 1 else ''}")
    if problems:
        return AssertionRecord(
            kind="redeliver",
            status="failed",
            detail=f"{what} sent again under its idempotency key " + "; ".join(problems),
            step=step.index,
        )
    return AssertionRecord(
        kind="redeliver",
        status="passed",
        detail=f"{what} sent again: the first outcome, nothing applied twice",
        step=step.index,
    )


def redelivery_key(key: str) -> str:
    """The key a ``redeliver`` sends its action again under: the action's own (a test that
    shows what a redelivery without it does replaces this)."""
    return key


async def _relay_output(
    agent: Agent, session_id: str, case_id: str, listener: Any, after: int
) -> int:
    """The hooks' and scripts' console lines (``hook-output`` events) the case's last action
    wrote, to a listener that hears them (``hears_output``: ``archmax test --verbose``);
    the position read up to."""
    async for event in agent.sessions.events(session_id, after=after):
        after = event.seq
        if event.type == "hook-output":
            listener.hook_output(case_id, event)
    return after


async def _act(
    step: CaseStep,
    agent: Agent,
    session_id: str,
    trigger: str,
    document: CaseDocument,
    mocks: list[ToolMock],
    key: str | None = None,
) -> Outcome:
    if isinstance(step, SendStep):
        return await agent.workflow.send(
            session_id,
            step.message,
            trigger=trigger,
            variables=dict(document.variables),
            mocks=mocks,
            idempotency_key=key,
        )
    if isinstance(step, DecideStep):
        return await agent.workflow.decide(
            session_id, to=step.to, comment=step.comment, mocks=mocks, idempotency_key=key
        )
    assert isinstance(step, DeliverStep)
    return await agent.workflow.deliver(
        session_id,
        trigger=step.trigger,
        variables=dict(step.variables),
        mocks=mocks,
        idempotency_key=key,
    )


async def _assert(step: CaseStep, turn: TurnView, grade: GradeFn | None) -> list[AssertionRecord]:
    if isinstance(step, GradeStep):
        if grade is None:
            return [
                AssertionRecord(
                    kind="grade.closedQA",
                    status="failed",
                    threshold=step.at_least,
                    score=0,
                    detail=(
                        f"{step.closed_qa}: grade requires tests: {{ judge: … }} in "
                        "workflow.yaml (judge: {} uses the environment's model)"
                    ),
                    step=step.index,
                )
            ]
        try:
            return [await grade(step, turn)]
        except openai.OpenAIError as exc:
            # A grade is a content assertion: an endpoint that fails scores the turn 0 with the
            # error as its detail, and the case carries on.
            return [
                AssertionRecord(
                    kind="grade.closedQA",
                    status="failed",
                    threshold=step.at_least,
                    score=0,
                    detail=f"{step.closed_qa}: the grading model failed: {exc}",
                    step=step.index,
                )
            ]
    return assertions.evaluate(step, turn)


def judge_grader(
    judge: JudgeSpec, model_config: ModelConfig, client: openai.AsyncOpenAI | None = None
) -> GradeFn:
    """The ``grade`` scorer of a suite with ``tests: { judge }``: the turn's own messages as
    evidence, the grading model over the openai client, the ``atLeast`` bar."""

    async def score(step: GradeStep, turn: TurnView) -> AssertionRecord:
        return await grade_step(
            step, turn.turn_messages, judge=judge, model_config=model_config, client=client
        )

    return score


TargetFactory = Callable[[str, Path], Awaitable[Agent]]
"""``create_target(workflow, root)``: the agent under test (default: :func:`create_agent`)."""


class AuthoringBackend(Protocol):
    """Where a suite is read from when it is not a local directory: the spec, the case
    documents and their ``from:`` fixtures. Paths are authoring-relative posix paths
    (``workflows/<slug>/tests/approved.test.yaml``)."""

    def walk(self, path: str) -> list[str]:
        """Every file below ``path``, as authoring-relative paths (none: an empty list)."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """The bytes of the file at ``path``."""
        ...


def materialize_suite(backend: AuthoringBackend, workflow: str, into: Path) -> Path:
    """Copy ``workflows/<workflow>/`` of ``backend`` under ``into`` (an authoring root the
    loader and discovery read like any other); returns ``into``."""
    prefix = f"workflows/{workflow}"
    for relative in backend.walk(prefix):
        parts = PurePosixPath(relative).parts
        if not relative.startswith(prefix + "/") or ".." in parts or relative.startswith("/"):
            raise InvalidTargetError(f"authoring backend listed {relative!r} outside {prefix}/")
        target = into.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(backend.read_bytes(relative))
    return into


DISPOSE_GRACE_SECONDS = 10.0
"""How long an ended case's session has to take its cancellation before it is terminated."""


async def dispose_case_session(agent: Agent, session_id: str) -> None:
    """End a case's session workflow once its case ended, so a suite leaves no running
    sessions beside production ones. Its history and artifacts stay; one already closed, or
    never started, is left as it is.

    The session is cancelled (Temporal's request to end; a settled session, waiting for its
    next firing, ends at once, shown as Canceled), and only one that has not closed within
    :data:`DISPOSE_GRACE_SECONDS` (no worker to take the request, a turn that went on) is
    terminated, the act the UI reserves for an operator's."""
    handle = agent.handle(session_id)
    try:
        await handle.cancel()
    except Exception:  # already closed, never started: nothing to end
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DISPOSE_GRACE_SECONDS
    delay = 0.05
    while loop.time() < deadline:
        try:
            described = await handle.describe()
        except Exception:
            return
        if described.status != WorkflowExecutionStatus.RUNNING:
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
    with contextlib.suppress(Exception):  # closed meanwhile
        await handle.terminate(reason="archmax test: the case ended (cancellation not taken)")


async def run_tests(
    workflow: str,
    root: Path,
    *,
    filter: str | None = None,
    authoring: Path | AuthoringBackend | None = None,
    create_target: Agent | TargetFactory | None = None,
    session_id_for_case: Callable[[DiscoveredCase], str] | None = None,
    grade: GradeFn | None = None,
    listener: CaseListener | None = None,
    model: ModelConfig | None = None,
    sandbox_runtime: Sequence[str] | None = None,
    **agent_kwargs: Any,
) -> RunTestsResult:
    """Run the cases of ``workflows/<workflow>/`` and return their results; prints nothing.

    ``authoring`` is where the suite (spec, cases, ``from:`` fixtures) is read from: a
    directory, or any :class:`AuthoringBackend` (default: ``root``). ``create_target`` is the
    agent under test: a built :class:`Agent`, or a factory ``(workflow, root)``; by default one
    :func:`create_agent` per suite, closed afterwards. ``sandbox_runtime`` (the command line
    that starts the sandbox process, see :func:`archmax_temporal.worker.build_worker`) is
    forwarded only to that default agent under test, whose hooks and scripts it runs; case
    documents are interpreted here either way. ``session_id_for_case`` names each case's
    session (reported back on ``CaseResult.session_id``); a session the runner named itself is
    ended when its case ends. ``grade`` scores ``grade`` steps; by default a suite with
    ``tests: { judge }`` grades with the judge model over ``model`` (default: the
    environment's endpoint), and without a judge a grade step records an actionable failure.
    A disabled workflow runs nothing and reports ``skipped="disabled"`` with exit code 0;
    ``tests.maxConcurrency`` above 1 raises :class:`UnsupportedConcurrencyError` before any
    case runs.
    """
    if authoring is None or isinstance(authoring, Path):
        return await _run_suite(
            workflow,
            root,
            authoring or root,
            filter=filter,
            create_target=create_target,
            session_id_for_case=session_id_for_case,
            grade=grade,
            listener=listener,
            model=model,
            sandbox_runtime=sandbox_runtime,
            agent_kwargs=agent_kwargs,
        )
    with tempfile.TemporaryDirectory(prefix="archmax-suite-") as scratch:
        source = await asyncio.to_thread(materialize_suite, authoring, workflow, Path(scratch))
        return await _run_suite(
            workflow,
            root,
            source,
            filter=filter,
            create_target=create_target,
            session_id_for_case=session_id_for_case,
            grade=grade,
            listener=listener,
            model=model,
            sandbox_runtime=sandbox_runtime,
            agent_kwargs=agent_kwargs,
        )


async def _run_suite(
    workflow: str,
    root: Path,
    source: Path,
    *,
    filter: str | None,
    create_target: Agent | TargetFactory | None,
    session_id_for_case: Callable[[DiscoveredCase], str] | None,
    grade: GradeFn | None,
    listener: CaseListener | None,
    model: ModelConfig | None,
    sandbox_runtime: Sequence[str] | None,
    agent_kwargs: dict[str, Any],
) -> RunTestsResult:
    loaded = load_workflow(source, workflow)
    spec = loaded.spec
    cases = discover_cases(source, workflow)
    discovered = len(cases)
    if spec.disabled:
        return RunTestsResult(exit_code=0, discovered=discovered, skipped="disabled")
    concurrency = spec.tests.max_concurrency
    if concurrency is not None and concurrency > 1:
        raise UnsupportedConcurrencyError(
            f"tests.maxConcurrency: {concurrency} is not supported: cases run sequentially "
            "(set it to 1 or remove it)"
        )
    if filter is not None:
        cases = [c for c in cases if filter in c.file]
        if not cases:
            return RunTestsResult(exit_code=1, discovered=discovered)
    tests_dir = source / "workflows" / workflow / "tests"
    run_id = new_run_id()
    # cases that advance the clock or crash a worker share it; the time-skipping server
    # starts only when the first such case runs, and a crash's worker process loads while
    # the suite starts and runs (one ahead of the crash that takes it)
    durable = DurableEnvironment(model=model)
    durable.prewarm(sum(_crash_steps(case, tests_dir) for case in cases))
    owned = False
    try:
        if isinstance(create_target, Agent):
            agent = create_target
        elif create_target is not None:
            agent = await create_target(workflow, root)
        else:
            if sandbox_runtime is not None:
                agent_kwargs = {**agent_kwargs, "sandbox_runtime": sandbox_runtime}
            agent = await create_agent(workflow, root=root, model=model, **agent_kwargs)
            owned = True
    except BaseException:
        await durable.close()
        raise
    judge_client: openai.AsyncOpenAI | None = None
    if grade is None and spec.tests.judge is not None:
        model_config = model or ModelConfig.from_env()
        judge_client = openai_client(model_config, max_retries=JUDGE_RETRIES)
        grade = judge_grader(spec.tests.judge, model_config, judge_client)
    if not isinstance(agent, Agent) or agent.loaded.slug != workflow:
        await durable.close()
        raise InvalidTargetError(
            f"create_target must return a governed agent of workflow {workflow!r}"
        )
    results: list[CaseResult] = []
    # the sessions of finished cases end in the background, while the next case runs
    disposals: list[asyncio.Task[None]] = []
    try:
        for case in cases:
            session_id = (
                session_id_for_case(case)
                if session_id_for_case
                else default_session_id(run_id, case)
            )
            results.append(
                await run_case(
                    case,
                    agent,
                    tests_dir=tests_dir,
                    session_id=session_id,
                    grade=grade,
                    case_timeout_ms=spec.tests.case_timeout_ms,
                    listener=listener,
                    durable=durable,
                    end_session=session_id_for_case is None,
                    disposals=disposals,
                )
            )
    finally:
        if disposals:
            await asyncio.gather(*disposals, return_exceptions=True)
        await durable.close()
        if judge_client is not None:
            await judge_client.close()
        if owned:
            await agent.close()
    return RunTestsResult(results=results, exit_code=exit_code_for(results), discovered=discovered)


__all__ = [
    "DEFAULT_CASE_TIMEOUT_MS",
    "AuthoringBackend",
    "CaseListener",
    "GradeFn",
    "InvalidTargetError",
    "UnsupportedConcurrencyError",
    "default_session_id",
    "discover_cases",
    "dispose_case_session",
    "judge_grader",
    "materialize_suite",
    "run_case",
    "run_tests",
]
