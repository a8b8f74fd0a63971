"""bench.streaming does not rot: its ``--quick`` run on the suite's dev server, and what it
must find: first text well before the whole message, and not one history byte more per
model step with streaming on (:mod:`bench.streaming`)."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from bench.streaming import QUICK, equal, measure, render


async def test_quick_run_sees_text_early_and_equal_histories(
    client: Client, tmp_path: Path
) -> None:
    report = await measure(client, QUICK, tmp_path)
    on, off = report.on, report.off
    assert len(on.turns) == len(off.turns) == QUICK.turns
    (turn,) = on.turns
    assert turn.first_text is not None and turn.whole is not None
    assert turn.deltas >= 2
    assert turn.first_text < turn.whole - 0.1  # 10 chunks, 30 ms apart
    assert all(t.first_text is None and t.deltas == 0 for t in off.turns)
    assert on.model_steps == off.model_steps == 2 * (QUICK.turns + 1)
    assert on.history_bytes > 0 and on.model_step_bytes > 0
    # Streaming adds nothing to the history: the same steps, the same bytes to within what
    # a loaded machine changes (a model call retried records its failure in the next
    # attempt's started event, on either side); exactly equal on a quiet run.
    assert on.model_steps == off.model_steps
    assert abs(on.model_step_bytes - off.model_step_bytes) <= 0.02 * off.model_step_bytes
    assert abs(on.history_bytes - off.history_bytes) <= 0.02 * off.history_bytes
    text = render(report)
    assert (
        "first text / whole message" in text
        and f"equal                          {equal(report)}" in text
    )
