"""bench.store does not rot: its ``--quick`` run on the suite's dev server and moto, and what
its counters must see (:mod:`bench.store`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from temporalio.client import Client

from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.transcript_log import COMPACT_EVERY
from archmax_temporal.workflows.contracts import MODEL_ACTIVITY
from bench.store import (
    HOST,
    QUICK,
    STEPS,
    CountingStore,
    checks,
    measure,
    render,
    request_kind,
    segments_read,
)
from tests.support.s3server import S3Server


def test_the_counting_store_counts_what_passes_and_offers_what_the_inner_store_has() -> None:
    inner = MemorySessionStore()
    store = CountingStore(inner)
    store.write_text("s-1", "scratchpad/a.md", "héllo")
    assert store.read_text("s-1", "scratchpad/a.md") == "héllo"
    version = store.version_of("s-1", "scratchpad/a.md")
    assert version is not None
    store.write_if("s-1", "scratchpad/a.md", b"bye", version=version)
    store.delete("s-1", "scratchpad/a.md")  # an optional method the memory store has
    assert getattr(store, "make_folder", None) is None  # one it lacks is not offered
    tally = store.take()
    assert tally.calls == Counter(
        {"write_text": 1, "read_text": 1, "version_of": 1, "write_if": 1, "delete": 1}
    )
    assert tally.written["scratchpad"] == len("héllo".encode()) + 3
    assert tally.read["scratchpad"] == len("héllo".encode())  # a version is no content
    assert store.take().total_calls == 0


def test_request_kinds() -> None:
    assert request_kind("GET", "/b?list-type=2&prefix=p/") == "LIST"
    assert request_kind("GET", "/b/p/k") == "GET"
    assert request_kind("POST", "/b?delete") == "DELETE"
    assert request_kind("HEAD", "/b/p/k") == "HEAD"


async def test_quick_run_is_flat_and_counts_real_requests(
    client: Client, s3_server: S3Server, s3_url: str, tmp_path: Path
) -> None:
    """The bench's ``--quick`` run: every turn makes its four model steps on both sides, the
    S3 side's requests are the server's own, store calls per step do not grow, and a fresh
    worker walks the log back in a bounded number of reads (the writers' compactions)."""
    report = await measure(client, s3_server, s3_url, QUICK, tmp_path)
    text = render(report)
    assert all(check.flat for check in checks(report)), text
    folder, s3 = report.sides
    for side in report.sides:
        for tally in side.turns.values():
            assert tally.steps == STEPS
            assert tally.by_activity[MODEL_ACTIVITY] >= STEPS  # each step writes its segment
        # between turns, only each worker's start reads (or creates) the store's identity
        assert set(side.between.calls) <= {"read_shared", "write_shared_once"}, text
        assert side.between.total_calls <= 4, text  # three worker starts, one first write
    for tally in s3.turns.values():
        assert tally.total_http > tally.total_calls, text  # a write checks before it puts
        assert set(tally.http) <= {"GET", "HEAD", "LIST", "PUT", "DELETE"}, tally.http
    for tally in folder.turns.values():
        assert tally.total_http == 0
    first = report.failovers[0]
    for side in report.sides:
        walked = segments_read(first.first[side.name])
        held = first.segments[side.name]
        assert 0 < walked <= 2 * COMPACT_EVERY and (walked < held or held <= COMPACT_EVERY), text
        assert segments_read(first.second[side.name]) == 0, text
    second = report.failovers[1]
    assert segments_read(second.first["S3"]) <= 2 * COMPACT_EVERY, text  # bounded
    assert "| store calls / model step |" in text
    assert HOST in text
