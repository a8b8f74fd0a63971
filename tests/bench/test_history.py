"""bench.history does not rot, and counts what a skeptic asks for: every run of a
continue-as-new chain, the bytes archmax keeps in its store beside the history, the bare
floor with the contenders' activity pattern, parking and listing interleaved
(:mod:`bench.history`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from bench.history import (
    ARCHMAX,
    BARE,
    BARE_AGENT,
    BARE_ONE,
    BARE_WAITING,
    PARKED_SESSION,
    measure,
    parse_args,
    render,
)


@pytest.fixture
def host_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The bench sets ARCHMAX_TASK_QUEUE / ARCHMAX_STORE as a host does: restored after."""
    monkeypatch.setenv("ARCHMAX_TASK_QUEUE", "unused")
    monkeypatch.setenv("ARCHMAX_STORE", str(tmp_path / "unused"))


@pytest.mark.usefixtures("host_env")
async def test_steps_and_turns_sum_every_run_and_show_the_store(client: Client) -> None:
    """Two model calls a run: a 3-step turn (4 model calls) and 3 one-step turns cross
    continue-as-new, and every run of the chain is in the figure, not the last one alone."""
    args = parse_args(
        [
            "--sections",
            "history,turns",
            "--ks",
            "3",
            "--turns",
            "3",
            "--peers",
            "none",
            "--model-calls-per-run",
            "2",
        ]
    )
    report = await measure(client, args)
    text = render(report)
    assert not report.failures, text
    by = {(run.contender, run.k): run for run in report.steps}
    ours, floor, one = by[(ARCHMAX, 3)], by[(BARE, 3)], by[(BARE_ONE, 3)]
    assert ours.ok and floor.ok and one.ok, text
    assert ours.figure is not None and ours.latest is not None
    assert ours.figure.runs >= 2, text
    assert ours.figure.bytes > ours.latest.bytes, text  # the earlier runs are counted
    assert ours.store_bytes > 0 and ours.fsyncs, text  # the turn's store, beside it
    assert ours.total_per_step == pytest.approx((ours.figure.bytes + ours.store_bytes) / 3)
    assert floor.store_bytes == 0 and floor.fsyncs is None
    assert floor.figure is not None and one.figure is not None
    assert floor.figure.runs == one.figure.runs == 1
    # the floor runs a model and a tool activity per step (and the answer): 7 activities
    # where the one-activity floor runs 3; each adds its 3 events and a workflow task's 3
    assert floor.figure.events - one.figure.events == 4 * 6, text
    turns = report.turns
    assert turns is not None and turns.figure is not None
    assert turns.done == 3 and turns.figure.runs >= 2, text
    assert turns.figure.bytes > turns.latest_bytes
    assert len(turns.fsyncs) == 3 and min(turns.fsyncs) > 0, text
    assert len(turns.written) == 3 and ours.written is not None  # 0 where the kernel is silent
    assert turns.store_bytes > 0 and len(turns.store_growth) == 3
    assert "history+store/step" in text and "history bytes, the last run alone" in text
    assert "fsyncs per turn" in text
    assert "| history + store bytes/step, K = 3 |" in text  # the side-by-side table


@pytest.mark.usefixtures("host_env")
async def test_parking_and_listing_interleaved_and_repeated(client: Client) -> None:
    args = parse_args(
        [
            "--sections",
            "parked,list",
            "--parked",
            "4",
            "--park-warmup",
            "1",
            "--settle",
            "0",
            "--list-repeats",
            "2",
        ]
    )
    report = await measure(client, args)
    text = render(report)
    assert not report.failures, text
    kinds = {p.label: p for p in report.parking}
    assert set(kinds) == {BARE_WAITING, BARE_AGENT, PARKED_SESSION}, text
    for parked in kinds.values():
        assert parked.error is None, text
        (point,) = parked.points
        assert point.n == 4 and len(point.chunk_rates) == 4 and point.cpu_ms_each > 0, text
    # the same activity pattern: one model call per parked session and per bare agent
    assert kinds[PARKED_SESSION].points[0].model_calls_each == 1, text
    assert kinds[BARE_AGENT].points[0].model_calls_each == 1, text
    assert kinds[BARE_WAITING].points[0].model_calls_each == 0, text
    listing = report.listing
    assert listing is not None and listing.error is None, text
    assert listing.agent_listed == listing.bare_listed == listing.cli_lines == 5, text
    for times in (listing.agent_list_ms, listing.bare_list_ms, listing.cli_ms, listing.help_ms):
        assert len(times) == 2
    assert "| archmax ÷ | N | KiB each | parked/s | worker CPU per park |" in text, text
    assert "(a process: the floor)" in text
    assert f"| worker CPU ms per park, N = 4 (vs the {BARE_AGENT}) |" in text, text
    assert f"| worker CPU ms per park, N = 4 (vs the {BARE_WAITING}) |" in text, text
    assert "| list 5, ms (median of 2) |" in text
    # the parking targets are held to the floor with a parked session's activity pattern
    assert "≥ 0.6x bare agent" in text and "≤ 2x bare agent" in text, text
