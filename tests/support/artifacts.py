"""A session's turns persisted by ``persist_turn`` as the workflow sends them, and the whole
documents (``trail.json``, ``trajectory.json``) its artifacts must equal byte for byte: for the
tests of the artifact cache and of what a turn appends to the store."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.store import StoreActivities
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.workflows.identity import folder_name
from archmax_temporal.workflows.models import (
    Message,
    PersistTurnInput,
    ToolCall,
    TrailStep,
    TranscriptLog,
    Usage,
)
from archmax_temporal.workflows.spec import parse_spec

SPEC = parse_spec({"states": {"s": {"triggers": {"manual": None}}}})
SID = "artifact-cache-1"


def whole(head: dict[str, Any], key: str, items: list[Any]) -> str:
    return json.dumps({**head, key: items}, indent=2, ensure_ascii=False, default=str) + "\n"


def step(n: int) -> TrailStep:
    return TrailStep(
        to=f"s{n}", kind="agent", reason=f"step {n} ✓", ts=datetime(2026, 1, 1, tzinfo=UTC)
    )


def conversation(turns: int) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out += [
            Message(role="user", content=f"turn {n} ünï"),
            Message(
                role="assistant",
                tool_calls=[ToolCall(id=f"c{n}", name="read_file", arguments='{"path": "a"}')],
            ),
            Message(role="tool", tool_call_id=f"c{n}", content="1\tline\n" * 3),
            Message(role="assistant", content=f"done {n}"),
        ]
    return out


class Session:
    """One session's turns persisted as the workflow sends them: the log extended by the
    model calls, the trail appended, ``trail_base`` and ``log`` where the store stands."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = TranscriptLogs(FilesystemSessionStore(root))
        self.store = StoreActivities(FilesystemSessionStore(root), self.logs)
        self.messages: list[Message] = []
        self.log = TranscriptLog()
        self.steps: list[TrailStep] = []
        self.persisted = 0

    def restart(self) -> None:
        """A new worker process: nothing cached."""
        self.logs = TranscriptLogs(FilesystemSessionStore(self.root))
        self.store = StoreActivities(FilesystemSessionStore(self.root), self.logs)

    async def turn(self, n: int, *, unlogged: int = 1) -> None:
        new = conversation(n + 1)[4 * n :]
        self.messages = [*self.messages, *new]
        pending = self.messages[self.log.base :]  # the previous turn's unlogged come first
        conv, end = self.logs.extend(SID, self.log, pending[: len(pending) - unlogged])
        before = self.log
        self.log = TranscriptLog(base=len(conv), base_hash=end)
        self.steps.append(step(n))
        await self.persist(new[len(new) - unlogged :])
        assert before.base <= self.log.base
        self.persisted = len(self.steps)

    async def persist(self, unlogged: list[Message]) -> None:
        """``persist_turn`` as the workflow sends it: the trail steps and messages the store
        does not hold yet, and where its trail and log stand."""
        await ActivityEnvironment().run(
            self.store.persist_turn,
            PersistTurnInput(
                session_id=SID,
                workflow="w",
                spec_hash="h",
                spec=SPEC,
                state="s",
                status="completed",
                trail=self.steps[self.persisted :],
                trail_base=self.persisted or None,
                variables={},
                usage=Usage(),
                transcript=unlogged,
                log=self.log,
            ),
        )

    def artifact(self, name: str) -> str:
        return (self.root / folder_name(SID) / "artifacts" / name).read_text(encoding="utf-8")

    def expected(self) -> tuple[str, str]:
        head = {"sessionId": SID, "workflow": "w"}
        return (
            whole(head, "steps", [s.model_dump(mode="json") for s in self.steps]),
            whole(
                head,
                "messages",
                [
                    m.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
                    for m in self.messages
                ],
            ),
        )
