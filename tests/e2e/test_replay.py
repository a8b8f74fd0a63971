"""Determinism: recorded session histories replay against the current workflow code.

Every release's golden histories (``tests/histories/<version>/``, see :mod:`tests.support.golden`)
guard the sessions that release left in flight, parked ones included: a change to the order
of commands that is not behind ``workflow.patched`` fails here before it reaches them. The
scenarios that recorded them also run fresh, so the current code replays its own histories.
Each replays twice: as the worker runs the workflow (unsandboxed), and in Temporal's sandbox
with archmax's workflow code inside it, where a call to the clock, randomness, the environment
or a file fails the replay (:func:`archmax_temporal.worker.checking_runner`).
"""

from __future__ import annotations

import re

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.support.golden import SCENARIOS, Golden, bench_on, goldens, record, replayer

GOLDENS = goldens()

RUNNERS = ["as-the-worker-runs", "in-the-checking-sandbox"]
"""The two replays of every history: ``workflow_runner`` and ``checking_runner``."""

PARKED = {
    # the last thing each of these sessions did before the history was taken
    "bank-parked-on-timer": EventType.EVENT_TYPE_TIMER_STARTED,
    "desk-sub-workflow-parked-child": EventType.EVENT_TYPE_TIMER_STARTED,
    "desk-parked-on-sub-workflow": EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
}


class TestGoldenHistories:
    """The committed histories of every release."""

    def test_each_lives_in_a_release_directory(self) -> None:
        """Histories sit under a version directory, the release that recorded them."""
        assert GOLDENS, "no golden histories found"
        for golden in GOLDENS:
            assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)?", golden.release), golden.path
        assert {g.release for g in GOLDENS} >= {"0.1.0"}

    def test_parked_sessions_are_among_them(self) -> None:
        """Sessions recorded while parked (a timer, a decision, a sub-workflow) are kept, and
        their histories really stop with the session waiting."""
        names = {g.name for g in GOLDENS}
        assert set(PARKED) | {"refund-parked-for-decision", "bank-woken-by-timer"} <= names
        for golden in GOLDENS:
            events = golden.history().events
            kinds = [e.event_type for e in events]
            closed = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW in kinds or any(
                k == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED for k in kinds
            )
            if golden.name in PARKED:
                assert PARKED[golden.name] in kinds, golden.id
                assert not closed, golden.id

    @pytest.mark.parametrize("checking", [False, True], ids=RUNNERS)
    @pytest.mark.parametrize("golden", GOLDENS, ids=[g.id for g in GOLDENS])
    async def test_replays_on_the_current_code(self, golden: Golden, checking: bool) -> None:
        """A history an earlier (or this) release recorded replays without divergence, as the
        worker runs the workflow and in the checking sandbox (no clock, randomness, environment
        or file read by workflow code)."""
        history = golden.history()
        assert len(history.events) > 10
        result = await replayer(checking=checking).replay_workflow(
            history, raise_on_replay_failure=False
        )
        assert result.replay_failure is None, f"{golden.id}: {result.replay_failure}"

    def test_a_recorded_history_is_never_overwritten(self) -> None:
        """Recording a name the release already holds writes nothing."""
        golden = GOLDENS[0]
        before = golden.path.read_bytes()
        assert record(golden.name, golden.history(), release=golden.release) is None
        assert golden.path.read_bytes() == before


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_a_fresh_recording_replays(client: Client, scenario: str) -> None:
    """Each scenario's session, run now, replays on the code that ran it (what
    ``python -m tests.support.golden`` keeps for the current release)."""
    with bench_on(client) as bench:
        histories = await SCENARIOS[scenario](bench)
    assert histories
    for name, history in histories.items():
        for checking in (False, True):
            result = await replayer(checking=checking).replay_workflow(
                history, raise_on_replay_failure=False
            )
            failure = result.replay_failure
            assert failure is None, f"{name} ({RUNNERS[checking]}): {failure}"
