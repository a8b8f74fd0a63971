"""activities/artifact_cache.py and the growing artifacts of ``persist_turn``.

The two documents that grow with a session (``trail.json``, ``trajectory.json``) are rendered
from cached item texts; these tests hold them byte for byte to what serializing the whole
document gives, over turns, after a worker restart (an empty cache), and when the files or the
log changed under the cache (another worker, a reset).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.artifact_cache import ArtifactCache, Texts, item_text, render
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.store import StoreActivities
from archmax_temporal.workflows.models import (
    CheckpointInput,
    Message,
    PersistTurnInput,
    SessionInput,
    TranscriptLog,
    Usage,
)
from tests.support.artifacts import SID, SPEC, Session, step, whole

HEAD = {"sessionId": "s ✓", "workflow": "w"}


class TestRender:
    @pytest.mark.parametrize(
        "items",
        [
            [],
            [{}],
            [[]],
            [{"a": 1}],
            [
                {"role": "user", "content": 'line\nnext "quoted" ünï ✓ \\ \t'},
                {"x": [1, {"y": None}]},
            ],
            [1, "two", None, 3.5, True],
            [{"nested": {"deep": {"deeper": [{"k": "v"}, []]}}}],
        ],
    )
    def test_render_is_what_dumping_the_whole_document_gives(self, items: list[Any]) -> None:
        assert render(HEAD, "steps", [item_text(i) for i in items]) == whole(HEAD, "steps", items)

    def test_the_cache_is_bounded_in_characters_least_recent_out(self) -> None:
        cache = ArtifactCache(budget=100)
        cache.put("a", "trail", Texts(items=["x" * 40]))
        cache.put("b", "trail", Texts(items=["x" * 40]))
        assert cache.get("a", "trail") is not None  # a is now the most recent
        cache.put("c", "trail", Texts(items=["x" * 40]))
        assert cache.get("b", "trail") is None
        assert cache.get("a", "trail") is not None and cache.get("c", "trail") is not None
        cache.put("d", "trail", Texts(items=["x" * 101]))  # larger than all: not kept
        assert cache.get("d", "trail") is None


class TestPersistTurn:
    async def test_the_artifacts_are_the_whole_documents_turn_after_turn(
        self, tmp_path: Path
    ) -> None:
        session = Session(tmp_path)
        for n in range(6):
            if n == 3:
                session.restart()  # the cache empty: read back from the store
            await session.turn(n)
            trail, trajectory = session.expected()
            assert session.artifact("trail.json") == trail
            assert session.artifact("trajectory.json") == trajectory
        assert len(json.loads(session.artifact("trajectory.json"))["messages"]) == 24

    async def test_a_trail_written_by_another_worker_is_read_back(self, tmp_path: Path) -> None:
        """The cached texts vouch only for the file this worker wrote: another worker's
        write (a step this worker never saw) is read from the file."""
        session = Session(tmp_path)
        await session.turn(0)
        other = Session(tmp_path)
        other.steps, other.persisted, other.log = list(session.steps), 1, session.log
        other.messages = list(session.messages)
        other.steps.append(step(99))  # only the other worker knows this step
        await other.turn(1)
        session.steps, session.persisted = list(other.steps), other.persisted
        session.messages, session.log = list(other.messages), other.log
        await session.turn(2)
        trail, trajectory = session.expected()
        assert session.artifact("trail.json") == trail
        assert "s99" in session.artifact("trail.json")
        assert session.artifact("trajectory.json") == trajectory

    async def test_a_rewound_log_is_not_answered_from_the_cache(self, tmp_path: Path) -> None:
        """A reset rewinds the conversation: the log's new branch differs from what the cache
        holds, and the trajectory follows the log, not the cache."""
        session = Session(tmp_path)
        await session.turn(0)
        await session.turn(1)
        # rewind to after turn 0 and take another turn 1
        session.messages = session.messages[:4]
        digests = session.logs.chain(SID, session.log)[1]
        session.log = TranscriptLog(base=3, base_hash=digests[2])
        session.steps, session.persisted = session.steps[:1], 1
        branch = Message(role="user", content="another branch")
        conv, end = session.logs.extend(SID, session.log, [session.messages[3], branch])
        session.messages.append(branch)
        session.log = TranscriptLog(base=len(conv), base_hash=end)
        session.steps.append(step(7))
        await session.persist([])
        trail, trajectory = session.expected()
        assert session.artifact("trajectory.json") == trajectory
        assert "another branch" in session.artifact("trajectory.json")
        assert "turn 1" not in session.artifact("trajectory.json")
        assert session.artifact("trail.json") == trail


def _attempt(at: datetime, attempt: int) -> ActivityEnvironment:
    """An activity environment whose attempt was scheduled at ``at``."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, current_attempt_scheduled_time=at, attempt=attempt)
    return env


def _turn(state: str) -> PersistTurnInput:
    return PersistTurnInput(
        session_id=SID,
        workflow="w",
        spec_hash="h",
        spec=SPEC,
        state=state,
        status="completed",
        trail=[step(0)],
        variables={},
        usage=Usage(),
    )


class TestZombies:
    """An attempt whose activity timed out keeps running (a zombie) after its retry, or the
    next turn, wrote: nothing it writes afterwards lands."""

    T0 = datetime(2026, 1, 1, tzinfo=UTC)

    def _state(self, store: FilesystemSessionStore) -> str:
        return str(json.loads(store.read_text(SID, "artifacts/metadata.json"))["state"])

    async def test_an_older_attempt_writes_nothing_over_a_newer_one(self, tmp_path: Path) -> None:
        store = FilesystemSessionStore(tmp_path)
        retry = _attempt(self.T0 + timedelta(seconds=30), 2)
        await retry.run(StoreActivities(store).persist_turn, _turn("newer"))
        zombie = _attempt(self.T0, 1)
        await zombie.run(StoreActivities(store).persist_turn, _turn("zombie"))
        assert self._state(store) == "newer"
        later = _attempt(self.T0 + timedelta(seconds=60), 1)
        await later.run(StoreActivities(store).persist_turn, _turn("next turn"))
        assert self._state(store) == "next turn"

    async def test_a_zombie_that_read_the_versions_first_loses_its_writes(
        self, tmp_path: Path
    ) -> None:
        """The zombie read every document's version, then the newer attempt claimed and
        wrote: each of the zombie's conditional puts fails, and it stops."""
        store = FilesystemSessionStore(tmp_path)
        zombie = StoreActivities(store)
        await _attempt(self.T0 - timedelta(seconds=30), 1).run(zombie.persist_turn, _turn("old"))
        newer = StoreActivities(store)
        await _attempt(self.T0 + timedelta(seconds=30), 2).run(newer.persist_turn, _turn("newer"))
        # the zombie holds the versions it wrote itself: all stale now
        await _attempt(self.T0, 1).run(zombie.persist_turn, _turn("zombie"))
        assert self._state(store) == "newer"

    async def test_a_checkpoint_of_an_older_attempt_is_not_written(self, tmp_path: Path) -> None:
        store = FilesystemSessionStore(tmp_path)
        await _attempt(self.T0 + timedelta(seconds=30), 1).run(
            StoreActivities(store).persist_turn, _turn("newer")
        )
        checkpoint = CheckpointInput(
            session_id=SID,
            checkpoint=SessionInput(session_id=SID, workflow="w", spec=SPEC, spec_hash="h"),
        )
        await _attempt(self.T0, 1).run(StoreActivities(store).checkpoint, checkpoint)
        assert not store.exists(SID, "checkpoints/session.json")
