"""A session's events in archmax's vocabulary, read from its Temporal history.

archmax hosts take an ``onEvent`` stream (``tool-called``, ``hook-verdict``,
``sub-workflow-start``, ``parked``, …). Here every fact is already in the session workflow's
history: the model calls, tool calls, hooks and scripts are activities with typed inputs and
results, sub-workflows are child workflows, turns are updates. So the stream is a reader of
that history, not a second record kept by the workflow: it costs the session nothing (no
memory while parked, no extra history), it is complete after the fact, and it follows a live
session by long-polling the history (``follow=True``).

Events come in history order; ``seq`` is the Temporal event id they were read from, so a host
can resume a stream after the last one it saw (``after=seq``).

One kind of event is not in the history, and never will be: the text a model writes while its
call runs (``agent-text-delta``, ``agent-text-reset``: :mod:`archmax_temporal.live`). A stream
that follows a session (``follow=True``) with a live channel merges them in as they arrive,
each with the ``seq`` of the last history event before it (they are advisory: a resumed stream
does not replay them); the durable ``agent-text`` with the same ``messageId`` follows, and a
delta that arrives after it is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent, MarkerRecordedEventAttributes
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.converter import DataConverter
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.live import LIVE_TYPES, LiveChannel, LiveEvent, message_id
from archmax_temporal.workflows import contracts, hooks
from archmax_temporal.workflows.contracts.notify import NOTIFY_ACTIVITY
from archmax_temporal.workflows.contracts.sandbox import MAX_OUTPUT_LINES
from archmax_temporal.workflows.deadlines import DEADLINE, EXPIRED
from archmax_temporal.workflows.host_tools import HOST_TOOL_ACTIVITY, HostToolResult
from archmax_temporal.workflows.models import (
    DecideInput,
    DeliverInput,
    Message,
    ModelCallInput,
    ModelCallResult,
    NotifyInput,
    Outcome,
    PersistTurnInput,
    ReplyInput,
    SendInput,
    SessionInput,
)
from archmax_temporal.workflows.runtime_tools import SET_VARIABLES, WAIT
from archmax_temporal.workflows.sandbox import (
    CUSTOM_HOOK_ACTIVITY,
    SANDBOX_ACTIVITY,
    CustomHookResult,
    SandboxRunInput,
    SandboxRunResult,
)
from archmax_temporal.workflows.spec import TIMER_TRIGGER
from archmax_temporal.workflows.workspace_tools import (
    TOOL_ACTIVITIES,
    WorkspaceToolInput,
    WorkspaceToolResult,
)

PREVIEW_CHARS = 4096
"""How much of a tool result an event carries (``truncated`` says when it was cut)."""

WAKE_TIMER_PREFIX = "archmax_wait until "
"""The summary of the durable timer a timed park waits on (``workflows/session.py``)."""

_WAKES_AT = re.compile(r"It wakes itself at (\S+?)\.?$")
"""The resume time in ``archmax_wait``'s answer to a timed park."""

_COMMANDS = frozenset(
    {
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    }
)
"""History events only a running turn writes: the first one after a ``deliver`` signal shows
the signal started the turn (a refused signal starts none: the session records its refusal,
read as a ``refused`` event)."""

EVENT_TYPES: Final = (
    "turn-start", "delivered", "decided", "refused", "park-message", "state-enter",
    "model-usage", "agent-text", "tool-called", "tool-result", "tool-blocked",
    "variables-set", "title-set", "hook-start", "hook-output", "hook-verdict",
    "hook-rejected", "rubric-start", "rubric-result", "script-result", "sub-workflow-start",
    "sub-workflow-result", "parked", "raised", "turn-end", "warning",
)  # fmt: skip
"""Every event ``type`` the history reader emits: it emits no other and the docs' Events
section names each (``tests/test_registries.py``)."""

LIVE_EVENT_TYPES: Final = LIVE_TYPES
"""The advisory events a followed stream merges in from the live channel, never from the
history (``agent-text-delta``, ``agent-text-reset``); the docs' Events page names each too."""

_WORKSPACE = {activity: tool for tool, activity in TOOL_ACTIVITIES.items()}
LOCAL_ACTIVITY_MARKER: Final = "core_local_activity"
"""The marker a local activity's outcome is recorded as (a short workspace tool, the turn's
save: ``archmax_temporal.workflows.contracts.base.local_first``): its result, not its input."""
_TURN_EVENTS = {"send": "turn-start", "deliver": "delivered", "decide": "decided"}


def completed_local_activity(event: HistoryEvent) -> MarkerRecordedEventAttributes | None:
    """The marker of a local activity that completed (its ``data`` and ``result`` details
    present), or None for any other event or a local attempt that failed."""
    if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
        return None
    marker = event.marker_recorded_event_attributes
    if (
        marker.marker_name != LOCAL_ACTIVITY_MARKER
        or marker.HasField("failure")
        or "data" not in marker.details
        or "result" not in marker.details
    ):
        return None
    return marker


Level = Literal["info", "warn", "error"]


class SessionEvent(BaseModel):
    """One event: archmax's envelope (``type``, ``level``, ``ts``, ``seq``, ``sessionId``) and
    the fields of its type in ``data``."""

    model_config = ConfigDict(extra="forbid")

    type: str
    level: Level = "info"
    ts: datetime
    seq: int
    session_id: str
    data: dict[str, Any]


class _Scheduled(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    activity: str
    activity_id: str = ""
    summary: str
    input: Any = None


class _Reader:
    """Turns history events into session events, remembering what each activity was."""

    def __init__(self, session_id: str, converter: DataConverter) -> None:
        self._session = session_id
        self._convert = converter.payload_converter
        self.offset = 0
        self.run_id: str | None = None
        """The run being read (its model calls' ``messageId`` starts with it): set by the
        caller that knows it, else read off the run's start."""
        self._run_known = False
        self._following: str | None = None
        """The key of the turn this run took over mid-way (continue-as-new): its caller's
        update arrives again, and is no new turn."""
        """Added to each history event id: the run's place in the chain (:data:`RUN_STRIDE`)."""
        self._scheduled: dict[int, _Scheduled] = {}
        self._state: str | None = None
        self._open: dict[str, tuple[str, Any]] = {}
        self._answers_seen: list[Message] = []
        """The model's last answers with tool calls (a turn's save no longer carries the ones
        the model call logged itself: an ``archmax_wait``'s reason is read off these)."""
        """``callId → (tool, args)`` of the calls not yet seen answered. The session runs a
        message's calls in order, so an activity's result joins the first open call of its
        tool; the rest (refused, mocked, runtime tools) are read off the next model call's
        input, which holds their answers."""
        self._updates: dict[str, str] = {}
        """Accepted updates not yet completed (update id → name): their turns end with the
        update's completion, which carries the Outcome."""
        self._replies: dict[str, tuple[str, str | None]] = {}
        """Of those, the messages to a session parked at a human state (update id → the
        agent's answer so far and its ``messageId``): park-message events in both directions,
        no re-park."""
        self._parked: str | None = None
        """The channel the session is parked in, as the stream last said (None: not parked)."""
        self._signals: list[tuple[HistoryEvent, dict[str, Any] | None]] = []
        """Deliveries to a session parked for input not yet seen to start a turn: ``deliver``
        signals (None: one that names no trigger, refused) and timed parks' fired timers, each
        with the ``delivered`` event's data."""
        self._wakes: dict[int, str] = {}
        """The timers a timed park waits on (started event id → its resume time)."""
        self._deliver_signals: dict[int, tuple[HistoryEvent, str | None]] = {}
        """This run's ``deliver`` signals by number (from 1, as the session counts them): the
        event and the trigger it named, for the refusal the session may record."""

    def _decode(self, payloads: Any, kind: type) -> Any:
        """The payload as ``kind``, or None when it does not decode (a history written by
        another version of the runtime): the stream goes on without that event's fields."""
        try:
            values = self._convert.from_payloads(list(payloads), [kind])
        except Exception:
            return None
        return values[0] if values else None

    def _event(
        self, source: HistoryEvent, kind: str, data: dict[str, Any], level: Level = "info"
    ) -> SessionEvent:
        return SessionEvent(
            type=kind,
            level=level,
            ts=source.event_time.ToDatetime(),
            seq=self.offset + source.event_id,
            session_id=self._session,
            data=data,
        )

    def read(self, event: HistoryEvent) -> list[SessionEvent]:
        found = self._delivered_by_signal(event) if event.event_type in _COMMANDS else []
        return found + self._read(event)

    def _read(self, event: HistoryEvent) -> list[SessionEvent]:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            return self._scheduled_activity(event)
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            return self._completed_activity(event)
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            return self._failed_activity(event)
        if kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            return self._local_activity(event)
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            # A run continued as new starts where the last one stood (parked, say).
            opened = event.workflow_execution_started_event_attributes
            if not self._run_known:
                self.run_id = opened.original_execution_run_id or self.run_id
            inputs = opened.input.payloads
            self._deliver_signals.clear()  # the session counts a run's signals from one
            self._scheduled.clear()  # event ids start again; no activity crosses runs
            self._wakes.clear()
            carried = getattr(self._decode(inputs, SessionInput), "carried", None)
            self._following = getattr(getattr(carried, "inflight", None), "key", None)
            status = getattr(carried, "status", None)
            channels = {"awaiting_input": "input", "awaiting_decision": "decision"}
            self._parked = channels.get(str(status))
            return []
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            return self._update_accepted(event)
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            return self._turn_end(event)
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            attributes = event.workflow_execution_signaled_event_attributes
            if attributes.signal_name != "deliver":
                return []
            delivery = self._decode(attributes.input.payloads, DeliverInput)
            trigger = getattr(delivery, "trigger", None)
            self._deliver_signals[len(self._deliver_signals) + 1] = (event, trigger)
            if self._parked == "input":
                data = {"trigger": trigger, "signal": True} if trigger else None
                self._signals.append((event, data))
            return []  # delivered once its turn shows; refused once the session says so
        if kind == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            return self._refused_signal(event)
        if kind == EventType.EVENT_TYPE_TIMER_STARTED:
            if event.user_metadata.HasField("summary"):
                summary = str(self._decode([event.user_metadata.summary], str) or "")
                if summary.startswith(WAKE_TIMER_PREFIX):
                    self._wakes[event.event_id] = summary.removeprefix(WAKE_TIMER_PREFIX)
            return []
        if kind == EventType.EVENT_TYPE_TIMER_FIRED:
            timer = event.timer_fired_event_attributes.started_event_id
            if timer in self._wakes:  # delivered once the woken turn shows, like a signal
                data = {"trigger": TIMER_TRIGGER, "resumeAt": self._wakes.pop(timer), "timer": True}
                self._signals.append((event, data))
            return []
        if kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            started = event.start_child_workflow_execution_initiated_event_attributes.workflow_id
            return [self._event(event, "sub-workflow-start", {"childSessionId": started})]
        if kind == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
            done = event.child_workflow_execution_completed_event_attributes.workflow_execution
            data = {"childSessionId": done.workflow_id, "status": "ok"}
            return [self._event(event, "sub-workflow-result", data)]
        if kind == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
            failed = event.child_workflow_execution_failed_event_attributes.workflow_execution
            data = {"childSessionId": failed.workflow_id, "status": "error"}
            return [self._event(event, "sub-workflow-result", data, "error")]
        return []

    # --- activities ------------------------------------------------------------------------

    def _scheduled_activity(self, event: HistoryEvent) -> list[SessionEvent]:
        attributes = event.activity_task_scheduled_event_attributes
        activity = attributes.activity_type.name
        summary = ""
        if event.user_metadata.HasField("summary"):
            summary = str(self._decode([event.user_metadata.summary], str) or "")
        decoded: Any = None
        if activity == contracts.MODEL_ACTIVITY:
            decoded = self._decode(attributes.input.payloads, ModelCallInput)
        elif activity in _WORKSPACE:
            decoded = self._decode(attributes.input.payloads, WorkspaceToolInput)
        elif activity == SANDBOX_ACTIVITY:
            decoded = self._decode(attributes.input.payloads, SandboxRunInput)
        elif activity == NOTIFY_ACTIVITY:
            decoded = self._decode(attributes.input.payloads, NotifyInput)
        self._scheduled[event.event_id] = _Scheduled(
            activity=activity,
            activity_id=attributes.activity_id,
            summary=summary,
            input=decoded,
        )
        found: list[SessionEvent] = []
        if isinstance(decoded, NotifyInput):
            found.extend(self._deadline_taken(event, decoded))
        if isinstance(decoded, ModelCallInput):
            found.extend(self._answered(event, decoded.messages))
        if activity == contracts.PERSIST_ACTIVITY and not self._updates:
            persisted = self._decode(attributes.input.payloads, PersistTurnInput)
            if isinstance(persisted, PersistTurnInput):
                found.extend(self._settled_without_update(event, persisted))
        if isinstance(decoded, ModelCallInput) and decoded.state != self._state:
            self._state = decoded.state
            found.append(self._event(event, "state-enter", {"state": decoded.state}))
        hook = _hook_of(summary)
        if hook is not None:
            rubric = activity == contracts.MODEL_ACTIVITY
            found.append(self._event(event, "rubric-start" if rubric else "hook-start", hook))
        return found

    def _completed_activity(self, event: HistoryEvent) -> list[SessionEvent]:
        attributes = event.activity_task_completed_event_attributes
        scheduled = self._scheduled.get(attributes.scheduled_event_id)
        if scheduled is None:
            return []
        result = attributes.result.payloads
        hook = _hook_of(scheduled.summary)
        activity = scheduled.activity
        if activity == contracts.MODEL_ACTIVITY:
            answer: ModelCallResult | None = self._decode(result, ModelCallResult)
            if answer is None:
                return []
            if hook is not None:
                verdict = _verdict_of(answer)
                level: Level = "warn" if "failure" in verdict else "info"
                return [self._event(event, "rubric-result", {**hook, **verdict}, level)]
            return self._model_answer(event, answer, message_id(self.run_id, scheduled.activity_id))
        if activity == SANDBOX_ACTIVITY:
            run: SandboxRunResult | None = self._decode(result, SandboxRunResult)
            if run is None:
                return []
            output = self._output(event, scheduled, hook, run.logs, run.output_dropped)
            if hook is not None:
                value = run.value if isinstance(run.value, dict) else {}
                data = {**hook, "verdict": value.get("verdict"), "reason": value.get("reason")}
                return [*output, self._event(event, "hook-verdict", data)]
            label = scheduled.input.label if isinstance(scheduled.input, SandboxRunInput) else ""
            data = {"script": label, "dispatch": run.dispatch.tool if run.dispatch else None}
            return [*output, self._event(event, "script-result", data)]
        if activity == CUSTOM_HOOK_ACTIVITY and hook is not None:
            custom: CustomHookResult | None = self._decode(result, CustomHookResult)
            if custom is None:
                return []
            value = custom.value if isinstance(custom.value, dict) else {}
            data = {**hook, "verdict": value.get("verdict"), "error": custom.error}
            return [self._event(event, "hook-verdict", data)]
        if activity in _WORKSPACE:
            tool_result: WorkspaceToolResult = self._decode(result, WorkspaceToolResult)
            return [
                self._tool_result(
                    event, _WORKSPACE[activity], tool_result.status, tool_result.content
                )
            ]
        if activity == HOST_TOOL_ACTIVITY:
            host: HostToolResult = self._decode(result, HostToolResult)
            return [
                self._tool_result(
                    event, scheduled.summary.removeprefix("host tool · "), host.status, host.content
                )
            ]
        return []

    def _local_activity(self, event: HistoryEvent) -> list[SessionEvent]:
        """A workspace tool's answer as a local activity recorded it (``tool-result``, as
        from a regular activity's completion). A local activity that failed went on as the
        regular activity, which reports; the turn's save is local only when an update drove
        the turn, whose completion says how it ended."""
        marker = completed_local_activity(event)
        if marker is None:
            return []
        data = self._decode(marker.details["data"].payloads, dict)
        activity = data.get("activity_type") if isinstance(data, dict) else None
        if activity not in _WORKSPACE:
            return []
        result = self._decode(marker.details["result"].payloads, WorkspaceToolResult)
        if not isinstance(result, WorkspaceToolResult):
            return []
        return [self._tool_result(event, _WORKSPACE[activity], result.status, result.content)]

    def _failed_activity(self, event: HistoryEvent) -> list[SessionEvent]:
        attributes = event.activity_task_failed_event_attributes
        scheduled = self._scheduled.get(attributes.scheduled_event_id)
        if scheduled is None:
            return []
        failure = attributes.failure
        reason = failure.cause.message if failure.HasField("cause") else failure.message
        hook = _hook_of(scheduled.summary)
        output: list[SessionEvent] = []
        if scheduled.activity == SANDBOX_ACTIVITY:  # a failed run carries what it wrote
            application = failure.cause if failure.HasField("cause") else failure
            details = application.application_failure_info.details.payloads
            written = self._decode(details, dict) if details else None
            logs = written.get("logs") if isinstance(written, dict) else None
            if isinstance(logs, list):
                output = self._output(event, scheduled, hook, [str(line) for line in logs], 0)
        if hook is not None:
            rejected = self._event(event, "hook-rejected", {**hook, "error": reason}, "error")
            return [*output, rejected]
        data = {"activity": scheduled.activity, "summary": scheduled.summary, "error": reason}
        return [*output, self._event(event, "warning", data, "warn")]

    def _output(
        self,
        event: HistoryEvent,
        scheduled: _Scheduled,
        hook: dict[str, Any] | None,
        lines: list[str],
        dropped: int,
    ) -> list[SessionEvent]:
        """A sandbox run's console lines, one ``hook-output`` event each (``method``: log,
        info, warn, error or debug; ``text``), naming the hook or the script that wrote
        them; then, when the run wrote more than it may keep, one that says how many
        lines were dropped."""
        if hook is not None:
            source: dict[str, Any] = dict(hook)
        else:
            label = scheduled.input.label if isinstance(scheduled.input, SandboxRunInput) else ""
            source = {"script": label}
        found = []
        for line in lines:
            method, _, text = line.partition(" ")
            level: Level = "warn" if method == "warn" else "error" if method == "error" else "info"
            data = {**source, "method": method, "text": text}
            found.append(self._event(event, "hook-output", data, level))
        if dropped:
            data = {
                **source,
                "method": "warn",
                "text": f"… {dropped} more console line(s) not kept (a run keeps "
                f"{MAX_OUTPUT_LINES})",
                "dropped": dropped,
            }
            found.append(self._event(event, "hook-output", data, "warn"))
        return found

    def _answered(self, event: HistoryEvent, messages: list[Message]) -> list[SessionEvent]:
        """The answers of open calls that ran no activity, as the model is about to read
        them: ``tool-blocked`` for a refusal, ``variables-set`` for a recorded variable, and
        ``tool-result`` for the rest (runtime tools, mocks, scripts)."""
        found: list[SessionEvent] = []
        for message in messages:
            if message.role != "tool" or message.tool_call_id not in self._open:
                continue
            tool, arguments = self._open.pop(message.tool_call_id)
            content = message.content or ""
            if message.status == "blocked":
                data = {
                    "callId": message.tool_call_id,
                    "tool": tool,
                    "rule": message.rule,
                    "reason": content[:PREVIEW_CHARS],
                }
                found.append(self._event(event, "tool-blocked", data, "warn"))
                continue
            if tool == SET_VARIABLES and message.status == "ok" and isinstance(arguments, dict):
                written = arguments.get("variables") or {}
                found.append(self._event(event, "variables-set", {"names": sorted(written)}))
                if isinstance(written.get("title"), str):
                    found.append(self._event(event, "title-set", {"title": written["title"]}))
            found.append(
                self._tool_result(
                    event, tool, message.status or "ok", content, message.tool_call_id
                )
            )
        return found

    def know_run(self, run_id: str) -> None:
        """The next run read is ``run_id`` (its start event may name it otherwise: a reset)."""
        self.run_id, self._run_known = run_id, True

    def _model_answer(
        self, event: HistoryEvent, answer: ModelCallResult, message: str
    ) -> list[SessionEvent]:
        usage = answer.usage
        found = [
            self._event(
                event,
                "model-usage",
                {
                    "model": answer.model,
                    "inputTokens": usage.prompt_tokens,
                    "outputTokens": usage.completion_tokens,
                    "cacheReadTokens": usage.cache_read_tokens,
                },
            )
        ]
        replying = next(iter(self._replies), None)
        if replying is not None and not answer.tool_calls:
            # outbound, at the update's end
            self._replies[replying] = (answer.content or "", message)
        elif answer.content:
            data = {"text": answer.content, "messageId": message}
            found.append(self._event(event, "agent-text", data))
        if answer.tool_calls:
            assistant = Message(
                role="assistant", content=answer.content, tool_calls=answer.tool_calls
            )
            self._answers_seen = [*self._answers_seen[-(ANSWERS_KEPT - 1) :], assistant]
        for call in answer.tool_calls:
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = call.arguments
            data = {"callId": call.id, "tool": call.name, "args": arguments}
            found.append(self._event(event, "tool-called", data))
            self._open[call.id] = (call.name, arguments)
        return found

    def _tool_result(
        self,
        event: HistoryEvent,
        tool: str,
        status: str,
        content: str,
        call_id: str | None = None,
    ) -> SessionEvent:
        if call_id is None:
            call_id = next((cid for cid, (name, _) in self._open.items() if name == tool), None)
            if call_id is not None:
                del self._open[call_id]
        data = {
            "callId": call_id,
            "tool": tool,
            "status": status,
            "preview": content[:PREVIEW_CHARS],
            "truncated": len(content) > PREVIEW_CHARS,
        }
        return self._event(event, "tool-result", data, "info" if status == "ok" else "warn")

    def _update_accepted(self, event: HistoryEvent) -> list[SessionEvent]:
        """An update the session accepted: a turn starts (``turn-start``; ``delivered`` for
        a ``deliver`` or a ``send`` to a session parked for input; ``decided``), or a person's
        message to a session parked at a human state (``park-message`` inbound, carrying the
        text)."""
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        update, update_id = request.input.name, request.meta.update_id
        self._updates[update_id] = update
        self._signals.clear()  # an update is accepted only by a session no signal resumed
        if update_id == self._following:  # the caller of a turn handed on: no new start
            return []
        if update == "reply" or (update == "send" and self._parked == "decision"):
            kind = ReplyInput if update == "reply" else SendInput
            body = self._decode(request.input.args.payloads, kind)
            text = getattr(body, "message", None) or ""
            self._replies[update_id] = ("", None)
            return [self._event(event, "park-message", {"direction": "inbound", "text": text})]
        parked, self._parked = self._parked, None
        data: dict[str, Any] = {}
        started = _TURN_EVENTS.get(update, "turn-start")
        if update == "deliver":
            delivery = self._decode(request.input.args.payloads, DeliverInput)
            data = {"trigger": getattr(delivery, "trigger", None)}
        elif update == "decide":
            decision = self._decode(request.input.args.payloads, DecideInput)
            data = {"to": getattr(decision, "to", None)}
        elif update == "send" and parked == "input":
            # the send rule: a send to a session parked for input delivers its trigger
            sent = self._decode(request.input.args.payloads, SendInput)
            started, data = "delivered", {"trigger": getattr(sent, "trigger", None)}
        return [self._event(event, started, data)]

    def _deadline_taken(self, event: HistoryEvent, sent: NotifyInput) -> list[SessionEvent]:
        """A notification the session scheduled: its ``approval.expired`` (never one a later
        run sent again) is the first command of the turn a passed deadline takes: ``decided``
        by ``deadline``, along the state's ``onTimeout`` edge."""
        if sent.resent or sent.notice.event != EXPIRED:
            return []
        self._parked = None
        self._signals.clear()
        notice = sent.notice
        data = {"to": notice.on_timeout, "by": DEADLINE, "state": notice.state}
        return [self._event(event, "decided", data)]

    def _refused_signal(self, event: HistoryEvent) -> list[SessionEvent]:
        """A ``deliver`` signal the session refused (it records the signal's number, the
        error type and the reason in its memo): a ``refused`` event, and never ``delivered``."""
        fields = event.workflow_properties_modified_event_attributes.upserted_memo.fields
        if contracts.REFUSED_SIGNAL_MEMO not in fields:
            return []
        record = self._decode([fields[contracts.REFUSED_SIGNAL_MEMO]], dict)
        if not isinstance(record, dict):
            return []
        number = record.get("signal")
        source, trigger = self._deliver_signals.get(
            number if isinstance(number, int) else 0, (event, None)
        )
        self._signals = [(s, d) for s, d in self._signals if s is not source]
        data = {
            "trigger": trigger,
            "signal": True,
            "type": record.get("type"),
            "reason": record.get("reason"),
        }
        found = self._event(event, "refused", data, "warn")
        return [found.model_copy(update={"ts": source.event_time.ToDatetime()})]

    def _delivered_by_signal(self, event: HistoryEvent) -> list[SessionEvent]:
        """A ``deliver`` signal, or a timed park's fired timer, is reported once the turn it
        starts shows: the first command after it. A refused signal (it names no trigger, or
        its variables) starts nothing and is never reported delivered; a timer that fired
        while no worker serves the session is reported when a worker runs the wake."""
        if not self._signals or self._parked != "input" or self._updates:
            return []
        accepted = next(
            ((source, data) for source, data in self._signals if data is not None), None
        )
        self._signals.clear()
        if accepted is None:
            return []
        self._parked = None
        source, data = accepted
        found = self._event(event, "delivered", data)
        return [found.model_copy(update={"ts": source.event_time.ToDatetime()})]

    def _settled_without_update(
        self, event: HistoryEvent, persisted: PersistTurnInput
    ) -> list[SessionEvent]:
        """The end of a turn no update drove (a ``deliver`` signal, a timer's wake, a child's
        report), read off the artifacts the session writes at every turn's end: ``parked``
        (with the reason and the resume time of the agent's ``archmax_wait``), ``raised`` or
        ``turn-end``."""
        status, state = persisted.status, persisted.state
        transcript = [*self._answers_seen, *persisted.transcript]
        if status in ("awaiting_input", "awaiting_decision"):
            channel = "input" if status == "awaiting_input" else "decision"
            self._parked = channel
            reason, resume_at = (
                _last_wait(transcript)
                if channel == "input"
                else (
                    None,
                    None,
                )
            )
            data = {"state": state, "channel": channel, "reason": reason, "resumeAt": resume_at}
            return [self._event(event, "parked", data)]
        self._parked = None
        if status == "failed":
            code, reason = _last_raise(transcript)
            return [
                self._event(
                    event, "raised", {"state": state, "code": code, "reason": reason}, "error"
                )
            ]
        level: Level = "error" if status == "rejected" else "info"
        data = {"kind": status, "state": state, "rejected": None}
        return [self._event(event, "turn-end", data, level)]

    def _turn_end(self, event: HistoryEvent) -> list[SessionEvent]:
        attributes = event.workflow_execution_update_completed_event_attributes
        update_id = attributes.meta.update_id
        self._updates.pop(update_id, None)
        answer = self._replies.pop(update_id, None)
        outcome_payloads = attributes.outcome
        if not outcome_payloads.HasField("success"):
            return []
        outcome: Outcome | None = self._decode(outcome_payloads.success.payloads, Outcome)
        if answer is not None and (outcome is None or outcome.kind == "parked"):
            # A reply moves the session nowhere: its answer, and the park as it was.
            self._parked = "decision"
            text, message = answer
            data: dict[str, Any] = {"direction": "outbound", "text": text}
            if message is not None:
                data["messageId"] = message
            return [self._event(event, "park-message", data)]
        if outcome is None:
            return [self._event(event, "turn-end", {})]
        if outcome.kind == "parked":
            self._parked = outcome.parked_channel
            pending = outcome.pending
            data = {
                "state": outcome.state,
                "channel": outcome.parked_channel,
                "reason": getattr(pending, "reason", None),
                "resumeAt": getattr(pending, "resume_at", None),
            }
            return [self._event(event, "parked", data)]
        self._parked = None
        if outcome.kind == "failed" and outcome.exit is not None:
            data = {
                "state": outcome.state,
                "code": outcome.exit.code,
                "reason": outcome.exit.reason,
            }
            return [self._event(event, "raised", data, "error")]
        level: Level = "error" if outcome.kind == "rejected" else "info"
        data = {"kind": outcome.kind, "state": outcome.state, "rejected": outcome.rejected}
        return [self._event(event, "turn-end", data, level)]


def _answers(transcript: list[Message]) -> dict[str, Message]:
    return {m.tool_call_id: m for m in transcript if m.role == "tool" and m.tool_call_id}


ANSWERS_KEPT: Final = 8
"""How many of the model's last answers with tool calls a reader keeps for a turn's end."""


def _last_wait(transcript: list[Message]) -> tuple[str | None, str | None]:
    """The reason and resume time of the last ``archmax_wait`` the session accepted."""
    answers = _answers(transcript)
    for message in reversed(transcript):
        for call in reversed(message.tool_calls if message.role == "assistant" else []):
            answer = answers.get(call.id)
            if call.name != WAIT or answer is None or answer.status != "ok":
                continue
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = {}
            reason = arguments.get("reason") if isinstance(arguments, dict) else None
            wakes = _WAKES_AT.search(answer.content or "")
            return (reason.strip() if isinstance(reason, str) else None), (
                wakes.group(1) if wakes else None
            )
    return None, None


def _last_raise(transcript: list[Message]) -> tuple[str | None, str | None]:
    """The code and reason of the last ``archmax_raise`` the session accepted."""
    answers = _answers(transcript)
    for message in reversed(transcript):
        for call in reversed(message.tool_calls if message.role == "assistant" else []):
            answer = answers.get(call.id)
            if call.name != "archmax_raise" or answer is None or answer.status != "ok":
                continue
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                return None, None
            if isinstance(arguments, dict):
                return arguments.get("code"), arguments.get("reason")
    return None, None


def _hook_of(summary: str) -> dict[str, Any] | None:
    """``hook before · intake · hooks/check.js`` → its phase, state and hook label."""
    if not summary.startswith("hook "):
        return None
    parts = summary.removeprefix("hook ").split(" · ")
    if len(parts) != 3:
        return None
    return {"phase": parts[0], "state": parts[1], "hook": parts[2]}


def _verdict_of(answer: ModelCallResult) -> dict[str, Any]:
    """A rubric's verdict as the session read the grading model's answer (the same parser):
    ``verdict`` and ``reason``; a reply with no ``{"verdict", "reason"}`` JSON is the veto
    the session took, with ``failure: "unreadable-verdict"`` and the reply's snippet in the
    reason."""
    verdict = hooks.rubric_verdict(answer.content)
    data: dict[str, Any] = {"verdict": verdict.verdict, "reason": verdict.reason}
    if verdict.unreadable:
        data["failure"] = hooks.UNREADABLE_VERDICT
    return data


def read_history(
    events: Iterable[HistoryEvent], session_id: str, converter: DataConverter, *, after: int = 0
) -> list[SessionEvent]:
    """The session events of recorded history ``events`` (a fetched or exported history)."""
    reader = _Reader(session_id, converter)
    return [found for event in events for found in reader.read(event) if found.seq > after]


RUN_STRIDE: Final = 1_000_000
"""A session's event ``seq`` is ``run × RUN_STRIDE + history event id``, ``run`` counting
the runs of its continue-as-new chain from 0: one increasing position across every run (a
run's history holds at most 51,200 events), equal to the event id in a session's first run."""


async def run_chain(client: Client, session_id: str) -> list[str]:
    """The run ids of the session's continue-as-new chain, first to latest: the first from
    the latest run's description, each next one from its predecessor's last event."""
    described = await client.get_workflow_handle(session_id).describe()
    latest = described.run_id or ""
    chain = [described.raw_description.workflow_execution_info.first_run_id or latest]
    while chain[-1] != latest and len(chain) < RUN_STRIDE:
        following = await _continued_as(client, session_id, chain[-1])
        if following is None:
            break
        chain.append(following)
    return chain


async def _continued_as(client: Client, session_id: str, run_id: str) -> str | None:
    """The run a closed run continued as (None: it did not)."""
    response = await client.workflow_service.get_workflow_execution_history_reverse(
        GetWorkflowExecutionHistoryReverseRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=session_id, run_id=run_id),
            maximum_page_size=1,
        )
    )
    for event in response.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return str(
                event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            )
    return None


async def history_position(client: Client, session_id: str) -> int:
    """The ``seq`` of the session's newest history event (0: no session yet)."""
    try:
        chain = await run_chain(client, session_id)
        latest = await client.get_workflow_handle(session_id, run_id=chain[-1]).describe()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        return 0
    return (len(chain) - 1) * RUN_STRIDE + latest.history_length


async def session_events(
    client: Client,
    session_id: str,
    *,
    after: int = 0,
    follow: bool = False,
    live: LiveChannel | None = None,
) -> AsyncGenerator[SessionEvent, None]:
    """The session's events after position ``after`` (a ``seq``), across every run of its
    continue-as-new chain; with ``follow``, wait for new ones as the session runs, into the
    runs it continues as (the iteration then ends only when the caller stops it), and, with a
    ``live`` channel, the text its model calls write as they write it (subscribed before the
    history is read)."""
    if not follow or live is None:
        async for event in _history_events(client, session_id, after=after, follow=follow):
            yield event
        return
    async with live.subscribe(session_id) as deltas:
        durable = _history_events(client, session_id, after=after, follow=True)
        # closed with this stream, not whenever the collector finds it: its two pumps are
        # tasks, which a stream left mid-way would leave pending until then
        async with contextlib.aclosing(merged(durable, deltas, session_id, after)) as events:
            async for event in events:
                yield event


_END: Final = object()


async def merged(
    durable: AsyncIterator[SessionEvent],
    deltas: AsyncIterator[LiveEvent],
    session_id: str,
    after: int = 0,
) -> AsyncGenerator[SessionEvent, None]:
    """The durable events, with the live ones merged in as they arrive: each live one as a
    :class:`SessionEvent` with the ``seq`` of the last durable event before it; a delta of a
    message whose ``agent-text`` (or outbound ``park-message``) came already is dropped."""
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def pump(source: AsyncIterator[Any]) -> None:
        try:
            async for item in source:
                await queue.put(item)
        except Exception as exc:
            await queue.put(exc)
            return
        await queue.put(_END)

    pumps = [asyncio.create_task(pump(durable)), asyncio.create_task(pump(deltas))]
    position, finished = after, set[str]()
    try:
        while True:
            item = await queue.get()
            if item is _END:
                if pumps[0].done():
                    return  # the history ended (a stream that does not follow forever)
                continue
            if isinstance(item, Exception):
                raise item
            if isinstance(item, LiveEvent):
                if item.message_id in finished:
                    continue
                yield SessionEvent(
                    type=item.type,
                    ts=item.ts,
                    seq=position,
                    session_id=session_id,
                    data=item.data(),
                )
                continue
            event: SessionEvent = item
            position = max(position, event.seq)
            message = event.data.get("messageId")
            if isinstance(message, str):
                finished.add(message)
            yield event
    finally:
        for task in pumps:
            task.cancel()
        for task in pumps:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _history_events(
    client: Client, session_id: str, *, after: int, follow: bool
) -> AsyncGenerator[SessionEvent, None]:
    """:func:`session_events` read off the history alone."""
    reader = _Reader(session_id, client.data_converter)
    chain = await run_chain(client, session_id)
    index = min(max(after, 0) // RUN_STRIDE, len(chain) - 1)  # a run starts afresh
    while index < len(chain):
        reader.offset = index * RUN_STRIDE
        reader.know_run(chain[index])
        handle = client.get_workflow_handle(session_id, run_id=chain[index])
        async for event in handle.fetch_history_events(wait_new_event=follow):
            for found in reader.read(event):  # read all: later events need what came before
                if found.seq > after:
                    yield found
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                following = event.workflow_execution_continued_as_new_event_attributes
                if index + 1 == len(chain):
                    chain.append(following.new_execution_run_id)
        index += 1


EventCallback = Callable[[SessionEvent], Awaitable[None] | None]
"""A host's ``on_event``: called with each event, awaited when it returns an awaitable."""

TURN_ENDS = frozenset({"parked", "raised", "turn-end"})
"""The events that close a turn (read off the update's completion, or for a turn no update
drove, off the artifacts written at its end); a reply closes with its outbound
``park-message`` (:func:`ends_turn`)."""


def ends_turn(event: SessionEvent) -> bool:
    """Whether ``event`` closes a turn (or a reply to a session parked at a human state)."""
    return event.type in TURN_ENDS or (
        event.type == "park-message" and event.data.get("direction") == "outbound"
    )


TAIL_TIMEOUT = 10.0
"""How long a watched call waits, after its update returned, for the stream to deliver the
turn's end event (it is normally there already)."""

T = TypeVar("T")


async def while_watching(
    client: Client,
    session_id: str,
    on_event: EventCallback,
    action: Awaitable[T],
    live: LiveChannel | None = None,
) -> T:
    """Run ``action`` (an update that settles one turn) while every new event of the session
    goes to ``on_event`` (with a ``live`` channel, the model's text as it is written too);
    return its result once the stream has also delivered the turn's end. A new session's
    history does not exist until the update-with-start creates it, so the stream retries
    until it does. An error in ``on_event`` is raised to the caller."""
    closed_run: str | None = None
    try:
        described = await client.get_workflow_handle(session_id).describe()
        if described.status != WorkflowExecutionStatus.RUNNING:
            # A session whose run closed idle: the firing starts a new run, read from its start.
            closed_run, after = described.run_id, 0
        else:
            after = await history_position(client, session_id)
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            if inspect.iscoroutine(action):
                action.close()  # never started: no "never awaited" warning
            raise
        after = 0
    ended = asyncio.Event()
    # Subscribed once, before the action starts, for the whole watch: a new session's stream
    # starts again until its history exists, and no text written meanwhile is missed.
    relay: asyncio.Queue[LiveEvent] | None = None
    subscription: contextlib.AsyncExitStack | None = None
    relaying: asyncio.Task[None] | None = None
    if live is not None:
        subscription = contextlib.AsyncExitStack()
        deltas = await subscription.enter_async_context(live.subscribe(session_id))
        relay = asyncio.Queue()
        relaying = asyncio.create_task(_relay(deltas, relay))

    async def follow() -> None:
        nonlocal after
        handle = client.get_workflow_handle(session_id)
        while closed_run is not None and (await handle.describe()).run_id == closed_run:
            await asyncio.sleep(0.05)  # until the firing's run has started
        while True:
            try:
                durable = _history_events(client, session_id, after=after, follow=True)
                source = (
                    merged(durable, _drained(relay), session_id, after)
                    if relay is not None
                    else durable
                )
                async with contextlib.aclosing(source) as stream:  # its pumps end with it
                    async for event in stream:
                        after = event.seq
                        delivered = on_event(event)
                        if inspect.isawaitable(delivered):
                            await delivered
                        if ends_turn(event):
                            ended.set()
                return
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                await asyncio.sleep(0.05)

    watcher = asyncio.create_task(follow())
    try:
        result = await action
        ending = asyncio.create_task(ended.wait())
        await asyncio.wait({ending, watcher}, timeout=TAIL_TIMEOUT, return_when="FIRST_COMPLETED")
        ending.cancel()
        if watcher.done() and not watcher.cancelled() and watcher.exception() is not None:
            raise watcher.exception()  # type: ignore[misc]
        return result
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        if relaying is not None:
            relaying.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await relaying
        if subscription is not None:
            await subscription.aclose()


async def _relay(source: AsyncIterator[LiveEvent], into: asyncio.Queue[LiveEvent]) -> None:
    """Move a subscription's events into a queue each stream of a watch reads afresh."""
    async for event in source:
        if into.qsize() >= LIVE_BACKLOG:
            into.get_nowait()
        into.put_nowait(event)


async def _drained(queue: asyncio.Queue[LiveEvent]) -> AsyncIterator[LiveEvent]:
    while True:
        yield await queue.get()


LIVE_BACKLOG: Final = 1024
"""Live events a watch holds for a stream not reading yet (the oldest dropped past it)."""


__all__ = [
    "EVENT_TYPES",
    "LIVE_EVENT_TYPES",
    "PREVIEW_CHARS",
    "EventCallback",
    "SessionEvent",
    "read_history",
    "session_events",
    "while_watching",
]
