"""Any Temporal: connection settings from Temporal's environment configuration, over TLS and
with an API key, for the library, the worker and every command."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.service import TLSConfig
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.client.cli.app import run_cli
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.runtime import embedded
from archmax_temporal.worker import TemporalConnection, connect
from archmax_temporal.workflows.errors import ConfigurationError, TemporalUnavailableError
from tests.support.agents import Scripted, copy_example, running_agent
from tests.support.paths import EXAMPLES
from tests.support.tls_proxy import Certificates, TlsProxy, make_certificates

API_KEY = "tk-0123456789-not-a-real-key"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def proxy(env: WorkflowEnvironment, certificates: Certificates) -> Iterator[TlsProxy]:
    """A TLS endpoint in front of the session's dev server."""
    upstream = env.client.service_client.config.target_host
    running = TlsProxy(upstream, certificates).start()
    yield running
    running.stop()


def _secured_env(proxy: TlsProxy, certificates: Certificates) -> dict[str, str]:
    return {
        "TEMPORAL_ADDRESS": proxy.address,
        "TEMPORAL_API_KEY": API_KEY,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certificates.ca_file),
        "TEMPORAL_TLS_SERVER_NAME": "localhost",
    }


class TestTemporalConnection:
    def test_reads_temporals_environment_variables(self, tmp_path: Path) -> None:
        """Address, namespace, API key, TLS files and gRPC metadata come from TEMPORAL_*."""
        ca = tmp_path / "ca.pem"
        ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
        connection = TemporalConnection.from_env(
            {
                "TEMPORAL_ADDRESS": "ns.acct.tmprl.cloud:7233",
                "TEMPORAL_NAMESPACE": "ns.acct",
                "TEMPORAL_API_KEY": API_KEY,
                "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(ca),
                "TEMPORAL_GRPC_META_X_TEAM": "ops",
            }
        )
        assert connection.address == "ns.acct.tmprl.cloud:7233"
        assert connection.namespace == "ns.acct"
        assert connection.api_key == API_KEY
        assert isinstance(connection.tls, TLSConfig)
        assert connection.tls.server_root_ca_cert == ca.read_bytes()
        assert connection.rpc_metadata == {"x-team": "ops"}
        assert connection.address_configured and connection.uses_tls and not connection.plain

    def test_an_api_key_alone_turns_tls_on(self) -> None:
        """As Temporal's SDKs do: a key means TLS with the system roots unless TLS is off."""
        keyed = TemporalConnection.from_env({"TEMPORAL_API_KEY": API_KEY})
        assert keyed.uses_tls
        off = TemporalConnection.from_env({"TEMPORAL_API_KEY": API_KEY, "TEMPORAL_TLS": "false"})
        assert not off.uses_tls and off.tls is False

    def test_nothing_configured_is_the_plain_local_default(self) -> None:
        """No variable: localhost:7233, namespace default, no TLS, nothing configured."""
        connection = TemporalConnection.from_env({})
        assert (connection.address, connection.namespace) == ("localhost:7233", "default")
        assert connection.plain and not connection.address_configured

    def test_a_profile_of_temporal_toml_is_read_and_flags_override_it(self, tmp_path: Path) -> None:
        """TEMPORAL_PROFILE picks a profile of the TEMPORAL_CONFIG_FILE; flags win over it."""
        toml = tmp_path / "temporal.toml"
        toml.write_text(
            '[profile.default]\naddress = "localhost:7233"\n\n'
            '[profile.prod]\naddress = "prod.example:7233"\nnamespace = "prod"\n'
            f'api_key = "{API_KEY}"\n'
        )
        env = {"TEMPORAL_CONFIG_FILE": str(toml), "TEMPORAL_PROFILE": "prod"}
        prod = TemporalConnection.from_env(env)
        assert (prod.address, prod.namespace, prod.api_key) == (
            "prod.example:7233",
            "prod",
            API_KEY,
        )
        flagged = prod.with_overrides(address="other:7233", namespace="n2")
        assert (flagged.address, flagged.namespace, flagged.api_key) == (
            "other:7233",
            "n2",
            API_KEY,
        )
        default = TemporalConnection.from_env(env, profile="default")
        assert default.address == "localhost:7233" and default.api_key is None

    def test_an_unknown_profile_is_a_configuration_error(self, tmp_path: Path) -> None:
        """A profile the file lacks is refused with its name, not a bridge traceback."""
        toml = tmp_path / "temporal.toml"
        toml.write_text('[profile.default]\naddress = "localhost:7233"\n')
        with pytest.raises(ConfigurationError, match="'nope'"):
            TemporalConnection.from_env({"TEMPORAL_CONFIG_FILE": str(toml)}, profile="nope")

    def test_the_key_and_tls_material_never_show_in_a_repr_or_description(self) -> None:
        """repr() and describe() say a key is set, never what it is."""
        connection = TemporalConnection(
            address="h:7233",
            api_key=API_KEY,
            tls=TLSConfig(client_cert=b"CERT", client_private_key=b"PRIVATE-KEY"),
        )
        for text in (repr(connection), connection.describe()):
            assert API_KEY not in text and "PRIVATE-KEY" not in text
        assert "API key" in connection.describe() and "client certificate" in connection.describe()


class TestRuntimeConfig:
    def test_takes_temporal_settings_from_envconfig(self) -> None:
        """RuntimeConfig carries the key and TLS from TEMPORAL_*; its connection has them."""
        config = RuntimeConfig.from_env(
            {"TEMPORAL_ADDRESS": "h:7233", "TEMPORAL_API_KEY": API_KEY}, root="/tmp"
        )
        assert config.address_configured and config.connection.api_key == API_KEY
        assert API_KEY not in repr(config)

    def test_credentials_without_an_address_never_start_the_dev_server(self) -> None:
        """A key or TLS means a real server: the embedded default is off even on localhost."""
        assert embedded(RuntimeConfig.from_env({}, root="/tmp"))
        assert not embedded(RuntimeConfig.from_env({"TEMPORAL_API_KEY": API_KEY}, root="/tmp"))
        assert not embedded(RuntimeConfig.from_env({"TEMPORAL_TLS": "true"}, root="/tmp"))

    def test_a_flag_address_counts_as_configured(self) -> None:
        """--address means that server: nothing starts a dev server for it."""
        config = RuntimeConfig.from_env({}, root="/tmp").with_overrides(address="localhost:7233")
        assert config.address_configured and not embedded(config)


class TestOverTls:
    async def test_a_turn_runs_over_tls_with_an_api_key(
        self,
        proxy: TlsProxy,
        certificates: Certificates,
        scripted: Scripted,
        task_queue: str,
        tmp_path: Path,
    ) -> None:
        """A client and a worker made by ``connect`` from TEMPORAL_* run a whole turn through
        a TLS endpoint, and every call carries ``authorization: Bearer <key>``."""
        client = await connect(TemporalConnection.from_env(_secured_env(proxy, certificates)))
        root = copy_example("support-inbox", tmp_path)
        server = scripted(EXAMPLES / "support-inbox/workflows/support-inbox/playbook.yaml")
        async with running_agent(client, task_queue, root, "support-inbox", server) as agent:
            outcome = await agent.workflow.send(
                None,
                "About the thing we discussed on the phone.",
                trigger="email_received",
                variables={"conversation_id": f"tls-{task_queue}"},
            )
        assert outcome.status == "awaiting_input"
        assert proxy.handshakes >= 1
        paths = [r.get(":path", "") for r in proxy.requests]
        assert any(p.endswith("/PollWorkflowTaskQueue") for p in paths)  # the worker
        assert any(p.endswith("/ExecuteMultiOperation") for p in paths)  # update-with-start
        keys = proxy.metadata("authorization")
        assert keys and set(keys) == {f"Bearer {API_KEY}"}
        assert len(keys) == len(proxy.requests)  # on every call, not only the first

    async def test_an_untrusted_server_certificate_is_refused(
        self, proxy: TlsProxy, certificates: Certificates, tmp_path: Path
    ) -> None:
        """Without the private CA the handshake fails: TLS is really checked."""
        other = make_certificates(tmp_path / "other", common_name="another CA")
        env = {**_secured_env(proxy, certificates)}
        env["TEMPORAL_TLS_SERVER_CA_CERT_PATH"] = str(other.ca_file)
        with pytest.raises(TemporalUnavailableError):
            await asyncio.wait_for(connect(TemporalConnection.from_env(env)), 20)
        assert not proxy.metadata("authorization")  # no key left over an untrusted channel

    async def test_every_command_connects_through_envconfig(
        self,
        proxy: TlsProxy,
        certificates: Certificates,
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
    ) -> None:
        """``archmax sessions`` reaches the server over TLS with the key from TEMPORAL_*, and
        ``--address`` overrides a TEMPORAL_ADDRESS that points nowhere."""
        for name, value in _secured_env(proxy, certificates).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")  # dead: the flag must win
        out, err = io.StringIO(), io.StringIO()

        def command() -> int:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                return run_cli(
                    ["--root", str(tmp_path), "sessions", "--json", "--address", proxy.address]
                )

        code = await asyncio.to_thread(command)
        assert code == 0, err.getvalue()
        assert isinstance(json.loads(out.getvalue()), list)
        assert f"Bearer {API_KEY}" in proxy.metadata("authorization")
        assert API_KEY not in err.getvalue()


async def test_the_plain_default_still_connects(env: WorkflowEnvironment) -> None:
    """A plain connection (the dev server's) is unchanged: no TLS, no key."""
    address = env.client.service_client.config.target_host
    client = await connect(TemporalConnection(address=address))
    assert isinstance(client, Client)
    assert (await client.workflow_service.get_system_info(GetSystemInfoRequest())).server_version


async def test_a_server_that_cannot_be_reached_is_a_typed_error(tmp_path: Path) -> None:
    """Connecting to a dead address is :class:`TemporalUnavailableError` naming it and why,
    and ``archmax sessions`` says so in one line, never the SDK's bare ``RuntimeError``."""
    with pytest.raises(TemporalUnavailableError) as raised:
        await connect(TemporalConnection(address="127.0.0.1:1"))
    assert "127.0.0.1:1" in str(raised.value) and "refused" in str(raised.value).lower()
    out, err = io.StringIO(), io.StringIO()

    def command() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return run_cli(["--root", str(tmp_path), "sessions", "--address", "127.0.0.1:1"])

    assert await asyncio.to_thread(command) == 1
    assert "TemporalUnavailableError" in err.getvalue() and "RuntimeError" not in err.getvalue()
    assert "Traceback" not in err.getvalue() and out.getvalue() == ""
