"""The CLI talks while a turn runs: a one-line status on a terminal (elapsed time, what is
in flight), gone when the turn ends; times read relative, then local."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from temporalio.client import WorkflowExecution
from temporalio.common import TypedSearchAttributes

from archmax_temporal.client.cli.render import StatusLine, summary_detail, summary_line
from archmax_temporal.client.events import SessionEvent
from archmax_temporal.client.times import span, when
from archmax_temporal.client.visibility import NO_WORKER, listed_summary
from archmax_temporal.workflows.models import ListedSession

ERASE = "\r\x1b[2K"


def _event(kind: str, **data: Any) -> SessionEvent:
    return SessionEvent(type=kind, ts=datetime.now(UTC), seq=1, session_id="s", data=data)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_status_follows_the_turn_and_is_erased_at_its_end() -> None:
    stream, clock = io.StringIO(), Clock()
    status = StatusLine(stream, clock)
    seen = []
    for event, elapsed in (
        (_event("turn-start"), 0.2),
        (_event("state-enter", state="clarify"), 1.0),
        (_event("model-usage", model="m"), 3.4),
        (_event("tool-called", tool="read_file", callId="c1", args={}), 3.5),
        (_event("tool-result", tool="read_file", callId="c1", status="ok"), 4.0),
        (_event("hook-start", phase="after", state="clarify", hook="check.js"), 75.0),
    ):
        clock.now = 100.0 + elapsed
        status.saw(event)
        seen.append(status.text())
    assert seen == [
        "  ⋯ 0 s · model call",
        "  ⋯ 1 s · model call in state clarify",
        "  ⋯ 3 s · the model's answer",
        "  ⋯ 4 s · tool read_file",  # 3.5 s rounds to even
        "  ⋯ 4 s · model call in state clarify",
        "  ⋯ 1 min · after hook check.js",
    ]
    drawn = stream.getvalue()
    assert drawn.count(ERASE) == len(seen) and drawn.endswith(seen[-1])
    status.clear()
    assert stream.getvalue().endswith(seen[-1] + ERASE)  # the line is gone
    status.clear()
    assert stream.getvalue().count(ERASE) == len(seen) + 1  # erased once only


def test_times_read_relative_then_local() -> None:
    now = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
    local = (now + timedelta(hours=23)).astimezone().strftime("%a %H:%M")
    assert when(now + timedelta(hours=23), now) == f"in 23 h ({local})"
    past = (now - timedelta(minutes=12)).astimezone().strftime("%a %H:%M")
    assert when(now - timedelta(minutes=12), now) == f"12 min ago ({past})"
    far = (now + timedelta(days=9)).astimezone().strftime("%Y-%m-%d %H:%M")
    assert when(now + timedelta(days=9), now) == f"in 9 d ({far})"
    assert [span(s) for s in (0.4, 59, 90, 5400, 86400 * 2.4)] == [
        "0 s",
        "59 s",
        "2 min",
        "2 h",
        "2 d",
    ]


class _Listed:
    """A workflow execution as visibility lists it, no worker answering: its id, the listing
    the session published in its memo, and no search attributes."""

    def __init__(self, session_id: str, listed: ListedSession) -> None:
        self.id = session_id
        self.typed_search_attributes = TypedSearchAttributes.empty
        self._listed = listed

    async def memo_value(self, key: str, default: Any = None, *, type_hint: Any = None) -> Any:
        return self._listed


class TestNoWorkerPolling:
    async def _shown(self, status: str) -> str:
        execution = cast(WorkflowExecution, _Listed(f"s-{status}", ListedSession(status=status)))
        summary = await listed_summary(execution, polled=False)
        return summary_detail(summary) + "\n" + summary_line(summary)

    async def test_a_finished_session_waits_on_no_worker(self) -> None:
        """A completed, failed or rejected session says nothing of workers: none is needed."""
        for status in ("completed", "failed", "rejected"):
            shown = await self._shown(status)
            assert f"status    {status} (finished)" in shown
            assert "no worker is polling" not in shown

    async def test_an_open_session_says_no_worker_polls(self) -> None:
        """A parked or running one still says so: its wake or its turn waits for a worker."""
        for status in ("running", "awaiting_input", "awaiting_decision"):
            assert NO_WORKER in await self._shown(status)
