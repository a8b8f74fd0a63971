"""This runtime's case steps that wait, crash and retry (``advance``, ``crash``,
``redeliver``) and fields that sample (``repeat``, ``passRate``), run by ``run_tests`` on the
real dev server (and, for a case that advances, on the time-skipping test server the runner
starts itself) with the scripted model: each does what it says, and each can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.host_tools import ToolContext, host_tool
from archmax_temporal.activities.store import read_checkpoint
from archmax_temporal.client.devserver import TEST_SERVER_ENV
from archmax_temporal.client.testing import runner
from archmax_temporal.client.testing.results import CaseResult, RunTestsResult
from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
from archmax_temporal.workflows.contracts.workspace import EDIT_FILE_ACTIVITY as EDIT
from tests.support import crash_tools
from tests.support.activity_events import local_marker
from tests.support.agents import Scripted, copy_example, write_workflow
from tests.support.agents import tool_call as call
from tests.support.suites import run_suite

HEAD = "title: {title}\ndescription: A durable step of the runner.\n"


def _case(root: Path, workflow: str, name: str, text: str) -> None:
    path = root / "workflows" / workflow / "tests" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _only(result: RunTestsResult) -> CaseResult:
    (case,) = result.results
    return case


def _records(case: CaseResult, kind: str) -> list[Any]:
    return [r for r in case.records if r.kind == kind]


# --- advance ----------------------------------------------------------------------------------

WRITE_BACK = "I'll look my order number up and write back."


class TestAdvance:
    async def test_seven_days_take_seconds_and_wake_the_parked_until(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """``advance: 7d`` over a 3-day ``until``: the timer fires, the woken turn runs to
        its end before the next step, on the time-skipping server, in seconds."""
        root = copy_example("support-inbox", tmp_path)
        _case(
            root,
            "support-inbox",
            "week.test.yaml",
            HEAD.format(title="A week passes")
            + f'steps:\n  - send: "{WRITE_BACK}"\n  - parked: input\n  - advance: 7d\n'
            "  - succeeded: true\n  - triggerArrival: timer\n"
            "  - reachedState: closed-unanswered\n",
        )
        playbook = root / "workflows" / "support-inbox" / "playbook.yaml"
        started = time.monotonic()
        result, _ = await run_suite(
            client, task_queue, scripted, root, "support-inbox", playbook, filter="week"
        )
        wall = time.monotonic() - started
        print(f"\na case with advance: 7d took {wall:.2f} s of wall time")
        case = _only(result)
        assert case.verdict.failures == [] and case.verdict.status == "passed"
        assert case.environment == "time-skipping"
        assert wall < 30  # seven days of durable waiting, in real seconds

    async def test_advancing_less_than_the_wait_wakes_nothing(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A day on, a 3-day wait has not fired: the session is still parked, so a case that
        expects it to have woken fails, and says the turn parked."""
        root = copy_example("support-inbox", tmp_path)
        _case(
            root,
            "support-inbox",
            "early.test.yaml",
            HEAD.format(title="Too early") + f'steps:\n  - send: "{WRITE_BACK}"\n  - advance: 2d\n'
            "  - parked: { channel: input, state: clarify }\n"
            "  - advance: 23h\n  - succeeded: true\n  - triggerArrival: timer\n",
        )
        playbook = root / "workflows" / "support-inbox" / "playbook.yaml"
        result, _ = await run_suite(
            client, task_queue, scripted, root, "support-inbox", playbook, filter="early"
        )
        case = _only(result)
        assert case.verdict.status == "failed" and result.exit_code == 1
        assert [r.status for r in _records(case, "parked")] == ["passed"]
        assert case.verdict.failures == [
            "succeeded: the turn parked (input at 'clarify') instead of completing"
        ]
        assert [r.status for r in _records(case, "triggerArrival")] == ["not-executed"]

    async def test_a_deadline_takes_its_edge_once_the_clock_passes_it(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A human state's 48 h deadline: 47 h on the decision still waits; 2 h more and
        ``onTimeout`` is taken by the deadline, and the turn it wakes completes."""
        root = copy_example("refund-review", tmp_path)
        spec = root / "workflows" / "refund-review" / "workflow.yaml"
        anchor = "    approvers: [finance@acmecorp.com]\n"
        spec.write_text(
            spec.read_text().replace(
                anchor,
                anchor + "    deadline: { after: 48h, warn: 24h, onTimeout: refund-closed }\n",
            )
        )
        _case(
            root,
            "refund-review",
            "deadline.test.yaml",
            HEAD.format(title="Deadline")
            + "steps:\n  - send: I'd like a refund for order ORD-1001.\n  - parked: decision\n"
            "  - advance: 47h\n  - parked: { channel: decision, state: refund-review }\n"
            "  - advance: 2h\n  - succeeded: true\n  - reachedState: refund-closed\n"
            '  - trail: { kind: human, reason: "(deadline: after 48h)", count: 1 }\n'
            "  - reply: { includes: /approved/i }\n",
        )
        playbook = root / "workflows" / "refund-review" / "playbook.yaml"
        result, _ = await run_suite(
            client, task_queue, scripted, root, "refund-review", playbook, filter="deadline"
        )
        case = _only(result)
        assert case.verdict.failures == []
        assert case.environment == "time-skipping"

    async def test_the_idle_close_fires_and_the_next_message_reopens_the_session(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """The refund example's ``days-pass`` case: two hours after the refund closed, the
        idle close (1 h) checkpointed the session to the store; the next send reopened it."""
        root = copy_example("refund-review", tmp_path)
        playbook = root / "workflows" / "refund-review" / "playbook.yaml"
        result, _ = await run_suite(
            client, task_queue, scripted, root, "refund-review", playbook, filter="days-pass"
        )
        case = _only(result)
        assert case.verdict.failures == [] and case.session_id
        found = read_checkpoint(FilesystemSessionStore(root / "sessions"), case.session_id)
        assert found is not None and found.checkpoint.carried is not None
        assert found.checkpoint.carried.state == "refund-closed"


# --- crash ------------------------------------------------------------------------------------

LEDGER = """
title: Ledger
states:
  book:
    triggers: { manual: }
    before: { script: hooks/audit.js }
    instructions: Charge the order, note it in the ledger, then say so.
    tools:
      allow: [charge, edit_file, read_file]
"""

AUDIT = """import { ok } from "@archmax-ai/harness/sandbox";
export default function audit() { return ok(); }
"""

LEDGER_PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"last_tool": "edit_file"}, "reply": {"content": "Booked."}},
            {
                "when": {"last_tool": "charge"},
                "reply": {
                    "tool_calls": [
                        call(
                            "edit_file",
                            file_path="scratchpad/ledger.txt",
                            old_string="START",
                            new_string="START X",
                        )
                    ]
                },
            },
            {"when": {"state": "book"}, "reply": {"tool_calls": [call("charge", order_id="O-1")]}},
        ]
    }
)


class Order(BaseModel):
    order_id: str


def _ledger(tmp_path: Path, crash: str) -> Path:
    write_workflow(tmp_path, "ledger", LEDGER)
    hooks = tmp_path / "workflows" / "ledger" / "hooks"
    hooks.mkdir()
    (hooks / "audit.js").write_text(AUDIT)
    _case(
        tmp_path,
        "ledger",
        "book.test.yaml",
        HEAD.format(title="Book")
        + 'workspace:\n  scratchpad/ledger.txt: "START END"\n'
        + f"steps:\n  - crash: {crash}\n  - send: Book O-1.\n  - succeeded: true\n"
        "  - calledTool: { name: charge }\n",
    )
    return tmp_path


def _ledger_file(root: Path, case: CaseResult) -> str:
    assert case.session_id
    return (root / "sessions" / case.session_id / "scratchpad" / "ledger.txt").read_text()


def _killed_attempts(events: Any) -> list[Any]:
    """The activity attempts of a history retried after a ``crash`` killed their worker."""
    started = [
        e.activity_task_started_event_attributes
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    return [
        a
        for a in started
        if a.attempt > 1 and a.last_failure.application_failure_info.type == "WorkerKilled"
    ]


class TestCrashKillsAProcess:
    """Host tools a worker process can load (module-level): the crash SIGKILLs a worker
    process of its own, and an in-process worker resumes the session."""

    async def test_a_non_idempotent_host_tool_fails_the_crash(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The worker process is killed after ``charge`` returned, before its answer was
        journaled: the retry, on the fresh worker in this process, charges again. The
        runner hears both runs (one from the killed process, one here) and fails the
        crash's record by itself; the session's own assertions pass."""
        monkeypatch.setenv(crash_tools.CHARGES_ENV, str(tmp_path / "charges"))
        root = _ledger(tmp_path, "{ during: tool, at: complete }")
        result, _ = await run_suite(
            client,
            task_queue,
            scripted,
            root,
            "ledger",
            LEDGER_PLAYBOOK,
            tools=[crash_tools.charge],
        )
        case = _only(result)
        (first, *_, killed), (second, *_, here) = crash_tools.charges()
        assert (first, second) == ("O-1", "O-1")  # the effect, applied twice
        assert killed != here == os.getpid()  # by the worker process, then by this one's
        with pytest.raises(ProcessLookupError):
            os.kill(killed, 0)  # SIGKILLed and reaped
        (record,) = _records(case, "crash")
        assert record.status == "failed" and record.detail is not None
        assert record.detail.startswith(
            "worker process killed (SIGKILL) after host tool 'charge' returned, before its "
            "answer was journaled; applied twice: host tool 'charge' ran 2 times for one call"
        )
        assert "takes no ToolContext" in record.detail
        assert case.verdict.status == "failed" and result.exit_code == 1
        assert [r.status for r in case.records if r.kind != "crash"] == ["passed", "passed"]

    async def test_a_host_tool_that_honours_its_key_passes(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The same kill against ``charge`` that applies each key once: one charge, the case
        passes, and the history shows the attempt retried after the killed process's."""
        monkeypatch.setenv(crash_tools.CHARGES_ENV, str(tmp_path / "charges"))
        root = _ledger(tmp_path, "{ during: tool, at: complete }")
        result, _ = await run_suite(
            client,
            task_queue,
            scripted,
            root,
            "ledger",
            LEDGER_PLAYBOOK,
            tools=[host_tool(crash_tools.charge_once, name="charge")],
        )
        case = _only(result)
        assert case.verdict.failures == []
        ((order, _, pid),) = crash_tools.charges()
        assert order == "O-1" and pid != os.getpid()  # the worker process charged, once
        (record,) = _records(case, "crash")
        assert record.detail is not None
        assert record.detail.startswith("worker process killed (SIGKILL) after host tool")
        assert "ran again with the same idempotency key" in record.detail
        assert case.session_id
        history = await client.get_workflow_handle(case.session_id).fetch_history()
        assert len(_killed_attempts(history.events)) == 1

    @pytest.mark.parametrize(
        ("crash", "struck"),
        [
            ("{ during: hook }", "as archmax.sandbox.run started"),
            ("{ during: model, nth: 2 }", f"as {MODEL_ACTIVITY} started"),
            ("{ during: tool, nth: 2, at: complete }", "after archmax.workspace.edit_file did"),
            ("{ during: store, at: complete }", "after archmax.store.persist_turn did its work"),
        ],
    )
    async def test_each_kind_kills_the_process_and_the_session_is_unharmed(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        crash: str,
        struck: str,
    ) -> None:
        """A hook, the model, a journaled edit, the store: the process killed there, the
        turn ends as it would have (one charge, one edit), nothing applied twice."""
        monkeypatch.setenv(crash_tools.CHARGES_ENV, str(tmp_path / "charges"))
        root = _ledger(tmp_path, crash)
        result, _ = await run_suite(
            client,
            task_queue,
            scripted,
            root,
            "ledger",
            LEDGER_PLAYBOOK,
            tools=[crash_tools.charge],
        )
        case = _only(result)
        assert case.verdict.failures == []
        (record,) = _records(case, "crash")
        assert record.detail is not None
        assert record.detail.startswith(f"worker process killed (SIGKILL) {struck}")
        assert [order for order, _, _ in crash_tools.charges()] == ["O-1"]
        assert _ledger_file(root, case) == "START X END"

    async def test_a_crash_that_never_strikes_leaves_the_action_to_the_process(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The turn runs one hook: a crash armed for the third never strikes, the worker
        process runs the whole turn (its charge) and is shut down, and the record fails."""
        monkeypatch.setenv(crash_tools.CHARGES_ENV, str(tmp_path / "charges"))
        root = _ledger(tmp_path, "{ during: hook, nth: 3 }")
        result, _ = await run_suite(
            client,
            task_queue,
            scripted,
            root,
            "ledger",
            LEDGER_PLAYBOOK,
            tools=[crash_tools.charge],
        )
        case = _only(result)
        (record,) = _records(case, "crash")
        assert record.status == "failed"
        assert record.detail is not None and record.detail.startswith(
            "the armed crash never struck"
        )
        ((_, _, pid),) = crash_tools.charges()
        assert pid != os.getpid()
        others = [r.status for r in case.records if r.kind != "crash"]
        assert others == ["passed", "passed"], (case.error, case.verdict.failures)


class TestCrash:
    """Host tools defined inside a function (no worker process can load them): the crash
    is simulated in process, and says so."""

    async def test_a_crash_a_non_idempotent_host_tool_would_fail(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """Killed after the host tool returned, before its answer was journaled: the retry
        runs it again, and a tool that takes no ToolContext charged twice. The runner says
        so by itself, as a failed ``crash`` record; the session looks fine otherwise."""
        charged: list[str] = []

        def charge(order: Order) -> str:
            """Charge an order."""
            charged.append(order.order_id)
            return f"charged {order.order_id}"

        root = _ledger(tmp_path, "{ during: tool, at: complete }")
        result, _ = await run_suite(
            client, task_queue, scripted, root, "ledger", LEDGER_PLAYBOOK, tools=[charge]
        )
        case = _only(result)
        assert charged == ["O-1", "O-1"]  # the effect, applied twice
        (record,) = _records(case, "crash")
        assert record.status == "failed" and record.step == 0
        assert record.detail is not None
        assert "in-process worker killed after host tool 'charge' returned" in record.detail
        assert (
            "(simulated: host tool 'charge' is not importable by a worker process)" in record.detail
        )
        assert "host tool 'charge' ran 2 times for one call" in record.detail
        assert "takes no ToolContext" in record.detail
        assert case.verdict.status == "failed" and result.exit_code == 1
        assert [r.status for r in case.records if r.kind != "crash"] == ["passed", "passed"]

    async def test_a_host_tool_told_its_key_passes_the_same_crash(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """The same crash against a tool that takes its ToolContext and applies each key
        once: one charge, and the case passes (the record notes the second run)."""
        charged: dict[str, str] = {}

        def charge(order: Order, context: ToolContext) -> str:
            """Charge an order, once per idempotency key."""
            charged.setdefault(context.idempotency_key, order.order_id)
            return f"charged {order.order_id}"

        root = _ledger(tmp_path, "{ during: tool, at: complete }")
        result, _ = await run_suite(
            client, task_queue, scripted, root, "ledger", LEDGER_PLAYBOOK, tools=[charge]
        )
        case = _only(result)
        assert case.verdict.failures == []
        assert list(charged.values()) == ["O-1"]
        (record,) = _records(case, "crash")
        assert record.detail is not None
        assert "ran again with the same idempotency key" in record.detail

    async def test_a_journaled_edit_killed_before_it_reported_is_applied_once(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """``edit_file`` (the second tool activity, a local one) did its edit and the worker
        died before reporting it. The ledger holds one edit, whichever way the session went
        on, and both ways run the edit again under its first activity id (the effect key):

        - the local activity, held by the dead worker, outran its timeout before a worker
          replayed the task: it went on as the regular activity, which the fresh worker ran;
        - the dead worker's workflow task timed out first: the fresh worker, replaying it,
          ran the local activity again (no marker had been recorded).

        Which comes first is the machine's timing (a loaded one replays later); the journal
        answers the repeat either way."""
        charged: list[str] = []

        def charge(order: Order) -> str:
            """Charge an order."""
            charged.append(order.order_id)
            return "charged"

        root = _ledger(tmp_path, "{ during: tool, nth: 2, at: complete }")
        result, _ = await run_suite(
            client, task_queue, scripted, root, "ledger", LEDGER_PLAYBOOK, tools=[charge]
        )
        case = _only(result)
        assert case.verdict.failures == [] and case.environment is None
        (record,) = _records(case, "crash")
        assert record.detail is not None and f"after {EDIT} did its work" in record.detail
        assert _ledger_file(root, case) == "START X END"
        assert charged == ["O-1"]
        assert case.session_id
        history = await client.get_workflow_handle(case.session_id).fetch_history()
        (held,) = [
            e for e in history.events if (local_marker(e) or {}).get("activity_type") == EDIT
        ]
        marker = local_marker(held)
        assert marker is not None
        regular = [
            e.activity_task_scheduled_event_attributes
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == EDIT
        ]
        if held.marker_recorded_event_attributes.HasField("failure"):  # it never reported
            (scheduled,) = regular
            assert scheduled.activity_id == marker["activity_id"]  # the same effect key
        else:  # run again by the replaying worker, as the local activity it was
            assert regular == []

    @pytest.mark.parametrize(
        ("crash", "struck"),
        [
            ("{ during: hook }", "as archmax.sandbox.run started"),
            ("{ during: model, nth: 2 }", f"as {MODEL_ACTIVITY} started"),
            ("{ during: store, at: complete }", "after archmax.store.persist_turn did its work"),
        ],
    )
    async def test_each_kind_strikes_and_the_session_is_unharmed(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        crash: str,
        struck: str,
    ) -> None:
        """A hook, the model, the store: killed there, the turn ends as it would have."""
        charged: list[str] = []

        def charge(order: Order) -> str:
            """Charge an order."""
            charged.append(order.order_id)
            return "charged"

        root = _ledger(tmp_path, crash)
        result, _ = await run_suite(
            client, task_queue, scripted, root, "ledger", LEDGER_PLAYBOOK, tools=[charge]
        )
        case = _only(result)
        assert case.verdict.failures == []
        (record,) = _records(case, "crash")
        assert record.detail is not None and struck in record.detail
        assert charged == ["O-1"] and _ledger_file(root, case) == "START X END"

    async def test_a_crash_that_never_strikes_fails_its_record(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """The turn runs one hook: a crash armed for the third never strikes, and says so."""

        def charge(order: Order) -> str:
            """Charge an order."""
            return "charged"

        root = _ledger(tmp_path, "{ during: hook, nth: 3 }")
        result, _ = await run_suite(
            client, task_queue, scripted, root, "ledger", LEDGER_PLAYBOOK, tools=[charge]
        )
        case = _only(result)
        (record,) = _records(case, "crash")
        assert record.status == "failed"
        assert record.detail == (
            "the armed crash never struck: the action's turn started fewer than 3 hook "
            "activities on its worker"
        )


# --- redeliver --------------------------------------------------------------------------------

NEWS = """steps:
  - send: "Hi, I'm support@acmecorp.com. I'd like a refund for order ORD-1001."
  - parked: decision
  - send: "Any news? Please approve it soon."
  - redeliver: {}
  - parked: { channel: decision, state: refund-review }
"""


class TestRedeliver:
    async def test_a_redelivery_under_its_key_is_answered_once(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        root = copy_example("refund-review", tmp_path)
        _case(root, "refund-review", "news.test.yaml", HEAD.format(title="News") + NEWS)
        playbook = root / "workflows" / "refund-review" / "playbook.yaml"
        result, _ = await run_suite(
            client, task_queue, scripted, root, "refund-review", playbook, filter="news"
        )
        case = _only(result)
        assert case.verdict.failures == []
        (record,) = _records(case, "redeliver")
        assert (record.status, record.step) == ("passed", 3)
        assert record.detail == (
            "send (steps[2]) sent again: the first outcome, nothing applied twice"
        )

    async def test_a_redelivery_without_the_key_would_be_applied_twice(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Sent again under a fresh key (as a webhook without an idempotency key would be),
        the message is a second turn: the runner's check fails it."""
        monkeypatch.setattr(runner, "redelivery_key", lambda _key: runner.action_key())
        root = copy_example("refund-review", tmp_path)
        _case(root, "refund-review", "news.test.yaml", HEAD.format(title="News") + NEWS)
        playbook = root / "workflows" / "refund-review" / "playbook.yaml"
        result, _ = await run_suite(
            client, task_queue, scripted, root, "refund-review", playbook, filter="news"
        )
        case = _only(result)
        (record,) = _records(case, "redeliver")
        assert record.status == "failed" and record.detail is not None
        assert record.detail.startswith("send (steps[2]) sent again under its idempotency key")
        assert "made 1 more model call" in record.detail
        assert "added 2 messages" in record.detail
        assert case.verdict.status == "failed"


# --- repeat / passRate ------------------------------------------------------------------------

FLAKY = {
    "rules": [
        {
            "name": "flaky",
            "times": 2,
            "when": {"state": "refund-request"},
            "reply": {"content": "Sorry, I cannot help with refunds."},
        }
    ]
}


def _flaky_playbook(root: Path) -> str:
    """The refund example's playbook whose first two answers in refund-request refuse."""
    import yaml

    book = yaml.safe_load((root / "workflows" / "refund-review" / "playbook.yaml").read_text())
    return json.dumps({"rules": FLAKY["rules"] + book["rules"]})


class TestRepeat:
    @pytest.mark.parametrize(("rate", "status"), [("0.6", "passed"), ("0.8", "failed")])
    async def test_runs_on_fresh_sessions_pass_at_the_declared_rate(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        rate: str,
        status: str,
    ) -> None:
        """Five runs, the first two refused by a flaky model: 3 of 5 pass, 0.6. A passRate of
        0.6 passes, 0.8 fails naming the tally and each failing run; every run's verdict and
        session are reported."""
        root = copy_example("refund-review", tmp_path)
        _case(
            root,
            "refund-review",
            "flaky-runs.test.yaml",
            HEAD.format(title="Sampled") + f"repeat: 5\npassRate: {rate}\n"
            "steps:\n  - send: I'd like a refund for order ORD-1001.\n  - parked: decision\n",
        )
        result, _ = await run_suite(
            client,
            task_queue,
            scripted,
            root,
            "refund-review",
            _flaky_playbook(root),
            filter="flaky-runs",
        )
        case = _only(result)
        assert case.repeat is not None and case.runs is not None
        assert (case.repeat.runs, case.repeat.passed, case.repeat.rate) == (5, 3, 0.6)
        assert [run.verdict.status for run in case.runs] == ["failed"] * 2 + ["passed"] * 3
        assert len({run.session_id for run in case.runs}) == 5
        assert all(run.session_id.endswith(f"-r{run.run}") for run in case.runs)
        assert case.verdict.status == status
        shown = next(run for run in case.runs if run.verdict.status == status)
        assert case.session_id == shown.session_id
        if status == "failed":
            assert case.verdict.failures[0] == "passRate: 3 of 5 runs passed (0.6 < 0.8)"
            assert case.verdict.failures[1].startswith("run 1: parked:")
        else:
            assert case.verdict.failures == []
            assert all(r.status == "passed" for r in case.records)


async def test_without_the_time_skipping_server_an_advancing_case_says_what_to_install(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TEST_SERVER_ENV, str(tmp_path / "no-such-server"))
    root = copy_example("customer-support", tmp_path)
    playbook = root / "workflows" / "order-lookup" / "playbook.yaml"
    result, _ = await run_suite(
        client, task_queue, scripted, root, "order-lookup", playbook, filter="no-reply"
    )
    case = _only(result)
    assert case.error is not None
    assert case.error.startswith(
        "advance runs on Temporal's time-skipping test server, which is not installed "
        "(pip install 'archmax-temporal[time-skipping]')"
    )
    assert all(r.status == "not-executed" for r in case.records)


def test_archmax_test_narrates_and_reports_them(client: Client, tmp_path: Path) -> None:
    """The command as a user runs it (no model configured: the example's playbook): the
    clock and the kill in the case's flow, the crash's record under the verdict, and the
    case's environment in --json."""
    root = copy_example("refund-review", tmp_path)
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ARCHMAX_", "OPENAI_"))},
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": f"cli-durable-{uuid.uuid4().hex[:8]}",
        "ARCHMAX_ROOT": str(root),
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "archmax_temporal", "test", "refund-review", "days-pass", "--json"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)["results"]
    assert result["environment"] == "time-skipping"
    (crash,) = [r for r in result["records"] if r["kind"] == "crash"]
    assert crash["status"] == "passed"
    assert crash["detail"].startswith("worker process killed (SIGKILL) after")
    lines = [line.strip() for line in done.stderr.splitlines()]
    assert "⏱ +3d  (time-skipping clock)" in lines
    assert any(
        line.startswith("⚡ crash during model #1: worker process killed (SIGKILL) after")
        for line in lines
    )
    assert any(line.startswith("⚡ crash: worker process killed (SIGKILL) after") for line in lines)
