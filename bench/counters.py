"""What a bench counts outside Temporal: ``os.fsync`` calls in this process and the bytes a
folder store keeps on disk.

:func:`install_fsync_counter` wraps ``os.fsync`` once for the whole process, so every fsync
of the in-process workers (the folder store's ``atomic_write`` and ``create_only``, which
call ``os.fsync`` through the module) is counted, from any thread; :func:`fsyncs` reads the
count. The wrapper only counts: it calls the real ``os.fsync``.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

_lock = threading.Lock()
_count = [0]
_real_fsync = os.fsync


def _counting_fsync(fd: int) -> None:
    with _lock:
        _count[0] += 1
    _real_fsync(fd)


def install_fsync_counter() -> None:
    """Count every ``os.fsync`` of this process from now on (idempotent)."""
    if os.fsync is not _counting_fsync:
        setattr(os, "fsync", _counting_fsync)  # noqa: B010 (a module attribute, on purpose)


def fsyncs() -> int:
    """``os.fsync`` calls counted so far (0 before :func:`install_fsync_counter`)."""
    with _lock:
        return _count[0]


def tree_bytes(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (symlinks not followed; 0 if absent)."""
    total = 0
    for here, _dirs, files in os.walk(folder):
        for name in files:
            try:
                info = os.lstat(os.path.join(here, name))
            except FileNotFoundError:  # a temporary renamed away meanwhile
                continue
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def bytes_written() -> int:
    """Bytes this process has caused to be written to storage so far (``write_bytes`` of
    ``/proc/self/io``: file writes, counted in pages as they are dirtied; sockets and pipes
    are not in it). In a bench it is the in-process worker's store writes; 0 where the
    kernel does not say."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
