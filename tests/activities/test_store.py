"""What a turn writes to the store does not grow with the session (issue 28).

On the folder store, ``trail.json`` and ``trajectory.json`` stay whole documents (the seed's
artifacts, read whole by every reader) and a turn writes only what is new in them, appended in
place over the document's old end; one fsync a turn (the trail's). These tests hold the bytes
and fsyncs of a turn flat from the tenth turn to the sixtieth, the documents byte for byte
what serializing them whole gives, a document cut short by a killed write read by its whole
items and repaired by the next turn, a retry writing nothing twice, and old whole files (any
formatting) still read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.artifact_cache import item_text, parse_items, render
from archmax_temporal.activities.disk_files import DISK
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.store import StoreActivities, stored_trail
from archmax_temporal.activities.store_errors import StoreConflictError
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.workflows.identity import folder_name
from archmax_temporal.workflows.models import PersistTurnInput, TranscriptLog, Usage
from tests.support.artifacts import SID, SPEC, Session, conversation, step, whole

HEAD = {"sessionId": SID, "workflow": "w"}


async def persisted_turn(session: Session, n: int) -> dict[str, int]:
    """Turn ``n`` of ``session`` (its log extended as the model calls do), and what its
    ``persist_turn`` alone wrote to the disk: ``{"writes", "bytes", "fsyncs"}``."""
    new = conversation(n + 1)[4 * n :]
    session.messages = [*session.messages, *new]
    pending = session.messages[session.log.base :]
    conv, end = session.logs.extend(SID, session.log, pending[:-1])
    session.log = TranscriptLog(base=len(conv), base_hash=end)
    session.steps.append(step(n))
    before = DISK.snapshot()
    await session.persist(new[-1:])
    after = DISK.snapshot()
    session.persisted = len(session.steps)
    return {key: after[key] - before[key] for key in after}


def artifact_path(root: Path, name: str) -> Path:
    return root / folder_name(SID) / "artifacts" / name


class TestBoundedWrites:
    async def test_a_turn_writes_as_much_at_turn_60_as_at_turn_10_and_fsyncs_once(
        self, tmp_path: Path
    ) -> None:
        session = Session(tmp_path)
        costs = [await persisted_turn(session, n) for n in range(60)]
        early, late = costs[10], costs[59]
        assert late["bytes"] <= early["bytes"] * 1.1 + 64, (early, late)
        assert late["bytes"] < 2_000  # what is new: a trail step, a few messages, metadata
        assert costs[0]["fsyncs"] == 2, costs[0]  # the spec's snapshot (once a worker), the trail
        assert all(cost["fsyncs"] <= 1 for cost in costs[1:]), costs
        assert late["fsyncs"] == 1  # the trail's, whose older steps live only there
        trail, trajectory = session.expected()
        assert artifact_path(tmp_path, "trail.json").read_text() == trail
        assert artifact_path(tmp_path, "trajectory.json").read_text() == trajectory
        assert len(json.loads(trajectory)["messages"]) == 240

    async def test_a_new_worker_appends_too_after_reading_the_documents_once(
        self, tmp_path: Path
    ) -> None:
        """A worker that never wrote the session (a failover) reads the documents and writes
        only what is new: the bytes stay bounded on its first turn."""
        session = Session(tmp_path)
        for n in range(30):
            await persisted_turn(session, n)
        session.restart()
        cost = await persisted_turn(session, 30)
        assert cost["bytes"] < 4_000, cost  # the small artifacts once more, then the new
        trail, trajectory = session.expected()
        assert artifact_path(tmp_path, "trail.json").read_text() == trail
        assert artifact_path(tmp_path, "trajectory.json").read_text() == trajectory

    async def test_a_retry_of_the_same_turn_writes_neither_document_again(
        self, tmp_path: Path
    ) -> None:
        session = Session(tmp_path)
        for n in range(3):
            await persisted_turn(session, n)
        store = FilesystemSessionStore(tmp_path)
        held = {
            name: store.version_of(SID, f"artifacts/{name}")
            for name in ("trail.json", "trajectory.json")
        }
        session.restart()  # the retry runs on another worker
        session.persisted = 2  # as the workflow still believes: the attempt never reported
        await session.persist([conversation(3)[-1]])
        for name, version in held.items():
            assert store.version_of(SID, f"artifacts/{name}") == version, name
        trail, trajectory = session.expected()
        assert artifact_path(tmp_path, "trail.json").read_text() == trail
        assert artifact_path(tmp_path, "trajectory.json").read_text() == trajectory


class TestCutShort:
    async def test_a_trail_cut_short_is_read_by_its_whole_steps_and_made_whole(
        self, tmp_path: Path
    ) -> None:
        """A write killed half-way leaves the steps before it and part of the new ones: the
        host reads the steps the session counts as persisted; the next turn makes the
        document whole again."""
        session = Session(tmp_path)
        for n in range(4):
            await persisted_turn(session, n)
        path = artifact_path(tmp_path, "trail.json")
        cut = path.read_bytes()
        path.write_bytes(cut[: -len(item_text(step(3).model_dump(mode="json"))) // 2])
        store = FilesystemSessionStore(tmp_path)
        with pytest.raises(ValueError):
            json.loads(path.read_text())
        assert [s.to for s in stored_trail(store, SID, 3)] == ["s0", "s1", "s2"]
        session.restart()
        session.persisted = 3  # the killed attempt never reported: its retry
        session.steps = session.steps[:3]
        session.steps.append(step(3))
        await session.persist([])
        session.persisted = 4
        await persisted_turn(session, 4)
        trail, _ = session.expected()
        assert path.read_text() == trail

    def test_parse_items_takes_the_whole_items_before_a_cut(self) -> None:
        items = [{"to": f"s{n}", "reason": "x, y } ]"} for n in range(3)]
        text = render(HEAD, "steps", [item_text(i) for i in items])
        assert parse_items(text, "steps") == items
        for at in range(len(text)):
            got = parse_items(text[:at], "steps")
            assert got == items[: len(got)]
        assert parse_items(text[: text.index('"s2"')], "steps") == items[:2]
        assert parse_items("not json", "steps") == []


class TestOlderFiles:
    async def test_a_trail_written_in_another_format_is_read_and_rewritten_whole(
        self, tmp_path: Path
    ) -> None:
        """A session's trail.json from an older version (compact JSON): its steps are read,
        the document is rewritten whole once, and appended to from then on."""
        store = FilesystemSessionStore(tmp_path)
        steps = [step(0).model_dump(mode="json"), step(1).model_dump(mode="json")]
        store.write_text(SID, "artifacts/trail.json", json.dumps({**HEAD, "steps": steps}))
        activities = StoreActivities(store, TranscriptLogs(store))
        turn = PersistTurnInput(
            session_id=SID,
            workflow="w",
            spec_hash="h",
            spec=SPEC,
            state="s",
            status="completed",
            trail=[step(2)],
            trail_base=2,
            variables={},
            usage=Usage(),
        )
        await ActivityEnvironment().run(activities.persist_turn, turn)
        expected = whole(HEAD, "steps", [*steps, step(2).model_dump(mode="json")])
        assert store.read_text(SID, "artifacts/trail.json") == expected


class TestStores:
    async def test_a_store_that_does_not_append_gets_the_whole_documents(self) -> None:
        """A store without in-place writes (memory, an object store) is written whole, as
        before, and holds the same documents."""
        store = MemorySessionStore()
        logs = TranscriptLogs(store)
        activities = StoreActivities(store, logs)
        log, messages = TranscriptLog(), conversation(3)
        for n in range(3):
            conv, end = logs.extend(SID, log, messages[4 * n : 4 * n + 4])
            log = TranscriptLog(base=len(conv), base_hash=end)
            turn = PersistTurnInput(
                session_id=SID,
                workflow="w",
                spec_hash="h",
                spec=SPEC,
                state="s",
                status="completed",
                trail=[step(n)],
                trail_base=n or None,
                variables={},
                usage=Usage(),
                log=log,
            )
            await ActivityEnvironment().run(activities.persist_turn, turn)
        dumped = [
            m.model_dump(mode="json", exclude_none=True, exclude_defaults=True) for m in messages
        ]
        assert store.read_text(SID, "artifacts/trajectory.json") == whole(HEAD, "messages", dumped)
        steps = [step(n).model_dump(mode="json") for n in range(3)]
        assert store.read_text(SID, "artifacts/trail.json") == whole(HEAD, "steps", steps)

    async def test_a_wrapping_store_whose_writes_are_always_durable_is_appended_to(
        self, tmp_path: Path
    ) -> None:
        """A store that passes ``append_at`` on but whose ``write_if`` takes no ``durable``
        (a counting wrapper) is appended to, and its writes stay durable."""

        class Wrapper:
            def __init__(self, inner: FilesystemSessionStore) -> None:
                self._inner = inner
                self.calls: list[str] = []

            def write_if(
                self, session_id: str, path: str, data: bytes, *, version: str | None
            ) -> str:
                self.calls.append(f"write_if {path}")
                return self._inner.write_if(session_id, path, data, version=version)

            def append_at(self, *args: Any, **kwargs: Any) -> str:
                self.calls.append(f"append_at {args[1]}")
                return self._inner.append_at(*args, **kwargs)

            def __getattr__(self, name: str) -> Any:
                return getattr(self._inner, name)

        session = Session(tmp_path)
        wrapper = Wrapper(FilesystemSessionStore(tmp_path))
        session.store = StoreActivities(cast(SessionStore, wrapper), session.logs)
        for n in range(3):
            await persisted_turn(session, n)
        assert "append_at artifacts/trail.json" in wrapper.calls
        assert "append_at artifacts/trajectory.json" in wrapper.calls
        trail, trajectory = session.expected()
        assert artifact_path(tmp_path, "trail.json").read_text() == trail
        assert artifact_path(tmp_path, "trajectory.json").read_text() == trajectory

    def test_append_at_writes_nothing_over_another_version(self, tmp_path: Path) -> None:
        store = FilesystemSessionStore(tmp_path)
        store.write_text(SID, "artifacts/x.json", "0123456789")
        version = store.version_of(SID, "artifacts/x.json")
        assert version is not None
        store.write_text(SID, "artifacts/x.json", "abcdefghij")  # another writer
        with pytest.raises(StoreConflictError):
            store.append_at(SID, "artifacts/x.json", 5, b"!", version=version)
        assert store.read_text(SID, "artifacts/x.json") == "abcdefghij"
        current = store.version_of(SID, "artifacts/x.json")
        assert current is not None
        before = DISK.snapshot()
        new = store.append_at(SID, "artifacts/x.json", 5, b"XY", version=current, durable=False)
        assert store.read_text(SID, "artifacts/x.json") == "abcdeXY"
        assert new == store.version_of(SID, "artifacts/x.json") != current
        after = DISK.snapshot()
        assert (after["bytes"] - before["bytes"], after["fsyncs"] - before["fsyncs"]) == (2, 0)
