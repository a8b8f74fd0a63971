"""The embedded default's background worker: one per authoring root and task queue, beside
the dev server.

Why: a timed wait wakes only when a worker polls, and a command that ran its own worker
in-process would serve *every* session on the queue (an overdue wake of another
conversation included) with that shell's model configuration, for as long as the command
happened to run. So commands that run a turn (``run``, ``deliver``, ``decide``, ``reply``)
never run a worker themselves: with nothing configured they make sure this root has a
background worker (``archmax worker``, detached like the dev server, its log in
``<root>/.archmax/worker-<task queue>.log``) started with the configuration the command
sees, and restart it when that configuration changed (the model endpoint, key or id, the
store). Each root has its own task queue
(:func:`archmax_temporal.client.config.root_task_queue`), so two roots on one machine never
share a worker; a command for another queue (``--task-queue``) gets a worker of its own beside
the root's, never moves it. Read-only commands (``sessions``, ``events``, ``validate``,
``help``) never start one. ``archmax dev stop`` stops the workers and the dev server.

The worker's configuration is identified by a fingerprint (hashes only: the key itself is
never written), kept with its pid in ``<root>/.archmax/worker-<task queue>.json``; a start
lock makes racing commands start one worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.devserver import (
    DevServerError,
    _log_tail,
    _pid_alive,
    _process_argv,
    _signal_and_wait,
    _start_lock,
    dev_server_paths,
)

START_TIMEOUT: Final = 30.0
"""Seconds a started worker gets to show up polling its queue."""

STOP_TIMEOUT: Final = 30.0
"""Seconds a worker gets to drain after SIGTERM before SIGKILL (its own grace is 15 s)."""

MODEL_ENV: Final = (
    "ARCHMAX_API_BASE_URL",
    "OPENAI_BASE_URL",
    "ARCHMAX_API_KEY",
    "OPENAI_API_KEY",
    "ARCHMAX_MODEL",
    "ARCHMAX_STREAMING",
    "ARCHMAX_STREAM_URL",
)
"""The model configuration a worker reads (and where its live text goes); a change restarts
the background worker."""

NOTIFY_ENV: Final = ("ARCHMAX_NOTIFY_URL", "ARCHMAX_NOTIFY_SECRET")
"""Where the worker sends the sessions' notifications; a change restarts it too."""


class BackgroundWorkerError(DevServerError):
    """The background worker could not be started (it exited, or never polled)."""


@dataclass(frozen=True)
class BackgroundWorker:
    """The background worker of a root: its pid, and whether this command (re)started it."""

    pid: int
    started: bool
    log_file: Path


def _files(root: Path, task_queue: str) -> tuple[Path, Path, Path]:
    """The state, log and lock files of ``root``'s background worker for ``task_queue``
    (``<root>/.archmax/worker-<queue>.*``): one worker per queue, so a command for another
    queue (``--task-queue``) never moves the worker the root's other sessions rely on."""
    state = dev_server_paths(root).state_dir
    stem = "worker-" + queue_file_name(task_queue)
    return state / f"{stem}.json", state / f"{stem}.log", state / f"{stem}.lock"


def queue_file_name(task_queue: str) -> str:
    """``task_queue`` as part of a file name: itself when it is letters, digits and ``._-``
    (at most 80), else a readable prefix and a digest."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_queue)[:80]
    if safe == task_queue and not safe.startswith("."):
        return safe
    return f"{safe[:60].lstrip('.')}~{hashlib.sha256(task_queue.encode('utf-8')).hexdigest()[:12]}"


def fingerprint(config: RuntimeConfig, address: str, env: Mapping[str, str]) -> str:
    """What the worker was started with, hashed: a change means a restart."""
    facts = {
        "address": address,
        "namespace": config.namespace,
        "task_queue": config.task_queue,
        "root": str(config.root),
        "store": config.store_location,
        "search_attributes": config.search_attributes,
        **{
            name: hashlib.sha256(env.get(name, "").encode()).hexdigest()
            for name in (*MODEL_ENV, *NOTIFY_ENV)
        },
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def _recorded(state_file: Path) -> tuple[int, str] | None:
    """The live background worker recorded for this root: (pid, fingerprint)."""
    try:
        data = json.loads(state_file.read_text())
        pid, print_ = int(data["pid"]), str(data["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _pid_alive(pid):
        return None
    argv = _process_argv(pid)
    if argv is not None and not ("archmax_temporal" in " ".join(argv) and "worker" in argv):
        return None  # a reused pid: never signal a stranger
    return pid, print_


def _stop(state_file: Path) -> bool:
    found = _recorded(state_file)
    if found is not None:
        _signal_and_wait(found[0], STOP_TIMEOUT)
    state_file.unlink(missing_ok=True)
    return found is not None


def stop_background_worker(root: Path) -> bool:
    """Stop this root's background workers (one per task queue); ``True`` if one ran."""
    state_dir = dev_server_paths(root).state_dir
    stopped = [_stop(state_file) for state_file in sorted(state_dir.glob("worker-*.json"))]
    return any(stopped)


async def ensure_background_worker(
    config: RuntimeConfig,
    address: str,
    env: Mapping[str, str] | None = None,
) -> BackgroundWorker:
    """This root's background worker, started (or restarted) with the configuration in
    ``env`` unless one already runs with exactly that configuration."""
    env = os.environ if env is None else env
    state_file, log_file, lock_file = _files(config.root, config.task_queue)
    state_file.parent.mkdir(parents=True, exist_ok=True)
    wanted = fingerprint(config, address, env)
    async with _start_lock(lock_file, START_TIMEOUT + STOP_TIMEOUT):
        found = _recorded(state_file)
        if found is not None and found[1] == wanted:
            return BackgroundWorker(found[0], False, log_file)
        if found is not None:
            await asyncio.to_thread(_stop, state_file)
        child_env = {
            **env,
            "TEMPORAL_ADDRESS": address,
            "TEMPORAL_NAMESPACE": config.namespace,
            "ARCHMAX_TASK_QUEUE": config.task_queue,
            "ARCHMAX_ROOT": str(config.root),
            "ARCHMAX_STORE": config.store_location,
            "ARCHMAX_SEARCH_ATTRIBUTES": "1" if config.search_attributes else "0",
            **({"TEMPORAL_PROFILE": config.profile} if config.profile else {}),
        }
        with log_file.open("ab") as log:
            offset = log.tell()
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            log.write(f"--- archmax: starting the background worker ({stamp})\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [sys.executable, "-m", "archmax_temporal", "worker"],
                stdin=subprocess.DEVNULL,
                stdout=log.fileno(),
                stderr=log.fileno(),
                env=child_env,
                cwd=config.root,
                start_new_session=True,
                close_fds=True,
            )
        tmp = state_file.with_name(state_file.name + ".tmp")
        tmp.write_text(json.dumps({"pid": proc.pid, "fingerprint": wanted}))
        tmp.replace(state_file)
        await _await_polling(proc, config, address, log_file, offset)
        return BackgroundWorker(proc.pid, True, log_file)


async def _await_polling(
    proc: subprocess.Popen[bytes], config: RuntimeConfig, address: str, log: Path, offset: int
) -> None:
    """Wait until the started worker polls its queue (so the command's firing is served)."""
    from dataclasses import replace

    from archmax_temporal.client.runtime import worker_polling
    from archmax_temporal.connection import connect

    client = await connect(replace(config.connection, address=address))
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.poll() is not None:
            raise BackgroundWorkerError(
                f"the background worker exited with code {proc.returncode}. Last lines of "
                f"{log}:\n{_log_tail(log, offset)}"
            )
        with contextlib.suppress(Exception):
            if await worker_polling(client, config.task_queue):
                return
        if time.monotonic() >= deadline:
            raise BackgroundWorkerError(
                f"the background worker did not poll {config.task_queue!r} within "
                f"{START_TIMEOUT:.0f}s. Last lines of {log}:\n{_log_tail(log, offset)}"
            )
        await asyncio.sleep(0.2)
