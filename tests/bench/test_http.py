"""bench.http does not rot: both modes fire in turns, round by round (:mod:`bench.http`)."""

from __future__ import annotations

from temporalio.client import Client

from bench.http import measure, parse_args


async def test_modes_take_turns(client: Client) -> None:
    args = parse_args(["--n", "4", "--rounds", "2", "--concurrency", "2", "--warmup", "0"])
    text = await measure(client, args)
    assert "| firings/s per round: median (min-max) |" in text, text
    assert "n=4 a mode in 2 rounds" in text
    row = next(line for line in text.splitlines() if line.startswith("| p50 latency"))
    assert row.count("|") == 5 and row.endswith("x |"), text
