"""What a model, a host or an external system sends never wedges, closes or fakes a session.

Each test reproduces a failure seen on an earlier main, against the real dev server and the
real ``openai`` client talking to the scripted model."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.devserver import find_test_server
from archmax_temporal.client.loader import load_workflow
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.worker import DATA_CONVERTER, build_worker
from archmax_temporal.workflows.context import CLEANED_ARGUMENTS
from archmax_temporal.workflows.errors import (
    InvalidVariableNameError,
    PayloadTooLargeError,
    SessionNotFoundError,
    TriggerInputError,
    UnknownTriggerError,
)
from archmax_temporal.workflows.limits import Limits
from archmax_temporal.workflows.models import DeliverInput, Outcome, SendInput, SessionInput
from archmax_temporal.workflows.session import ArchmaxSession
from archmax_temporal.workflows.text import REPLACEMENT
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.scenarios import session_exists

NOTES = """
title: Notes
instructions: Keep notes.
states:
  write:
    triggers: { manual: {} }
    instructions: Write the note, then say done.
    tools:
      allow: [write_file, read_file]
"""


def _book(*rules: dict[str, object], default: str = "done") -> str:
    return json.dumps({"rules": list(rules), "default": {"content": default}})


def _sid() -> str:
    return f"untrusted-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def notes_root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "notes", NOTES)
    return tmp_path


class TestLoneSurrogates:
    async def test_an_escaped_surrogate_in_tool_arguments_is_replaced_and_the_model_told(
        self, client: Client, task_queue: str, scripted: Scripted, notes_root: Path
    ) -> None:
        """``{"content": "bad \\ud800"}`` is valid JSON: the write runs with U+FFFD, the
        answer says the arguments were altered, and the session completes."""
        raw = '{"file_path": "scratchpad/s.txt", "content": "bad \\ud800 end"}'
        server = scripted(
            _book(
                {
                    "when": {"last_user": "note"},
                    "times": 1,
                    "reply": {"tool_calls": [{"name": "write_file", "raw_arguments": raw}]},
                }
            )
        )
        sid = _sid()
        async with running_agent(client, task_queue, notes_root, "notes", server) as agent:
            outcome = await agent.workflow.send(sid, "write the note")
            view = await agent.sessions.view(sid)
        assert outcome.kind == "completed"
        written = (notes_root / "sessions" / sid / "scratchpad" / "s.txt").read_text()
        assert written == f"bad {REPLACEMENT} end"
        (answer,) = [m for m in view.transcript if m.role == "tool" and m.name == "write_file"]
        assert (answer.content or "").startswith(CLEANED_ARGUMENTS)

    async def test_a_surrogate_in_a_set_variable_reaches_the_artifacts(
        self, client: Client, task_queue: str, scripted: Scripted, notes_root: Path
    ) -> None:
        """A value set with ``archmax_set_variables`` is stored cleaned, so the artifacts
        activity that carries it can be written."""
        raw = '{"variables": {"topic": "x\\udc00y"}}'
        server = scripted(
            _book(
                {
                    "when": {"last_user": "note"},
                    "times": 1,
                    "reply": {
                        "tool_calls": [{"name": "archmax_set_variables", "raw_arguments": raw}]
                    },
                }
            )
        )
        sid = _sid()
        async with running_agent(client, task_queue, notes_root, "notes", server) as agent:
            outcome = await agent.workflow.send(sid, "note the topic")
        assert outcome.kind == "completed"
        assert outcome.variables["topic"].value == f"x{REPLACEMENT}y"
        stored = json.loads(
            (notes_root / "sessions" / sid / "artifacts" / "variables.json").read_text()
        )
        assert stored["variables"]["topic"]["value"] == f"x{REPLACEMENT}y"

    async def test_a_surrogate_in_the_models_text_costs_one_call(
        self, client: Client, task_queue: str, scripted: Scripted, notes_root: Path
    ) -> None:
        """The reply text is cleaned by the model activity: one paid call, not six."""
        server = scripted(_book(default="answer \ud800 here"))
        sid = _sid()
        async with running_agent(client, task_queue, notes_root, "notes", server) as agent:
            outcome = await agent.workflow.send(sid, "hello")
        assert outcome.kind == "completed"
        assert outcome.reply == f"answer {REPLACEMENT} here"
        assert len(server.requests) == 1


ASK = """
title: Ask
instructions: Ask, then answer.
states:
  ask:
    triggers: { manual: {} }
    instructions: Ask for the document, wait, then finish.
    tools:
      allow: [read_file]
"""


def _parks_then_answers() -> str:
    return _book(
        {
            "when": {"last_user": "start"},
            "times": 1,
            "reply": {
                "content": "Send it please.",
                "tool_calls": [{"name": "archmax_wait", "arguments": {"reason": "the document"}}],
            },
        },
        default="Thanks.",
    )


@pytest.fixture
def ask_root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "ask", ASK)
    return tmp_path


async def _largest_event(client: Client, session_id: str) -> int:
    history = await client.get_workflow_handle(session_id).fetch_history()
    return max(event.ByteSize() for event in history.events)


class TestBoundedFirings:
    async def test_a_huge_delivered_variable_is_refused_and_the_session_stays_parked(
        self, client: Client, task_queue: str, scripted: Scripted, ask_root: Path
    ) -> None:
        """1.5 MB in one variable is PayloadTooLargeError naming it, its size and the limit,
        from the host before Temporal sees it and from the validator for any other caller;
        the session stays parked, its history unchanged, and a normal delivery then works."""
        server = scripted(_parks_then_answers())
        sid = _sid()
        huge = "x" * 1_500_000
        async with running_agent(client, task_queue, ask_root, "ask", server) as agent:
            parked = await agent.workflow.send(sid, "start")
            assert parked.kind == "parked"
            before = len((await agent.handle(sid).fetch_history()).events)
            with pytest.raises(PayloadTooLargeError) as host_side:
                await agent.workflow.deliver(sid, trigger="doc", variables={"body": huge})
            assert "variable 'body'" in str(host_side.value)
            assert "the limit is 64.0 KiB" in str(host_side.value)
            raw = client.get_workflow_handle(sid)
            with pytest.raises(WorkflowUpdateFailedError) as validator:
                await raw.execute_update(
                    "deliver", DeliverInput(trigger="doc", variables={"body": "y" * 200_000})
                )
            cause = validator.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == "PayloadTooLargeError"
            assert len((await agent.handle(sid).fetch_history()).events) == before
            done = await agent.workflow.deliver(
                sid, trigger="doc", variables={"body": "z" * 60_000}
            )
        assert done.kind == "completed"
        assert await _largest_event(client, sid) < 256 * 1024

    async def test_a_large_value_is_previewed_in_the_event_note(
        self, client: Client, task_queue: str, scripted: Scripted, ask_root: Path
    ) -> None:
        """The ``[event]`` note copies a preview of a large variable, never the value."""
        server = scripted(_parks_then_answers())
        sid = _sid()
        async with running_agent(client, task_queue, ask_root, "ask", server) as agent:
            await agent.workflow.send(sid, "start")
            await agent.workflow.deliver(sid, trigger="doc", variables={"body": "q" * 60_000})
            view = await agent.sessions.view(sid)
        (note,) = [m for m in view.transcript if m.role == "tool" and m.note == "event"]
        assert len(note.content or "") < 1_000
        assert "chars)" in (note.content or "")
        assert view.summary.variables["body"].value == "q" * 60_000

    async def test_a_fifty_megabyte_attachment_travels_by_reference(
        self, client: Client, task_queue: str, scripted: Scripted, notes_root: Path
    ) -> None:
        """A 50 MB file is placed byte for byte; no event of the history is near its size."""
        server = scripted(_book())
        sid = _sid()
        data = bytes(range(256)) * (50 * 1024 * 1024 // 256)
        async with running_agent(client, task_queue, notes_root, "notes", server) as agent:
            outcome = await agent.workflow.send(
                sid, "file this", files={"scan": ("scan.bin", data)}
            )
        assert outcome.kind == "completed"
        placed = notes_root / "sessions" / sid / "scratchpad" / "attachments" / "scan.bin"
        assert placed.read_bytes() == data
        assert outcome.variables["scan"].value == "scratchpad/attachments/scan.bin"
        assert await _largest_event(client, sid) < 64 * 1024

    def test_limits_come_from_the_environment_and_refuse_nonsense(self) -> None:
        """Each limit has its variable; a value Temporal could never carry is refused."""
        limits = Limits.from_env({"ARCHMAX_MAX_VARIABLE_BYTES": "1000"})
        assert limits.variable_bytes == 1000
        with pytest.raises(ValueError, match="ARCHMAX_MAX_FIRING_BYTES"):
            Limits.from_env({"ARCHMAX_MAX_FIRING_BYTES": "5000000"})
        with pytest.raises(ValueError, match="ARCHMAX_MAX_MESSAGE_BYTES"):
            Limits.from_env({"ARCHMAX_MAX_MESSAGE_BYTES": "lots"})


TRIGGERED = """
title: Triggered
instructions: Serve mail.
states:
  inbox:
    triggers:
      email_received:
        session: conversation_id
        requires: [conversation_id, { name: body, type: string }]
    instructions: Answer the mail.
"""


@pytest.fixture
def mail_root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "mail", TRIGGERED)
    return tmp_path


class TestRefusedFirstFirings:
    @pytest.mark.parametrize(
        ("trigger", "variables", "error"),
        [
            ("email_recieved", {"conversation_id": "x", "body": "b"}, UnknownTriggerError),
            ("email_received", {"conversation_id": "x", "Body": "b"}, InvalidVariableNameError),
            ("email_received", {"conversation_id": "x"}, TriggerInputError),
        ],
    )
    async def test_a_refused_first_firing_starts_no_session(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        mail_root: Path,
        trigger: str,
        variables: dict[str, str],
        error: type[Exception],
    ) -> None:
        """The host admits a first firing itself: refused, no workflow starts, nothing is
        listed, and a valid firing on the same id then starts cleanly."""
        server = scripted(_book(default="Answered."))
        sid = _sid()
        async with running_agent(client, task_queue, mail_root, "mail", server) as agent:
            listed = [s.session_id for s in await agent.sessions.list()]
            with pytest.raises(error):
                await agent.workflow.send(sid, "hello", trigger=trigger, variables=variables)
            assert not await session_exists(client, sid)
            assert [s.session_id for s in await agent.sessions.list()] == listed
            outcome = await agent.workflow.send(
                sid,
                "hello",
                trigger="email_received",
                variables={"conversation_id": sid, "body": "b"},
            )
        assert outcome.kind == "completed" and outcome.state == "inbox"

    async def test_a_run_started_for_a_refused_update_is_no_session(
        self, client: Client, task_queue: str, scripted: Scripted, mail_root: Path
    ) -> None:
        """Another SDK's update-with-start whose update the validator refuses started a run:
        it reports ``new`` (never ``completed``), is not listed, and the next valid firing on
        the id is admitted and runs the first turn."""
        server = scripted(_book(default="Answered."))
        sid = _sid()
        async with running_agent(client, task_queue, mail_root, "mail", server) as agent:
            loaded = agent.loaded
            start = WithStartWorkflowOperation(
                ArchmaxSession.run,
                SessionInput(
                    session_id=sid, workflow="mail", spec=loaded.spec, spec_hash=loaded.spec_hash
                ),
                id=sid,
                task_queue=task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
            with pytest.raises(WorkflowUpdateFailedError):
                await client.execute_update_with_start_workflow(
                    "send",
                    SendInput(message="hi", trigger="nope"),
                    start_workflow_operation=start,
                    result_type=Outcome,
                )
            summary = await agent.handle(sid).query(ArchmaxSession.summary)
            assert (summary.status, summary.classification, summary.turns) == ("new", "new", 0)
            assert sid not in [s.session_id for s in await agent.sessions.list()]
            outcome = await agent.workflow.send(
                sid,
                "hello",
                trigger="email_received",
                variables={"conversation_id": sid, "body": "b"},
            )
        assert outcome.kind == "completed" and outcome.state == "inbox"

    async def test_a_run_that_admits_no_firing_ends_after_the_grace(
        self, task_queue: str, mail_root: Path
    ) -> None:
        """On the time-skipping server: a run started with no firing waits the grace period
        for one, then ends reporting ``new``, leaving the id free for a fresh start."""
        env = await WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=str(find_test_server()), data_converter=DATA_CONVERTER
        )
        try:
            loaded = load_workflow(mail_root, "mail")
            async with build_worker(
                env.client,
                task_queue=task_queue,
                model=ModelConfig(base_url="http://127.0.0.1:9/v1"),
                store_dir=mail_root / "sessions",
                authoring_root=mail_root,
            ):
                handle = await env.client.start_workflow(
                    ArchmaxSession.run,
                    SessionInput(
                        session_id="phantom-1",
                        workflow="mail",
                        spec=loaded.spec,
                        spec_hash=loaded.spec_hash,
                        search_attributes=False,
                    ),
                    id="phantom-1",
                    task_queue=task_queue,
                )
                ended = await handle.result()
        finally:
            await env.shutdown()
        assert (ended.status, ended.turns) == ("new", 0)

    async def test_an_admitted_first_firing_adds_no_timer(
        self, client: Client, task_queue: str, scripted: Scripted, mail_root: Path
    ) -> None:
        """The grace period costs a normal session nothing: no timer in its history (the idle
        close's timer, off here, is its own)."""
        server = scripted(_book(default="Answered."))
        sid = _sid()
        async with running_agent(
            client, task_queue, mail_root, "mail", server, idle_close=None
        ) as agent:
            await agent.workflow.send(
                sid,
                "hello",
                trigger="email_received",
                variables={"conversation_id": sid, "body": "b"},
            )
        history = await client.get_workflow_handle(sid).fetch_history()
        timers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
        assert timers == []


GUARDED = """
title: Guarded
states:
  answer:
    triggers: { manual: {} }
    on_error: closed
    instructions: Answer.
    transitions:
      - { to: closed, description: Give up. }
  closed:
    instructions: Close the conversation.
"""


class TestConfigurationErrors:
    async def test_a_rejected_key_waits_visibly_and_goes_on_once_fixed(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A 401 is the deployment's fault: the turn is not routed through ``on_error``; the
        session stays running, ``sessions.get`` says it waits on the model and why, and when
        the endpoint accepts the key again the turn completes by itself."""
        write_workflow(tmp_path, "guarded", GUARDED)
        server = scripted(
            json.dumps({"rules": [{"error": {"status": 401, "message": "Incorrect API key"}}]})
        )
        sid = _sid()
        async with running_agent(client, task_queue, tmp_path, "guarded", server) as agent:
            turn = asyncio.ensure_future(agent.workflow.send(sid, "hello"))
            summary = None
            # The key stays rejected until the waiting is seen, however slow the machine.
            deadline = asyncio.get_running_loop().time() + 60
            while asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.1)
                try:
                    summary = await agent.sessions.get(sid)
                except SessionNotFoundError:  # the send has not started it yet
                    continue
                if summary.waiting_on:
                    break
            assert summary is not None and summary.status == "running"
            assert summary.waiting_on is not None
            assert summary.waiting_on.startswith("waiting on the model: ")
            assert "Incorrect API key" in summary.waiting_on
            assert not turn.done()
            rejected = len(server.requests)
            server.playbook = Playbook.from_yaml(
                json.dumps({"rules": [{"reply": {"content": "The answer."}}]})
            )  # the key is accepted again
            outcome = await asyncio.wait_for(turn, timeout=120)
        assert rejected >= 1 and all(r.status == 401 for r in server.requests[:rejected])
        assert (outcome.kind, outcome.state, outcome.reply) == (
            "completed",
            "answer",
            "The answer.",
        )
        assert [s.kind for s in outcome.trail] == ["trigger"]
