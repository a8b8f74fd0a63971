"""bench.overhead does not rot: its sides are measured in turns within each sample, and its
table says what each side ran (:mod:`bench.overhead`)."""

from __future__ import annotations

from temporalio.client import Client

from bench.overhead import interleave, measure, parse_args, rotated


def test_sides_take_turns_and_orders_rotate() -> None:
    assert interleave(["a1", "a2", "a3"], ["b1", "b2"], archmax_first=True) == [
        "a1", "b1", "a2", "b2", "a3",
    ]  # fmt: skip
    assert interleave(["a1", "a2"], ["b1", "b2"], archmax_first=False) == ["b1", "a1", "b2", "a2"]
    assert rotated([1, 2, 3], 1) == [2, 3, 1]
    assert rotated([1, 2, 3], 3) == [1, 2, 3]


async def test_one_sample_fills_every_row(client: Client) -> None:
    text = await measure(
        client, parse_args(["--n", "1", "--warmup", "0", "--steps", "3", "--parked", "2"])
    )
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if " | " in line}
    for figure in (
        "model-only step (one more, paired)",
        "read_file step (one more, paired)",
        "first turn (new session), 1 model call",
        "later turn, 1 model call",
    ):
        cells = rows[figure].split(" | ")
        # one sample a side, both bare floors (ratios: noise)
        assert "n/a" not in (cells[1], cells[2], cells[4]), text
    # what each side ran, read off the histories: two reads against two reads
    read_turn = rows["turn of 2 read_file steps (3 model calls)"]
    assert "read_file ×2" in read_turn and "bench.read ×2" in read_turn, text
    assert "bench.noop ×1; bench.model ×1" in rows["later turn, 1 model call"], text
    # the bare agent calls the model as often as archmax does, and reads as often
    assert "bench.model ×3, bench.read ×2" in read_turn, text
    assert "fewer than 5 samples" in text
    fsyncs = rows["fsyncs, later 1-call turn: median (min-max)"]
    assert fsyncs.split(" | ")[1] != "n/a", text
    written = rows["bytes written to files, later 1-call turn: median (min-max)"]
    assert written.split(" | ")[1].endswith(")"), text
    # parking: archmax, the bare waiting workflow and the bare agent each parked two
    rate = rows["parked per second (8 at a time, in blocks)"].split(" | ")
    assert all(float(rate[i]) > 0 for i in (1, 2, 4)), text
