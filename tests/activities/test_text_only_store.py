"""activities/text_only_store.py: a store that takes text only."""

from __future__ import annotations

import pytest

from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.store_errors import StoreCapabilityError
from archmax_temporal.activities.text_only_store import TextOnlyStore

SID = "chat-42"


class TestTextOnly:
    def test_refuses_binary_and_writes_nothing(self) -> None:
        inner = MemorySessionStore()
        store = TextOnlyStore(inner)
        with pytest.raises(StoreCapabilityError, match=r"scratchpad/a\.pdf") as caught:
            store.write_bytes(SID, "scratchpad/a.pdf", b"%PDF\xff\xfe")
        assert caught.value.path == "scratchpad/a.pdf"
        with pytest.raises(StoreCapabilityError):
            store.write_bytes(SID, "scratchpad/nul.txt", b"a\x00b")
        assert inner.walk(SID, "") == []

    def test_takes_utf8_bytes(self) -> None:
        store = TextOnlyStore(MemorySessionStore())
        store.write_bytes(SID, "scratchpad/a.txt", "ünïcode".encode())
        assert store.read_text(SID, "scratchpad/a.txt") == "ünïcode"
