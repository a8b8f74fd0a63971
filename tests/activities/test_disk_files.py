"""activities/disk_files.py: files on disk as a folder store reads and writes them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from archmax_temporal.activities.disk_files import (
    DISK,
    atomic_write,
    create_only,
    disk_tally,
    file_version,
    read_regular_versioned,
)
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.store_errors import WorkspaceError

SID = "chat-42"


class TestOnlyRegularFiles:
    async def test_a_named_pipe_is_refused_at_once_never_waited_on(self, tmp_path: Path) -> None:
        """A FIFO in a session folder (no writer) would block a plain read forever: it is
        refused as not a regular file, by read and by grep's reads alike."""
        store = FilesystemSessionStore(tmp_path / "sessions")
        store.write_text(SID, "scratchpad/ok.txt", "fine")
        os.mkfifo(tmp_path / "sessions" / SID / "scratchpad" / "pipe")
        with pytest.raises(WorkspaceError, match="not a regular file") as raised:
            await asyncio.wait_for(
                asyncio.to_thread(store.read_text, SID, "scratchpad/pipe"), timeout=20
            )
        assert raised.value.path == "scratchpad/pipe"
        assert store.read_text(SID, "scratchpad/ok.txt") == "fine"


class TestWrites:
    def test_create_only_writes_once_and_counts_what_it_wrote(self, tmp_path: Path) -> None:
        target = tmp_path / "a" / "doc.json"
        with disk_tally() as tally:
            assert create_only(target, b"first", durable=False)
            assert not create_only(target, b"second", durable=False)
        assert target.read_bytes() == b"first"
        assert tally.snapshot()["fsyncs"] == 0 and tally.snapshot()["writes"] == 2
        assert sorted(p.name for p in target.parent.iterdir()) == ["doc.json"]

    def test_atomic_write_is_counted_by_the_tally_and_the_process(self, tmp_path: Path) -> None:
        before = DISK.snapshot()
        with disk_tally() as tally:
            atomic_write(tmp_path / "x.txt", "héllo")
        assert tally.snapshot() == {"writes": 1, "bytes": len("héllo".encode()), "fsyncs": 1}
        after = DISK.snapshot()
        assert after["writes"] >= before["writes"] + 1
        data, version = read_regular_versioned(tmp_path / "x.txt", "x.txt")
        assert data == "héllo".encode()
        assert version == file_version((tmp_path / "x.txt").stat())
