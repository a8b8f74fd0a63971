"""Deadlines on human decisions (``deadline: {after, warn, onTimeout}``, this runtime's
extension of archmax's format): the durable timer on the park, the decision ``deadline``
takes, the ``approval.expiring`` / ``approval.expired`` notifications, the due time every
reader shows, and what ``archmax validate`` refuses.

The long waits run on Temporal's time-skipping test server (:mod:`tests.support.timeskip`): no
search attributes there, so the sessions run with ``search_attributes=False``."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from archmax_temporal.activities.notify import NotifyActivities, NotifyTarget
from archmax_temporal.client.cli.render import due_text, summary_detail, summary_line
from archmax_temporal.client.host import Agent
from archmax_temporal.client.http import new_secret
from archmax_temporal.client.http.wire import to_wire
from archmax_temporal.client.testing.validate import validate_workflow
from archmax_temporal.worker import DATA_CONVERTER
from archmax_temporal.workflows import deadlines
from archmax_temporal.workflows.contracts.notify import NOTIFY_ACTIVITY
from archmax_temporal.workflows.models import (
    NotifyInput,
    PendingDecision,
    SessionSummary,
    is_runtime_note,
)
from archmax_temporal.workflows.notifications import notification_id
from tests.support.agents import Scripted, copy_example, running_agent
from tests.support.paths import EXAMPLES
from tests.support.timeskip import advance

PLAYBOOK = EXAMPLES / "refund-review" / "workflows" / "refund-review" / "playbook.yaml"
REQUEST = "Hi, I'd like a refund for order ORD-1001."
DEADLINE = "    deadline: { after: 48h, warn: 24h, onTimeout: refund-closed }\n"
HANDOFF = "Your refund request for ORD-1001 is now with a person in finance for review."


def _root(tmp_path: Path, deadline: str = DEADLINE) -> Path:
    """The refund-review example whose finance review declares ``deadline``."""
    root = copy_example("refund-review", tmp_path)
    spec = root / "workflows" / "refund-review" / "workflow.yaml"
    text = spec.read_text()
    anchor = "    approvers: [finance@acmecorp.com]\n"
    assert anchor in text
    spec.write_text(text.replace(anchor, anchor + deadline))
    return root


@pytest.fixture
def sid() -> str:
    return f"deadline-{uuid.uuid4().hex[:8]}"


async def _runs(client: Client, session_id: str) -> list[list[HistoryEvent]]:
    """The histories of the session's continue-as-new chain, first run to latest, followed
    forwards (the time-skipping server reads no history in reverse)."""
    described = await client.get_workflow_handle(session_id).describe()
    run_id: str | None = described.raw_description.workflow_execution_info.first_run_id
    runs: list[list[HistoryEvent]] = []
    while run_id:
        history = await client.get_workflow_handle(session_id, run_id=run_id).fetch_history()
        runs.append(list(history.events))
        last = runs[-1][-1]
        continued = last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        attributes = last.workflow_execution_continued_as_new_event_attributes
        run_id = attributes.new_execution_run_id if continued else None
    return runs


async def _histories(client: Client, session_id: str) -> list[HistoryEvent]:
    """Every event of every run of the session's continue-as-new chain, in order."""
    return [event for run in await _runs(client, session_id) for event in run]


def _notices(events: list[HistoryEvent]) -> list[NotifyInput]:
    """The notifications the session scheduled, in order."""
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == NOTIFY_ACTIVITY
    ]
    return [
        DATA_CONVERTER.payload_converter.from_payloads(list(a.input.payloads), [NotifyInput])[0]
        for a in scheduled
    ]


def _count(events: list[HistoryEvent], kind: EventType.ValueType) -> int:
    return sum(1 for e in events if e.event_type == kind)


async def _settled(agent: Agent, session_id: str, status: str) -> bool:
    return (await agent.sessions.get(session_id)).status == status


# --- a local receiver of signed notifications ------------------------------------------------


@dataclass
class Receiver:
    """What a notification receiver on 127.0.0.1 got: each POST's headers and body. It
    answers 500 to the first attempt of each message (by its webhook-id), then 204."""

    url: str = ""
    seen: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(body) for _, body in self.seen]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            headers = {k.lower(): v for k, v in self.headers.items()}
            with got.lock:
                got.seen.append((headers, body))
                key = headers["webhook-id"]
                status = 204 if key in got.refused else 500
                got.refused.add(key)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    got.url = f"http://127.0.0.1:{server.server_address[1]}/approvals"
    yield got
    server.shutdown()
    server.server_close()


SECRET = new_secret()


# --- the durable timer ------------------------------------------------------------------------


class TestDeadlineExpires:
    async def test_a_48h_deadline_takes_on_timeout_by_deadline_under_time_skipping(
        self, skipping_env: WorkflowEnvironment, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """Parked with `after: 48h`, the session is due 48 h after the park; when the clock
        passes it, onTimeout is taken as a decision by `deadline`: a human trail step with
        `by: deadline`, a [decision] note, a `decided` event, and the turn goes on to
        completion in the target. The worker has no notify URL: both notifications are
        scheduled, none is sent, nothing fails."""
        sid = f"deadline-{uuid.uuid4().hex[:8]}"
        server = scripted(PLAYBOOK)
        client = skipping_env.client
        async with running_agent(
            client,
            task_queue,
            _root(tmp_path),
            "refund-review",
            server,
            search_attributes=False,
            idle_close=None,
        ) as agent:
            parked = await agent.workflow.send(sid, REQUEST)
            started = time.monotonic()
            await advance(
                skipping_env,
                timedelta(hours=48, minutes=1),
                lambda: _settled(agent, sid, "completed"),
            )
            wall = time.monotonic() - started
            print(f"\n48 h deadline expired under time skipping in {wall:.2f} s of wall time")
            view = await agent.sessions.view(sid)
            events = [e async for e in agent.sessions.events(sid)]
            history = await _histories(client, sid)
        pending = parked.pending
        assert isinstance(pending, PendingDecision) and pending.due_at is not None
        assert pending.due_at - pending.created_at == timedelta(hours=48)
        summary = view.summary
        assert (summary.status, summary.state) == ("completed", "refund-closed")
        step = view.trail[-1]
        assert (step.kind, step.to, step.by) == ("human", "refund-closed", "deadline")
        assert step.reason == f"no decision by {pending.due_at.isoformat()} (deadline: after 48h)"
        assert abs(step.ts - pending.due_at) < timedelta(minutes=1)
        notes = [m for m in view.transcript if is_runtime_note(m) and m.role == "tool"]
        assert notes[-1].note == "decision"
        assert (notes[-1].content or "").startswith(
            "[decision] the deadline took 'refund-closed' at 'refund-review': no decision by"
        )
        assert view.transcript[-1].content == "Good news: your refund for ORD-1001 is approved."
        decided = [e for e in events if e.type == "decided"]
        assert [e.data for e in decided] == [
            {"to": "refund-closed", "by": "deadline", "state": "refund-review"}
        ]
        assert events[-1].type == "turn-end" and events[-1].data["kind"] == "completed"
        notices = _notices(history)
        assert [n.notice.event for n in notices] == ["approval.expiring", "approval.expired"]
        assert [n.message_id for n in notices] == [
            notification_id(sid, "approval.expiring#1"),
            notification_id(sid, "approval.expired#1"),
        ]
        assert _count(history, EventType.EVENT_TYPE_TIMER_FIRED) == 2  # the warning, the deadline
        assert _count(history, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED) == 0
        assert _count(history, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) == len(
            [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
        )

    async def test_a_person_deciding_first_cancels_the_deadline(
        self, skipping_env: WorkflowEnvironment, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A decision before the deadline cancels its timer: skipping well past the due time
        afterwards fires nothing, sends nothing and adds nothing to the history."""
        sid = f"deadline-{uuid.uuid4().hex[:8]}"
        server = scripted(PLAYBOOK)
        client = skipping_env.client
        async with running_agent(
            client,
            task_queue,
            _root(tmp_path),
            "refund-review",
            server,
            search_attributes=False,
            idle_close=None,  # no other timer in this history
        ) as agent:
            await agent.workflow.send(sid, REQUEST)
            await skipping_env.sleep(timedelta(hours=3))
            decided = await agent.workflow.decide(sid, to="refund-closed", comment="Policy ok.")
            before = await _histories(client, sid)
            await skipping_env.sleep(timedelta(days=4))
            after = await _histories(client, sid)
            view = await agent.sessions.view(sid)
        assert decided.kind == "completed"
        assert [(s.kind, s.reason, s.by) for s in decided.trail] == [("human", "Policy ok.", None)]
        assert "by" not in decided.trail[0].model_dump()  # a person's step keeps archmax's shape
        assert _count(after, EventType.EVENT_TYPE_TIMER_CANCELED) == 1
        assert _count(after, EventType.EVENT_TYPE_TIMER_FIRED) == 0
        assert _notices(after) == []
        assert len(after) == len(before)
        assert [s.by for s in view.trail] == [None] * len(view.trail)


class TestNotifications:
    async def test_warn_then_expiry_reach_a_receiver_signed_once_each(
        self,
        skipping_env: WorkflowEnvironment,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        receiver: Receiver,
    ) -> None:
        """24 h before the deadline the receiver gets approval.expiring; at the deadline,
        approval.expired. Each is a Standard Webhooks message that verifies with the
        reference library; the receiver's 500 is retried under the same webhook-id and body."""
        sid = f"deadline-{uuid.uuid4().hex[:8]}"
        server = scripted(PLAYBOOK)
        client = skipping_env.client
        async with running_agent(
            client,
            task_queue,
            _root(tmp_path),
            "refund-review",
            server,
            search_attributes=False,
            idle_close=None,
            notify=NotifyTarget(receiver.url, SECRET),
        ) as agent:
            parked = await agent.workflow.send(sid, REQUEST)
            await advance(
                skipping_env,
                timedelta(hours=24, minutes=1),
                lambda: _received(receiver, 2),
            )
            assert [b["event"] for b in receiver.bodies()] == ["approval.expiring"] * 2
            assert (await agent.sessions.get(sid)).status == "awaiting_decision"
            await advance(
                skipping_env,
                timedelta(hours=24),
                lambda: _received(receiver, 4),
            )
            await advance(skipping_env, timedelta(0), lambda: _settled(agent, sid, "completed"))
        pending = parked.pending
        assert isinstance(pending, PendingDecision) and pending.due_at is not None
        with receiver.lock:
            seen = list(receiver.seen)
        assert len(seen) == 4  # each refused once, then taken
        for headers, body in seen:
            Webhook(SECRET).verify(body, headers)
        ids = [headers["webhook-id"] for headers, _ in seen]
        assert ids == [
            notification_id(sid, "approval.expiring#1"),
            notification_id(sid, "approval.expiring#1"),
            notification_id(sid, "approval.expired#1"),
            notification_id(sid, "approval.expired#1"),
        ]
        assert seen[0][1] == seen[1][1] and seen[2][1] == seen[3][1]
        expiring, expired = json.loads(seen[0][1]), json.loads(seen[2][1])
        assert expiring == {
            "event": "approval.expiring",
            "sessionId": sid,
            "workflow": "refund-review",
            "state": "refund-review",
            "title": "Finance review",
            "seq": 1,
            "createdAt": to_wire(pending.created_at),
            "dueAt": to_wire(pending.due_at),
            "onTimeout": "refund-closed",
            "transitions": [
                {
                    "to": "refund-closed",
                    "description": "Finance approved the refund.",
                    "type": "approve",
                },
                {
                    "to": "refund-request",
                    "description": "Finance needs more detail.",
                    "type": "refine",
                },
            ],
            "handoff": HANDOFF,
        }
        assert expired == {**expiring, "event": "approval.expired"}


async def _received(receiver: Receiver, count: int) -> bool:
    with receiver.lock:
        return len(receiver.seen) >= count


class TestSendActivity:
    """``archmax.notify.send`` against a real receiver on 127.0.0.1, outside any session."""

    @staticmethod
    def _request(event: str = "approval.expired") -> NotifyInput:
        now = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
        return NotifyInput.model_validate(
            {
                "message_id": notification_id("s-1", f"{event}#1"),
                "notice": {
                    "event": event,
                    "session_id": "s-1",
                    "workflow": "refund-review",
                    "state": "refund-review",
                    "seq": 1,
                    "created_at": now,
                    "due_at": now + timedelta(hours=48),
                    "on_timeout": "refund-closed",
                },
            }
        )

    async def test_a_retryable_answer_fails_the_attempt_and_the_next_is_taken(
        self, receiver: Receiver
    ) -> None:
        """The receiver's 500 fails the attempt (Temporal retries it); the next attempt,
        signed anew under the same id, is taken (sent, 204)."""
        activities = NotifyActivities(NotifyTarget(receiver.url, SECRET))
        env = ActivityEnvironment()
        with pytest.raises(ApplicationError) as failed:
            await env.run(activities.send, self._request())
        assert not failed.value.non_retryable
        result = await env.run(activities.send, self._request())
        assert (result.sent, result.status) == (True, 204)
        assert [h["webhook-id"] for h, _ in receiver.seen] == [self._request().message_id] * 2
        for headers, body in receiver.seen:
            Webhook(SECRET).verify(body, headers)
        assert json.loads(receiver.seen[0][1])["dueAt"] == "2026-12-07T10:00:00Z"

    async def test_a_refusal_is_final_and_no_target_sends_nothing(self) -> None:
        """A 4xx other than 408/425/429 is NotificationRefusedError, not retried; a worker
        without ARCHMAX_NOTIFY_URL answers sent=false and posts nothing."""
        posted: list[httpx.Request] = []

        def answer(request: httpx.Request) -> httpx.Response:
            posted.append(request)
            return httpx.Response(410)

        refusing = NotifyActivities(
            NotifyTarget("http://receiver.test/hook", SECRET),
            transport=httpx.MockTransport(answer),
        )
        env = ActivityEnvironment()
        with pytest.raises(ApplicationError) as refused:
            await env.run(refusing.send, self._request())
        assert (refused.value.type, refused.value.non_retryable) == (
            "NotificationRefusedError",
            True,
        )
        unset = await env.run(NotifyActivities(None).send, self._request())
        assert (unset.sent, unset.status, len(posted)) == (False, None, 1)

    def test_the_target_is_read_from_the_environment(self) -> None:
        """No URL: no target; a URL needs a whsec_ secret."""
        from archmax_temporal.workflows.errors import ConfigurationError

        assert NotifyTarget.from_env({}) is None
        target = NotifyTarget.from_env(
            {"ARCHMAX_NOTIFY_URL": "http://127.0.0.1:9/x", "ARCHMAX_NOTIFY_SECRET": SECRET}
        )
        assert target is not None and target.url == "http://127.0.0.1:9/x"
        assert SECRET not in repr(target)
        with pytest.raises(ConfigurationError, match="without ARCHMAX_NOTIFY_SECRET"):
            NotifyTarget.from_env({"ARCHMAX_NOTIFY_URL": "http://127.0.0.1:9/x"})
        with pytest.raises(ConfigurationError, match="ARCHMAX_NOTIFY_SECRET"):
            NotifyTarget.from_env(
                {"ARCHMAX_NOTIFY_URL": "http://127.0.0.1:9/x", "ARCHMAX_NOTIFY_SECRET": "x"}
            )


# --- the due time survives --------------------------------------------------------------------


class TestDueTimeSurvives:
    async def test_continue_as_new_while_parked_keeps_the_due_time_and_the_warning(
        self, skipping_env: WorkflowEnvironment, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """Each firing ends its run (requests_per_run=1): the park, a reply after the
        warning. The later runs keep the due time of the first park (the deadline is taken
        48 h after it, not 48 h after a run began), never warn twice, and the short idle
        close never closes a parked session."""
        sid = f"deadline-{uuid.uuid4().hex[:8]}"
        server = scripted(PLAYBOOK)
        client = skipping_env.client
        async with running_agent(
            client,
            task_queue,
            _root(tmp_path),
            "refund-review",
            server,
            search_attributes=False,
            idle_close=timedelta(minutes=5),
            requests_per_run=1,
        ) as agent:
            parked = await agent.workflow.send(sid, REQUEST)
            await skipping_env.sleep(timedelta(hours=25))
            replied = await agent.workflow.reply(sid, "Any news?")
            runs_parked = await _runs(client, sid)
            await advance(
                skipping_env,
                timedelta(hours=23, minutes=30),
                lambda: _settled(agent, sid, "completed"),
            )
            view = await agent.sessions.view(sid)
            history = await _histories(client, sid)
        pending = parked.pending
        assert isinstance(pending, PendingDecision) and pending.due_at is not None
        assert isinstance(replied.pending, PendingDecision)
        assert replied.pending.due_at == pending.due_at  # the same record, carried
        assert len(runs_parked) >= 3  # the park's run, the warning's, the reply's successor
        step = view.trail[-1]
        assert (step.kind, step.by) == ("human", "deadline")
        assert abs(step.ts - pending.due_at) < timedelta(minutes=1)
        assert [n.notice.event for n in _notices(history)] == [
            "approval.expiring",
            "approval.expired",
        ]
        assert {n.notice.due_at for n in _notices(history)} == {pending.due_at}


# --- what every reader shows -----------------------------------------------------------------


class TestDueTimeShown:
    async def test_summary_listing_wire_and_cli_show_the_due_time(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path, sid: str
    ) -> None:
        """The summary (a query), the visibility listing (the memo, no worker needed), the
        HTTP wire form and the CLI's lines all carry pending_decision.due_at; a workflow
        without a deadline shows none."""
        server = scripted(PLAYBOOK)
        root = _root(tmp_path)
        async with running_agent(client, task_queue, root, "refund-review", server) as agent:
            parked = await agent.workflow.send(sid, REQUEST)
            summary = await agent.sessions.get(sid)
        pending = parked.pending
        assert isinstance(pending, PendingDecision) and pending.due_at is not None
        async with running_agent(
            client, task_queue, root, "refund-review", server, worker=False
        ) as reader:
            listed = await _listed(reader, sid)
        assert summary.pending_decision is not None
        assert summary.pending_decision.due_at == pending.due_at
        assert listed.source == "visibility"
        assert listed.pending_decision is not None
        assert listed.pending_decision.due_at == pending.due_at
        assert to_wire(listed)["pendingDecision"]["dueAt"] == to_wire(pending.due_at)
        shown = due_text(pending.due_at)
        assert shown.startswith(pending.due_at.strftime("%Y-%m-%dT%H:%MZ"))
        assert f"due {shown}" in summary_line(listed)
        assert f"due       {shown}" in summary_detail(summary).splitlines()

    async def test_a_human_state_without_a_deadline_parks_as_before(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path, sid: str
    ) -> None:
        """No deadline: no due time, no timer, no notification on the park's path; the lines
        say nothing of a due time."""
        server = scripted(PLAYBOOK)
        root = copy_example("refund-review", tmp_path)
        async with running_agent(
            client, task_queue, root, "refund-review", server, idle_close=None
        ) as agent:
            parked = await agent.workflow.send(sid, REQUEST)
            summary = await agent.sessions.get(sid)
            history = await _histories(client, sid)
        assert isinstance(parked.pending, PendingDecision) and parked.pending.due_at is None
        assert _count(history, EventType.EVENT_TYPE_TIMER_STARTED) == 0
        assert _notices(history) == []
        assert "due" not in summary_line(summary) and "due" not in summary_detail(summary)

    def test_due_text_reads_relative_both_ways(self) -> None:
        due = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
        assert due_text(due, now=due - timedelta(hours=47)) == "2026-12-07T10:00Z (in 2 d)"
        assert due_text(due, now=due + timedelta(minutes=12)) == "2026-12-07T10:00Z (12 min ago)"


async def _listed(agent: Agent, session_id: str) -> SessionSummary:
    """The session as the listing reads it from visibility (eventually consistent)."""
    for _ in range(100):
        page = await agent.sessions.list()
        found = [s for s in page if s.session_id == session_id]
        if found and found[0].pending_decision is not None:
            return found[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"{session_id} not listed")


# --- validation ------------------------------------------------------------------------------


class TestValidate:
    @pytest.mark.parametrize(
        ("deadline", "message"),
        [
            (
                "    deadline: { after: 48h, onTimeout: refund-nowhere }\n",
                "states.refund-review.deadline.onTimeout: 'refund-nowhere' is not an edge of "
                "'refund-review' (its edges: refund-closed, refund-request)",
            ),
            (
                "    deadline: { after: 2 days, onTimeout: refund-closed }\n",
                "states.refund-review.deadline.after: cannot read duration '2 days': use a "
                "relative duration such as 90s, 30m, 1h, 1d",
            ),
            (
                "    deadline: { after: 48, onTimeout: refund-closed }\n",
                "states.refund-review.deadline.after: 48 is not a duration: write one such as "
                "90s, 30m, 48h, 3d",
            ),
            (
                "    deadline: { after: 24h, warn: 1d, onTimeout: refund-closed }\n",
                "states.refund-review.deadline: warn (1d) must be shorter than after (24h): the "
                "warning goes out that long before the deadline",
            ),
            (
                "    deadline: { after: 48h, onTimeout: refund-closed, warning: 1h }\n",
                'states.refund-review.deadline: unknown key "warning"',
            ),
        ],
    )
    def test_a_bad_deadline_is_an_error_naming_the_state(
        self, tmp_path: Path, deadline: str, message: str
    ) -> None:
        report = validate_workflow(_root(tmp_path, deadline), "refund-review")
        assert not report.valid
        assert [d.message for d in report.errors] == [message]
        assert report.errors[0].location == "workflows/refund-review/workflow.yaml"

    def test_a_deadline_on_an_agent_state_is_an_error(self, tmp_path: Path) -> None:
        root = copy_example("refund-review", tmp_path)
        spec = root / "workflows" / "refund-review" / "workflow.yaml"
        anchor = "    budget: { maxTurns: 6 }\n"
        spec.write_text(
            spec.read_text().replace(
                anchor, anchor + "    deadline: { after: 1h, onTimeout: refund-review }\n"
            )
        )
        report = validate_workflow(root, "refund-review")
        assert [d.message for d in report.errors] == [
            "states.refund-request.deadline: only a human state (type: human) takes a deadline"
        ]

    def test_a_good_deadline_is_valid_and_a_spec_without_one_dumps_as_before(
        self, tmp_path: Path
    ) -> None:
        from archmax_temporal.client.loader import load_workflow

        good = validate_workflow(_root(tmp_path / "a"), "refund-review")
        assert good.valid and good.diagnostics == []
        with_deadline = load_workflow(_root(tmp_path / "b"), "refund-review")
        without = load_workflow(copy_example("refund-review", tmp_path / "c"), "refund-review")
        deadline = with_deadline.spec.states["refund-review"].deadline
        assert deadline is not None and deadline.due_after == timedelta(hours=48)
        assert deadline.warn_before == timedelta(hours=24)
        assert "deadline" not in without.spec.states["refund-review"].model_dump()
        assert with_deadline.spec_hash != without.spec_hash
        assert deadlines.due_at(None, datetime(2026, 1, 1, tzinfo=UTC)) is None
