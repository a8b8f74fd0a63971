"""Processes a benchmark starts end with it.

A bench that starts a worker or a server as a subprocess stops it by its pid when it
finishes; :func:`die_with_parent` covers the bench that never gets there (killed, or stopped
by a ``timeout`` that sends SIGTERM, which Python does not turn into an exception): on
Linux, the kernel sends the child SIGTERM when the bench process dies, so no worker is left
polling a server that is gone. Pass it as ``preexec_fn`` to :class:`subprocess.Popen`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Final

PR_SET_PDEATHSIG: Final = 1
"""``prctl`` option: the signal the calling process gets when its parent dies."""


def die_with_parent() -> None:
    """In a child between fork and exec: have the kernel send it SIGTERM when its parent
    dies, and end it now if the parent already died (then the child was reparented)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return  # not fatal: the bench still stops its children by pid when it finishes
    if os.getppid() != parent:
        os._exit(1)
