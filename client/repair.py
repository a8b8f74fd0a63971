"""``archmax repair``: rebuild a session's conversation log from its workflow history.

The store's log (segments under ``checkpoints/transcript/``,
:mod:`archmax_temporal.activities.transcript_log`) holds each message once, and so does the workflow
history: every message reaches the log as part of exactly one model call's input
(``ModelCallInput.messages``, after ``log.base`` messages ending in ``log.base_hash``);
continue-as-new carries only where the log stood (``SessionState.logged``, ``logged_hash``) and the
messages no call carried yet, which the next run's first call carries. A session that closed idle
and reopened from its checkpoint is a new workflow run of the same id, starting where the last one
stood.

So the log is rebuilt by reading every run of the session's id, oldest first, and applying
each model call's input with the rules the model activity applies (:func:`transcript_log.
advance`: a retry's lines kept, lines a reset rewound past cut off). A call that failed
because the log did not hold its base (``TranscriptLogDiverged``) wrote nothing and is
skipped. Before each call, and at each run's start, the rebuilt log must hold the base the
history recorded (its length and chained digest), and after each completed call the end the
activity reported: a history that cannot vouch for the log (runs gone past retention, a log
that another deployment wrote) is :class:`TranscriptLogUnrecoverableError`, and nothing is
written. The prompts and tool lists the calls sent in full are rebuilt beside it
(``checkpoints/prompts/<digest>``); one the history never carries in full and the store lacks
is left out: the session's next call that names it fails as ``PromptMissing`` and is sent
again with the text. A call that logs its answer (``log_answer``) wrote its
messages and the answer its result records, or nothing when it has no result. A call that
names tool results by digest
(``ModelCallInput.refs``) gets their text from the tool activities' results in the history
(each result is there once, as its activity's result), else from the store's
``checkpoints/results/``; the results the history holds are written back there too.

The rebuilt log is written as one segment from the start (which every later call's chain
walks back to) only when the store's log cannot give the chain the history ends with; a
healthy log is left as it is (``log="fine"``). The host refuses a repair while a turn is in flight
(:class:`SessionNotResumableError`): repair between turns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.store_errors import FileNotFoundInWorkspaceError
from archmax_temporal.activities.transcript_log import (
    LEGACY_LOG_FILE,
    PROMPTS_DIR,
    RESULTS_DIR,
    SEGMENTS_DIR,
    TranscriptLogs,
    advance,
    holds,
    result_paths,
    segment_bytes,
    segment_name,
)
from archmax_temporal.client.events import completed_local_activity, run_chain
from archmax_temporal.workflows.contracts.host_tools import HOST_TOOL_ACTIVITY, HostToolResult
from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
from archmax_temporal.workflows.contracts.workspace import TOOL_ACTIVITIES, WorkspaceToolResult
from archmax_temporal.workflows.errors import TranscriptLogUnrecoverableError
from archmax_temporal.workflows.models import (
    Message,
    ModelCallInput,
    ModelCallResult,
    SessionInput,
    TranscriptLog,
)
from archmax_temporal.workflows.transcript import (
    LOG_DIVERGED,
    SHORT_NAME,
    UNHELD_PROMPT,
    digest_of,
    names,
    schemas_text,
)

LogFound = Literal["fine", "damaged", "missing"]
"""How ``archmax repair`` found the store's log: the history's (left alone), another or an
unreadable one (rewritten), or none (written)."""


class RepairReport(BaseModel):
    """What ``agent.sessions.repair`` (``archmax repair``) found and did."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    log: LogFound
    """``fine``: the store's log is the one the history rebuilds (nothing written);
    ``damaged``: it differed (truncated, a corrupted line, another history's) and was
    replaced; ``missing``: there was none and it was written."""
    messages: int
    """How many messages the session's log holds (as rebuilt from the history)."""
    messages_rebuilt: int
    """How many of them were written back (0 when the log was fine)."""
    prompts: int
    """How many prompts and tool lists the history carries."""
    prompts_rebuilt: int
    """How many of them were missing or damaged in the store and written back."""
    runs: int
    """How many workflow runs of the session's id the history was read from."""
    model_calls: int
    """How many model calls were applied to rebuild the log."""


@dataclass(frozen=True)
class RunStarted:
    """A run of the session began, carrying where the log stood (None: a new session)."""

    run_id: str
    log: TranscriptLog | None


@dataclass(frozen=True)
class RecordedCall:
    """A model call as the history records it: its input and how it ended (if it did)."""

    run_id: str
    event_id: int
    call: ModelCallInput
    result: ModelCallResult | None = None
    failure: str | None = None
    """The failure's type when the call failed (``TranscriptLogDiverged``: the log did not
    hold its base, so it wrote nothing; ``prompt``, in histories of earlier versions, and
    ``PromptMissing``: its messages were written, then a prompt it names was missing)."""


@dataclass(frozen=True)
class KeptResult:
    """A tool result its activity kept in the store by digest (later calls may name it)."""

    digest: str
    text: str


Recorded = RunStarted | RecordedCall | KeptResult

_TOOL_RESULTS: dict[str, type[WorkspaceToolResult] | type[HostToolResult]] = {
    **dict.fromkeys(TOOL_ACTIVITIES.values(), WorkspaceToolResult),
    HOST_TOOL_ACTIVITY: HostToolResult,
}
"""The tool activities whose results a model call may name by digest, and their types."""


@dataclass
class Rebuilt:
    """The log and prompts the history rebuilds."""

    messages: list[Message] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    prompts: dict[str, str] = field(default_factory=dict)
    results: dict[str, str] = field(default_factory=dict)
    """The tool results the history holds that calls named by digest (digest → text)."""
    runs: int = 0
    calls: int = 0


def _where(item: RecordedCall) -> str:
    return f"the model call of event {item.event_id} in run {item.run_id}"


def rebuild(
    session_id: str,
    recorded: Sequence[Recorded],
    stored: Callable[[str], str | None] = lambda digest: None,
) -> Rebuilt:
    """Apply the recorded runs and calls in order (the module docstring has the rules);
    ``stored`` gives a named tool result the history does not hold (from the store)."""
    out = Rebuilt()
    kept: dict[str, str] = {}
    for item in recorded:
        if isinstance(item, KeptResult):  # named in full, or by 128 bits (the generation)
            kept[item.digest] = kept[item.digest[:SHORT_NAME]] = item.text
            continue
        if isinstance(item, RunStarted):
            out.runs += 1
            if item.log is not None and not holds(out.messages, out.digests, item.log):
                raise TranscriptLogUnrecoverableError(
                    f"session {session_id!r}: run {item.run_id} starts from a log of "
                    f"{item.log.base} messages that the history before it does not rebuild "
                    f"(it rebuilds {len(out.messages)}): earlier runs are gone from the "
                    "history (past the namespace's retention?); the log was left as it is"
                )
            continue
        call = item.call
        if call.log is None or item.failure == LOG_DIVERGED:
            continue  # a call carrying its whole conversation, or one that wrote nothing
        if not holds(out.messages, out.digests, call.log):
            raise TranscriptLogUnrecoverableError(
                f"session {session_id!r}: {_where(item)} extends a log of {call.log.base} "
                f"messages that the history before it does not rebuild (it rebuilds "
                f"{len(out.messages)}): part of the history is gone; the log was left as it is"
            )
        result = item.result
        new = _resolved(session_id, item, kept, stored, out)
        if call.log_answer and result is not None:  # written with the answer it recorded
            answer = Message(
                role="assistant",
                content=result.content,
                tool_calls=result.tool_calls,
                state=call.state,
            )
            new = [*new, answer]
        if not call.log_answer or result is not None:  # (else it wrote nothing)
            advance(out.messages, out.digests, call.log, new)
            out.calls += 1
        if result is not None and result.logged is not None:
            end = out.digests[-1] if out.digests else ""
            if result.logged != len(out.messages) or result.log_hash != end:
                raise TranscriptLogUnrecoverableError(
                    f"session {session_id!r}: {_where(item)} reported a log of {result.logged} "
                    f"messages that the history does not rebuild ({len(out.messages)}); "
                    "the log was left as it is"
                )
        if call.system_digest and call.system is not None:
            out.prompts[call.system_digest] = call.system
        if call.tools_digest and call.tools:
            out.prompts[call.tools_digest] = schemas_text(call.tools)
    return out


def _resolved(
    session_id: str,
    item: RecordedCall,
    kept: dict[str, str],
    stored: Callable[[str], str | None],
    out: Rebuilt,
) -> list[Message]:
    """The call's new messages with the tool results it names by digest filled in."""
    messages = list(item.call.messages)
    for index, digest in sorted(item.call.refs.items()):
        text = kept.get(digest)
        if text is None:
            text = stored(digest)
            if text is not None and not names(digest, text):
                text = None
        else:
            out.results[digest] = text
        if text is None or not 0 <= index < len(messages):
            raise TranscriptLogUnrecoverableError(
                f"session {session_id!r}: {_where(item)} names a tool result "
                f"({digest[:12]}…) that neither the history nor the store holds; the log "
                "was left as it is"
            )
        messages[index] = messages[index].model_copy(update={"content": text})
    return messages


def stored_result(store: SessionStore, session_id: str) -> Callable[[str], str | None]:
    """The tool results the store keeps for the session, by digest (None: not there)."""

    def read(digest: str) -> str | None:
        for path in result_paths(digest):
            try:
                return store.read_bytes(session_id, path).decode("utf-8", errors="replace")
            except FileNotFoundInWorkspaceError:
                continue
        return None

    return read


def write_rebuilt(store: SessionStore, session_id: str, rebuilt: Rebuilt) -> RepairReport:
    """Put the rebuilt log and prompts in the store where it lacks them, and say what was
    found. Synchronous store I/O: run it in a thread."""
    end = rebuilt.digests[-1] if rebuilt.digests else ""
    found: LogFound = "fine"
    if rebuilt.messages:
        where = TranscriptLog(base=len(rebuilt.messages), base_hash=end)
        try:
            held = TranscriptLogs(store).read(session_id, where)
        except ApplicationError:
            held = None
        if held is None or [m.model_dump_json() for m in held] != [
            m.model_dump_json() for m in rebuilt.messages
        ]:
            anything = bool(store.walk(session_id, SEGMENTS_DIR)) or store.exists(
                session_id, LEGACY_LOG_FILE
            )
            found = "damaged" if anything else "missing"
            lines = list(zip(rebuilt.messages, rebuilt.digests, strict=True))
            name = segment_name(0, "", len(lines), end)
            store.write_bytes(session_id, name, segment_bytes(0, "", lines))
    for digest, text in sorted(rebuilt.results.items()):  # a call not yet logged may name it
        if not store.exists(session_id, f"{RESULTS_DIR}/{digest}"):
            store.write_bytes(session_id, f"{RESULTS_DIR}/{digest}", text.encode("utf-8"))
    rebuilt_prompts = 0
    for digest, text in sorted(rebuilt.prompts.items()):
        path = f"{PROMPTS_DIR}/{digest}"
        encoded = text.encode("utf-8")
        try:
            if store.read_bytes(session_id, path) == encoded:
                continue
        except FileNotFoundInWorkspaceError:
            pass
        store.write_bytes(session_id, path, encoded)
        rebuilt_prompts += 1
    return RepairReport(
        session_id=session_id,
        log=found,
        messages=len(rebuilt.messages),
        messages_rebuilt=0 if found == "fine" else len(rebuilt.messages),
        prompts=len(rebuilt.prompts),
        prompts_rebuilt=rebuilt_prompts,
        runs=rebuilt.runs,
        model_calls=rebuilt.calls,
    )


# --- reading the history ----------------------------------------------------------------

_T = TypeVar("_T")

_LATEST = datetime.max.replace(tzinfo=UTC)


def runs_query(session_id: str) -> str | None:
    """The visibility query of the runs of ``session_id`` (a superset, filtered after):
    ``WorkflowId = '…'``, or, for an id holding ``"`` or a backslash (which no escaping
    matches on every visibility store), ``STARTS_WITH`` the part before them; None when that
    part is empty."""
    head = re.split(r'["\\]', session_id, maxsplit=1)[0]
    literal = "'" + head.replace("'", "\\'") + "'"
    if head == session_id:
        return f"WorkflowId = {literal}"
    return f"WorkflowId STARTS_WITH {literal}" if head else None


async def session_runs(client: Client, session_id: str) -> list[str]:
    """Every run of the session's workflow id, oldest first: each continue-as-new chain, the
    runs a session that closed idle reopened with, a reset's base run and new run (visibility
    lists them all; the latest chain is read from the runs themselves too, so a run
    visibility has not caught up with is not missed)."""
    described = await client.get_workflow_handle(session_id).describe()
    chain = await run_chain(client, session_id)
    started: dict[str, tuple[datetime, datetime]] = {}
    query = runs_query(session_id)
    if query is not None:
        try:
            async for execution in client.list_workflows(query):
                if execution.id == session_id:
                    started[execution.run_id] = (
                        execution.start_time,
                        execution.close_time or _LATEST,
                    )
        except RPCError:  # a visibility store that cannot answer it: the latest chain only
            started.clear()
    ordered = sorted(started, key=lambda run: started[run])
    for run in [*chain, described.run_id or ""]:
        if run and run not in ordered:
            ordered.append(run)
    return ordered


async def _decoded(converter: DataConverter, payloads: Any, kind: type[_T]) -> _T:
    items = list(payloads)
    if converter.payload_codec is not None:
        items = await converter.payload_codec.decode(items)
    (value,) = converter.payload_converter.from_payloads(items, [kind])
    return value  # type: ignore[no-any-return]


@dataclass
class _Run:
    """What one run's history holds of the log: its start and its model calls, in order; for
    a run a reset made, the run it was reset from and how many of ``records`` are copies of
    that run's history (recorded once, where that run happened)."""

    records: list[Recorded] = field(default_factory=list)
    reset_from: str | None = None
    copied: int = 0


async def _run_records(client: Client, session_id: str, run_id: str) -> _Run:
    """The records of one run (:class:`_Run`)."""
    converter = client.data_converter
    run = _Run()
    records = run.records
    calls: dict[int, int] = {}  # scheduled event id → index in records
    tools: dict[int, type[WorkspaceToolResult] | type[HostToolResult]] = {}  # a tool's result type
    handle = client.get_workflow_handle(session_id, run_id=run_id)
    event: HistoryEvent
    async for event in handle.fetch_history_events():
        kind = event.event_type
        try:
            if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                attributes = event.workflow_execution_started_event_attributes
                start = await _decoded(converter, attributes.input.payloads, SessionInput)
                carried = start.carried
                log = (
                    TranscriptLog(base=carried.logged, base_hash=carried.logged_hash)
                    if carried is not None
                    else None
                )
                records.append(RunStarted(run_id, log))
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                scheduled = event.activity_task_scheduled_event_attributes
                name = scheduled.activity_type.name
                if name in _TOOL_RESULTS:
                    tools[event.event_id] = _TOOL_RESULTS[name]
                if name != MODEL_ACTIVITY:
                    continue
                call = await _decoded(converter, scheduled.input.payloads, ModelCallInput)
                calls[event.event_id] = len(records)
                records.append(RecordedCall(run_id, event.event_id, call))
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                completed = event.activity_task_completed_event_attributes
                kind_of = tools.get(completed.scheduled_event_id)
                if kind_of is not None:
                    answer = await _decoded(converter, completed.result.payloads, kind_of)
                    if answer.kept:
                        records.append(KeptResult(digest_of(answer.content), answer.content))
                    continue
                index = calls.get(completed.scheduled_event_id)
                if index is not None:
                    result = await _decoded(converter, completed.result.payloads, ModelCallResult)
                    held = records[index]
                    assert isinstance(held, RecordedCall)
                    records[index] = RecordedCall(run_id, held.event_id, held.call, result=result)
            elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:  # a local activity's answer
                marker = completed_local_activity(event)
                if marker is None:
                    continue
                data = await _decoded(converter, marker.details["data"].payloads, dict)
                local_kind = _TOOL_RESULTS.get(str(data.get("activity_type")))
                if local_kind is not None:
                    answer = await _decoded(
                        converter, marker.details["result"].payloads, local_kind
                    )
                    if answer.kept:
                        records.append(KeptResult(digest_of(answer.content), answer.content))
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                task = event.workflow_task_failed_event_attributes
                reset = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
                if task.cause == reset and task.base_run_id and run.reset_from is None:
                    run.reset_from, run.copied = task.base_run_id, len(records)
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
                failed = event.activity_task_failed_event_attributes
                index = calls.get(failed.scheduled_event_id)
                if index is not None:
                    held = records[index]
                    assert isinstance(held, RecordedCall)
                    info = failed.failure.application_failure_info
                    failure = info.type or "failed"
                    if failure == LOG_DIVERGED and info.details.payloads:
                        detail = await _decoded(converter, info.details.payloads[:1], str)
                        if detail == UNHELD_PROMPT:  # the call's messages were written
                            failure = UNHELD_PROMPT
                    records[index] = RecordedCall(run_id, held.event_id, held.call, failure=failure)
        except Exception as exc:  # a payload this version cannot read
            raise TranscriptLogUnrecoverableError(
                f"session {session_id!r}: event {event.event_id} of run {run_id} does not "
                f"decode ({type(exc).__name__}); nothing was written"
            ) from None
    return run


async def recorded_history(client: Client, session_id: str) -> list[Recorded]:
    """Every run's start and model calls, in the order they happened: a reset run's copy of
    the history before its reset point is taken from the run it was reset from when that
    run was read (its calls ran once, there), else from the copy."""
    recorded: list[Recorded] = []
    read: set[str] = set()
    for run_id in await session_runs(client, session_id):
        run = await _run_records(client, session_id, run_id)
        skip = run.copied if run.reset_from in read else 0
        recorded += [run.records[0], *run.records[max(skip, 1) :]] if run.records else []
        read.add(run_id)
    return recorded
