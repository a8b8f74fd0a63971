"""The memory of texts by digest a worker process keeps (:mod:`archmax_temporal.workflows.
known_texts`): bounded, least recently used dropped first."""

from __future__ import annotations

from archmax_temporal.workflows.known_texts import Kept


def test_the_least_recently_used_entry_is_dropped_first() -> None:
    kept: Kept[str, str] = Kept(2)
    kept.put("a", "A")
    kept.put("b", "B")
    assert kept.get("a") == "A"  # now the most recently used
    kept.put("c", "C")
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == ("A", None, "C")
    kept.put("a", "A")  # put again: most recently used, nothing dropped
    kept.put("d", "D")
    assert (kept.get("a"), kept.get("c"), kept.get("d")) == ("A", None, "D")


def test_clear_forgets_every_entry() -> None:
    kept: Kept[str, str] = Kept(4)
    for key in "abc":
        kept.put(key, key.upper())
    kept.clear()
    assert [kept.get(key) for key in "abc"] == [None, None, None]
