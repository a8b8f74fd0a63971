"""Files on disk as a folder store reads and writes them: regular files only, written whole
or not at all, and every write counted.

:func:`atomic_write` (temporary file, fsync, rename) and :func:`create_only` (a hard link that
fails when the name exists) write; :func:`read_regular_versioned` reads a regular file and its
:func:`file_version` without ever waiting on a pipe or following a symlink. :data:`DISK` counts
what this process wrote, :func:`disk_tally` what one activity wrote.
"""

from __future__ import annotations

import contextvars
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from archmax_temporal.activities.store_errors import WorkspaceError


def read_regular(path: Path, rel: str) -> bytes:
    """The bytes of the regular file at ``path`` (see :func:`read_regular_versioned`)."""
    return read_regular_versioned(path, rel)[0]


def file_version(info: os.stat_result) -> str:
    """A file's version for conditional writes: its inode, modification time and size (an
    atomic replace always makes a new inode)."""
    return f"{info.st_ino}-{info.st_mtime_ns}-{info.st_size}"


def read_regular_versioned(path: Path, rel: str) -> tuple[bytes, str]:
    """The bytes of the regular file at ``path`` (``rel``: its name in the session's terms)
    and its :func:`file_version`.
    Anything else there, a named pipe, a device or a socket, is refused at once with
    :class:`WorkspaceError`, never opened for a read that could wait forever; a symlink is not
    followed (``ELOOP``: :class:`SymlinkPathError` through :func:`os_error`)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
        if not stat.S_ISREG(info.st_mode):
            raise WorkspaceError(f"'{rel}' is not a regular file; only files are read", rel)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            return handle.read(), file_version(info)
    finally:
        if fd >= 0:
            os.close(fd)


class DiskCounters:
    """What this process's folder stores wrote (thread-safe): files written, the bytes in
    them, and the fsyncs asked of the disk. A benchmark reads :meth:`snapshot` before and after
    what it measures (``DISK.snapshot()``); an activity's own writes are counted apart in the
    :func:`disk_tally` it runs in (the worker's ``archmax_store_*`` metrics)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.writes = 0
        self.bytes = 0
        self.fsyncs = 0

    def wrote(self, size: int, *, synced: bool) -> None:
        with self._lock:
            self.writes += 1
            self.bytes += size
            self.fsyncs += 1 if synced else 0
        tally = _TALLY.get()
        if tally is not None and tally is not self:
            tally.wrote(size, synced=synced)

    def snapshot(self) -> dict[str, int]:
        """``{"writes", "bytes", "fsyncs"}`` so far."""
        with self._lock:
            return {"writes": self.writes, "bytes": self.bytes, "fsyncs": self.fsyncs}


DISK: Final = DiskCounters()
"""The counters of every folder store in this process."""

_TALLY: contextvars.ContextVar[DiskCounters | None] = contextvars.ContextVar(
    "archmax_disk_tally", default=None
)


@contextmanager
def disk_tally() -> Iterator[DiskCounters]:
    """Counters of the folder store writes made in this context (and the threads it hands
    work to with ``asyncio.to_thread``, which copies the context) until the block ends."""
    tally = DiskCounters()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def atomic_write(
    path: Path, data: str | bytes, *, tmp_dir: Path | None = None, durable: bool = True
) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half.

    The temporary file is written in ``tmp_dir`` (which must be on the same file system,
    so the rename is atomic), by default beside ``path``. A write killed before its rename
    leaves it there: a store passes a folder nobody lists and sweeps it. ``durable`` (the
    default) fsyncs the file before the rename, so the new content survives a machine crash;
    without it the replace is atomic for every reader and survives a killed process, and a
    machine crash may leave the old file or an empty one (for documents rebuilt from durable
    state at the next write).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if tmp_dir is None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    else:
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmp_dir, prefix="w-", suffix=".tmp")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        DISK.wrote(len(raw), synced=durable)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def create_only(
    path: Path, data: bytes, *, tmp_dir: Path | None = None, durable: bool = True
) -> bool:
    """Write ``data`` to ``path`` only if nothing is there (atomically: a hard link of a
    complete temporary file, which fails when the name exists). Whether it was written.
    ``durable``: as :func:`atomic_write`'s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = tmp_dir or path.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="c-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        DISK.wrote(len(data), synced=durable)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        Path(tmp).unlink(missing_ok=True)
