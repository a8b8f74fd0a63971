"""Store identity: a store's ``_store.json``, the store a session records, and workers that
refuse the sessions of another store (visibly, losing nothing) until a worker of the right
store takes them over; on the dev server where it takes a worker."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client, WorkflowHistory
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from archmax_temporal.activities import store_identity as identity
from archmax_temporal.activities.folder_store import FilesystemSessionStore, session_folder
from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.store import CHECKPOINT_FILE
from archmax_temporal.activities.store_check import StoreCheckInterceptor
from archmax_temporal.client.cli import render
from archmax_temporal.client.host import Agent
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.worker import DATA_CONVERTER, build_worker
from archmax_temporal.workflows import store_binding
from archmax_temporal.workflows.contracts import workspace as workspace_contract
from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
from archmax_temporal.workflows.contracts.workspace import PLACE_FILES_ACTIVITY
from archmax_temporal.workflows.errors import StoreIdentityError, StoreMismatchError
from archmax_temporal.workflows.models import SessionInput, SessionSummary
from archmax_temporal.workflows.patches import BEFORE_GENERATION, GENERATION_PATCH
from tests.support.activity_events import failed_activities, patch_ids
from tests.support.agents import Scripted, model_config, running_agent, write_workflow
from tests.support.golden import replayer

DESK = """
title: Desk
states:
  intake:
    triggers: { manual: }
    instructions: Answer.
"""

PLAYBOOK = json.dumps({"rules": [{"name": "answer", "when": {}, "reply": {"content": "Done."}}]})


def _sid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- the identity file ------------------------------------------------------------------------


class _RacingStore(FilesystemSessionStore):
    """A folder store whose first read of the identity waits until every racer has read it:
    all of them find none, and all of them try to create it."""

    def __init__(self, root: Path, barrier: threading.Barrier) -> None:
        super().__init__(root)
        self._barrier = barrier
        self._first = True
        self.created: bool | None = None

    def read_shared(self, key: str) -> bytes:
        try:
            return super().read_shared(key)
        finally:
            if self._first:
                self._first = False
                self._barrier.wait(timeout=10)

    def write_shared_once(self, key: str, data: bytes) -> bool:
        self.created = super().write_shared_once(key, data)
        return self.created


class _CountingStore(MemorySessionStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def read_shared(self, key: str) -> bytes:
        self.reads += 1
        return super().read_shared(key)


class TestIdentityFile:
    def test_created_once_and_kept(self, tmp_path: Path) -> None:
        """A store without an identity gets one (a uuid4's hex, its time, where it is); later
        reads return it and never rewrite the file."""
        store = FilesystemSessionStore(tmp_path)
        first = identity.establish_store_identity(store, describe="here")
        written = (tmp_path / identity.STORE_IDENTITY_KEY).read_bytes()
        again = identity.establish_store_identity(store, describe="elsewhere")
        assert again == first
        assert uuid.UUID(hex=first.id).version == 4
        assert first.description == "here"
        assert (tmp_path / identity.STORE_IDENTITY_KEY).read_bytes() == written
        assert json.loads(written) == {
            "id": first.id,
            "created": first.created.isoformat().replace("+00:00", "Z"),
            "description": "here",
        }

    def test_two_stores_have_two_identities(self, tmp_path: Path) -> None:
        """Each folder is its own store."""
        a = identity.establish_store_identity(FilesystemSessionStore(tmp_path / "a"), describe="a")
        b = identity.establish_store_identity(FilesystemSessionStore(tmp_path / "b"), describe="b")
        assert a.id != b.id

    def test_raced_creates_agree(self, tmp_path: Path) -> None:
        """Racers that all found no identity all try to create one: one write wins, and every
        racer ends with the winner's identity."""
        racers = 6
        barrier = threading.Barrier(racers)
        stores = [_RacingStore(tmp_path, barrier) for _ in range(racers)]
        found: list[identity.StoreIdentity] = []

        def establish(store: _RacingStore) -> None:
            found.append(identity.establish_store_identity(store, describe="raced"))

        threads = [threading.Thread(target=establish, args=(s,)) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(found) == racers
        assert len({f.id for f in found}) == 1
        assert [s.created for s in stores].count(True) == 1
        assert [s.created for s in stores].count(False) == racers - 1
        on_disk = identity.StoreIdentity.model_validate_json(
            (tmp_path / identity.STORE_IDENTITY_KEY).read_bytes()
        )
        assert on_disk == found[0]

    @pytest.mark.parametrize(
        "content",
        [
            b"not json",
            b'{"id": "abc", "created": "2025-01-01T00:00:00Z", "description": "x"}',
            b'{"id": "' + b"a" * 32 + b'", "created": "2025-01-01T00:00:00Z"}',
            b'{"id": "'
            + b"a" * 32
            + b'", "created": "2025-01-01T00:00:00Z", "description": "x", "owner": "y"}',
        ],
        ids=["not-json", "bad-id", "missing-field", "extra-field"],
    )
    def test_a_bad_file_is_a_typed_error_and_is_kept(self, tmp_path: Path, content: bytes) -> None:
        """A ``_store.json`` that is not an identity is refused with ``StoreIdentityError``
        naming the file, and left as it is (a store never changes identity)."""
        (tmp_path / identity.STORE_IDENTITY_KEY).write_bytes(content)
        store = FilesystemSessionStore(tmp_path)
        with pytest.raises(StoreIdentityError, match=r"_store\.json"):
            identity.establish_store_identity(store, describe="x")
        with pytest.raises(StoreIdentityError):
            identity.store_identity(store, describe=str(tmp_path))
        assert (tmp_path / identity.STORE_IDENTITY_KEY).read_bytes() == content

    def test_two_stores_described_alike_keep_their_own_identities(self, tmp_path: Path) -> None:
        """The process keeps identities by store, not by description: two stores wrapped
        alike (a bench's counting proxies, say) are two stores."""
        a = FilesystemSessionStore(tmp_path / "a")
        b = FilesystemSessionStore(tmp_path / "b")
        first = identity.store_identity(a, describe="the same label")
        second = identity.store_identity(b, describe="the same label")
        assert first.id != second.id
        assert identity.read_store_identity(b) == second

    def test_read_once_per_process(self) -> None:
        """The process keeps a store's identity: the store is read once, not per session."""
        store = _CountingStore()
        where = f"memory://{uuid.uuid4().hex}"
        first = identity.store_identity(store, describe=where)
        reads = store.reads
        assert identity.store_identity(store, describe=where) == first
        assert identity.session_store_ref(store, describe=where) == store_binding.StoreRef(
            id=first.id, description=where
        )
        assert store.reads == reads

    @pytest.mark.parametrize(
        ("location", "described"),
        [
            ("s3://AKIAEXAMPLE:s3cret@bucket/prefix?X-Amz-Signature=abc#f", "s3://bucket/prefix"),
            ("https://user:pw@minio.local:9000/bucket", "https://minio.local:9000/bucket"),
            ("gs://bucket/sessions", "gs://bucket/sessions"),
        ],
    )
    def test_descriptions_carry_no_credentials(self, location: str, described: str) -> None:
        """A URL is described without user, password, query or fragment."""
        assert identity.describe_store(location) == described

    def test_a_folder_is_described_by_its_absolute_path(self, tmp_path: Path) -> None:
        """A folder store is named by where it is, whatever the working directory."""
        assert identity.describe_store(tmp_path / "x" / ".." / "s") == str(tmp_path / "s")
        long = identity.describe_store("/" + "d" * 500)
        assert len(long) <= identity.DESCRIPTION_CHARS and "…" in long


# --- the header and the worker's check ------------------------------------------------------------


class _Ran(ActivityInboundInterceptor):
    def __init__(self) -> None:
        self.ran = 0

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        self.ran += 1
        return "ran"


def _input(headers: dict[str, Payload]) -> ExecuteActivityInput:
    return ExecuteActivityInput(fn=lambda: None, args=(), executor=None, headers=headers)


OWN = store_binding.StoreRef(id="a" * 32, description="/srv/store-a")
OTHER = store_binding.StoreRef(id="b" * 32, description="s3://bucket/b")


class TestStoreCheck:
    def test_the_header_round_trips(self) -> None:
        """The header holds the store's id and description; absent, it names no store."""
        header = store_binding.store_header(OTHER)
        assert store_binding.read_store_header({store_binding.STORE_HEADER: header}) == OTHER
        assert store_binding.read_store_header({}) is None
        with pytest.raises(ValueError, match="archmax-store"):
            store_binding.read_store_header({store_binding.STORE_HEADER: Payload(data=b"{")})

    async def test_the_own_store_and_no_store_run(self) -> None:
        """An activity of a session of this store runs; so does one that names no store (a
        session an older version started)."""
        ran = _Ran()
        check = StoreCheckInterceptor(OWN).intercept_activity(ran)
        own = {store_binding.STORE_HEADER: store_binding.store_header(OWN)}
        assert await ActivityEnvironment().run(check.execute_activity, _input(own)) == "ran"
        assert await ActivityEnvironment().run(check.execute_activity, _input({})) == "ran"
        assert ran.ran == 2

    async def test_another_store_runs_nothing_and_names_both(self) -> None:
        """An activity of a session of another store runs nothing: a retryable
        ``StoreMismatchError`` naming the session and both stores, id and place."""
        ran = _Ran()
        check = StoreCheckInterceptor(OWN).intercept_activity(ran)
        other = {store_binding.STORE_HEADER: store_binding.store_header(OTHER)}
        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, workflow_id="case-7")
        with pytest.raises(ApplicationError) as raised:
            await env.run(check.execute_activity, _input(other))
        error = raised.value
        assert (error.type, error.non_retryable) == (StoreMismatchError.__name__, False)
        assert error.message == (
            "this worker's store /srv/store-a (aaaaaaaa) is not the store session 'case-7' was "
            "created in (bbbbbbbb, s3://bucket/b); start a worker with "
            "ARCHMAX_STORE=s3://bucket/b: the session waits for one, losing nothing"
        )
        assert ran.ran == 0

    def test_a_wait_keeps_the_attempts_and_refusals(self) -> None:
        """An activity scheduled again after a mismatch keeps its policy's attempts and
        non-retryable types; only its pace changes."""
        policy = RetryPolicy(
            initial_interval=timedelta(milliseconds=200),
            maximum_attempts=5,
            non_retryable_error_types=["WorkspaceError"],
        )
        waiting = store_binding.waiting_retry(policy)
        assert (waiting.maximum_attempts, waiting.non_retryable_error_types) == (
            5,
            ["WorkspaceError"],
        )
        assert waiting.initial_interval == waiting.maximum_interval
        assert waiting.initial_interval == store_binding.STORE_WAIT_INTERVAL


# --- sessions and workers on the dev server ---------------------------------------------------


@asynccontextmanager
async def _worker(
    client: Client, task_queue: str, store: Path, root: Path, server: ScriptedModelServer
) -> AsyncIterator[None]:
    """A worker of ``store`` on the queue (cache-less: every task replays)."""
    worker = build_worker(
        client,
        task_queue=task_queue,
        model=model_config(server),
        store_dir=store,
        max_cached_workflows=0,
        authoring_root=root,
    )
    async with worker:
        yield


async def _refused(agent: Agent, sid: str, activity_type: str, within: float = 30.0) -> Failure:
    """The last failure of the session's pending ``activity_type`` once it is a store
    mismatch (polled)."""
    deadline = time.monotonic() + within
    while True:
        try:
            described = await agent.handle(sid).describe()
        except RPCError:  # not started yet
            described = None
        for pending in described.raw_description.pending_activities if described else []:
            failure = pending.last_failure
            if (
                pending.activity_type.name == activity_type
                and failure.application_failure_info.type == StoreMismatchError.__name__
            ):
                return failure
        assert time.monotonic() < deadline, f"{sid}: no refused {activity_type}"
        await asyncio.sleep(0.1)


async def _waiting(
    read: Callable[[str], Awaitable[SessionSummary]], sid: str, within: float = 30.0
) -> SessionSummary:
    """The session's summary as ``read`` gives it once it says the session waits on a
    worker of its store (polled: between two attempts, not while one runs)."""
    deadline = time.monotonic() + within
    while True:
        summary = await read(sid)
        if summary.waiting_on and summary.waiting_on.startswith("waiting on a worker of its"):
            return summary
        assert time.monotonic() < deadline, f"{sid}: waiting on {summary.waiting_on!r}"
        await asyncio.sleep(0.1)


async def _history_with(agent: Agent, sid: str, done: Any, within: float = 30.0) -> WorkflowHistory:
    """The session's history once ``done(history)`` holds (polled)."""
    deadline = time.monotonic() + within
    while True:
        try:
            history = await agent.handle(sid).fetch_history()
        except RPCError:  # not started yet
            history = None
        if history is not None and done(history):
            return history
        assert time.monotonic() < deadline, f"{sid}: history never got there"
        await asyncio.sleep(0.1)


def _scheduled(history: WorkflowHistory, activity_type: str) -> list[Any]:
    return [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity_type
    ]


def _failed(history: WorkflowHistory) -> list[Failure]:
    return failed_activities(history.events)


async def _runs(agent: Agent, sid: str, run_id: str) -> list[SessionInput]:
    """The inputs of run ``run_id`` of the session and of the runs it continued, oldest
    first."""
    inputs: list[SessionInput] = []
    while run_id:
        history = await agent.client.get_workflow_handle(sid, run_id=run_id).fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        (decoded,) = await DATA_CONVERTER.decode(started.input.payloads, [SessionInput])
        inputs.insert(0, decoded)
        run_id = started.continued_execution_run_id
    return inputs


class TestSessionsKeepToTheirStore:
    async def test_a_worker_of_another_store_refuses_and_the_session_waits(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A session created in store A, with only a worker of store B: its model call fails
        on every attempt with a StoreMismatchError naming both stores (the pending activity's
        last failure; ``waiting on`` in its summary), nothing is written to B and the turn
        does not move; a worker of A then serves it and the turn completes, its history
        replaying."""
        write_workflow(tmp_path, "desk", DESK)
        server = scripted(PLAYBOOK)
        store_a, store_b = tmp_path / "store-a", tmp_path / "store-b"
        sid = _sid("identity")
        async with running_agent(
            client, task_queue, tmp_path, "desk", server, store=store_a, worker=False
        ) as agent:
            async with _worker(client, task_queue, store_b, tmp_path, server):
                sending = asyncio.create_task(agent.workflow.send(sid, "Hello"))
                failure = await _refused(agent, sid, MODEL_ACTIVITY)
                summary = await _waiting(agent.sessions.get, sid)
                listed = await _waiting(agent.sessions.describe, sid)  # visibility's view
            a = identity.read_store_identity(FilesystemSessionStore(store_a))
            b = identity.read_store_identity(FilesystemSessionStore(store_b))
            assert a is not None and b is not None and a.id != b.id
            for named in (a.short, b.short, str(store_a), str(store_b), repr(sid)):
                assert named in failure.message
            assert failure.message.index(b.short) < failure.message.index(a.short)
            assert summary.status == "running"
            assert summary.waiting_on is not None
            assert summary.waiting_on.startswith("waiting on a worker of its store: ")
            assert a.short in summary.waiting_on
            assert listed.waiting_on is not None and b.short in listed.waiting_on
            assert "\nwaiting   on a worker of its store: this worker's store " in (
                render.summary_detail(summary)
            )
            assert not sending.done()
            assert not (store_b / sid).exists()  # B wrote nothing of the session
            async with _worker(client, task_queue, store_a, tmp_path, server):
                outcome = await asyncio.wait_for(sending, 60)
            history = await agent.handle(sid).fetch_history()
        assert (outcome.kind, outcome.reply) == ("completed", "Done.")
        assert (store_a / sid / "artifacts" / "trail.json").is_file()
        (model,) = _scheduled(history, MODEL_ACTIVITY)  # retried, never scheduled again
        header = model.header.fields[store_binding.STORE_HEADER]
        assert store_binding.read_store_header({store_binding.STORE_HEADER: header}) == (
            store_binding.StoreRef(id=a.id, description=str(store_a))
        )
        assert _failed(history) == []
        result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None

    async def test_an_activity_whose_attempts_a_mismatch_used_up_is_scheduled_again(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A file placement refused by a worker of another store until its attempts are used
        up does not refuse the firing: the session schedules it again (behind its patch), and
        a worker of the right store places the file and completes the turn; the history
        replays. (The placement's policy is cut to three quick attempts here: how many there
        are does not matter, that they run out does.)"""
        monkeypatch.setattr(store_binding, "STORE_WAIT_INTERVAL", timedelta(seconds=1))
        quick = dataclasses.replace(
            workspace_contract.WORKSPACE_RETRY,
            maximum_attempts=3,
            maximum_interval=timedelta(milliseconds=400),
        )
        monkeypatch.setattr(workspace_contract, "WORKSPACE_RETRY", quick)
        write_workflow(tmp_path, "desk", DESK)
        server = scripted(PLAYBOOK)
        store_a, store_b = tmp_path / "store-a", tmp_path / "store-b"
        sid = _sid("identity-files")
        async with running_agent(
            client, task_queue, tmp_path, "desk", server, store=store_a, worker=False
        ) as agent:
            async with _worker(client, task_queue, store_b, tmp_path, server):
                sending = asyncio.create_task(
                    agent.workflow.send(sid, "Here it is", files={"doc": ("a.txt", "alpha")})
                )
                waited = await _history_with(
                    agent, sid, lambda h: len(_scheduled(h, PLACE_FILES_ACTIVITY)) >= 2
                )
                await _refused(agent, sid, PLACE_FILES_ACTIVITY)
            (used_up,) = _failed(waited)
            assert used_up.application_failure_info.type == StoreMismatchError.__name__
            assert not sending.done()
            assert not (store_b / sid).exists()
            async with _worker(client, task_queue, store_a, tmp_path, server):
                outcome = await asyncio.wait_for(sending, 60)
            history = await agent.handle(sid).fetch_history()
        assert outcome.kind == "completed"
        assert outcome.variables["doc"].value == "scratchpad/attachments/a.txt"
        assert (store_a / sid / "scratchpad" / "attachments" / "a.txt").read_text() == "alpha"
        again = _scheduled(history, PLACE_FILES_ACTIVITY)
        assert len(again) >= 2 and len(_failed(history)) == len(again) - 1
        for failure in _failed(history):
            assert failure.application_failure_info.type == StoreMismatchError.__name__
        for later in again[1:]:
            assert later.retry_policy.initial_interval.ToTimedelta() == timedelta(seconds=1)
            assert later.retry_policy.maximum_attempts == again[0].retry_policy.maximum_attempts
        assert again[0].retry_policy.maximum_attempts == quick.maximum_attempts
        # the wait is patched: a run of this code takes it under the generation
        assert store_binding.STORE_WAIT_PATCH in BEFORE_GENERATION
        assert patch_ids(history.events) == [GENERATION_PATCH]
        result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None

    async def test_the_store_is_kept_across_runs(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """Every run of a session carries the store it was created in: the first, one
        continued as new, and one reopened from its idle checkpoint (which keeps what the
        checkpoint recorded, not what the reopening host would record)."""
        write_workflow(tmp_path, "desk", DESK)
        server = scripted(PLAYBOOK)
        store = tmp_path / "sessions"
        sid = _sid("identity-runs")
        async with running_agent(
            client,
            task_queue,
            tmp_path,
            "desk",
            server,
            store=store,
            idle_close=timedelta(seconds=1),
            requests_per_run=1,
        ) as agent:
            await agent.workflow.send(sid, "One")  # then continued as new, then closed idle
            await _history_with(agent, sid, _closed_idle)
            closed = (await agent.handle(sid).describe()).run_id
            path = session_folder(store, sid) / CHECKPOINT_FILE
            written = json.loads(path.read_text(encoding="utf-8"))
            written["checkpoint"]["store_description"] = "where it was created"
            path.write_text(json.dumps(written), encoding="utf-8")
            await agent.workflow.send(sid, "Two")  # reopened from the checkpoint
            latest = (await agent.handle(sid).describe()).run_id
            first, reopened = await _runs(agent, sid, closed), await _runs(agent, sid, latest)
        own = identity.read_store_identity(FilesystemSessionStore(store))
        assert own is not None
        assert len(first) == 2 and reopened  # started, continued as new; reopened
        assert [i.store_id for i in [*first, *reopened]] == [own.id] * (len(first) + len(reopened))
        assert [i.store_description for i in first] == [str(store)] * 2
        assert {i.store_description for i in reopened} == {"where it was created"}


def _closed_idle(history: WorkflowHistory) -> bool:
    return history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
