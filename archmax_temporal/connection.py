"""How every entry point reaches Temporal: the connection, the client and the data converter.

Shared by the worker (:mod:`archmax_temporal.worker`) and the host (:mod:`archmax_temporal.client`)
and light on purpose: a command that only reads (``archmax sessions``, ``archmax events``)
connects through this module without loading the worker, its activities or its sandbox.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfigProfile
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.service import TLSConfig

from archmax_temporal.activities.tracing import tracing_interceptors
from archmax_temporal.workflows import text
from archmax_temporal.workflows.errors import ConfigurationError, TemporalUnavailableError


class SafeTextPayloadConverter(PydanticPayloadConverter):
    """Pydantic's payload converter, made total over text: a value holding a lone UTF-16
    surrogate (which no UTF-8 encoder takes) is written with each one replaced by U+FFFD
    instead of failing. Without it, one such string from a model, a host tool or a script
    fails every workflow task that schedules it, forever. The turn engine cleans (and says
    so to the model) where it can; this is the net under everything else."""

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        try:
            return super().to_payloads(values)
        except Exception as exc:
            if "surrogate" not in str(exc):
                raise
            return super().to_payloads([_without_surrogates(value) for value in values])


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, BaseModel):
        cleaned, _ = text.clean(value.model_dump(mode="python", round_trip=True))
        return type(value).model_validate(cleaned)
    return text.clean(value)[0]


DATA_CONVERTER: Final = DataConverter(payload_converter_class=SafeTextPayloadConverter)
"""The project's one data converter: pydantic models on the wire, total over text."""


EPHEMERAL_IDENTITY_PREFIX = "archmax-cli:"
"""Identity prefix of the worker a command runs in-process; others never count on it."""

SERVICE_IDENTITY_PREFIX = "archmax-worker:"
"""Identity prefix of long-lived workers (``archmax worker``, ``archmax dev``)."""

DEFAULT_ADDRESS: Final = "localhost:7233"
"""Where Temporal is looked for when nothing names an address."""

DEFAULT_NAMESPACE: Final = "default"
"""The namespace used when nothing names one."""


@dataclass(frozen=True)
class TemporalConnection:
    """Where and how to reach Temporal: address, namespace and the credentials.

    Read with :meth:`from_env` from Temporal's own environment configuration
    (:mod:`temporalio.envconfig`: ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
    ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``, ``TEMPORAL_GRPC_META_*``, the profiles of
    ``temporal.toml`` chosen by ``TEMPORAL_PROFILE``), so a worker, every command and
    ``archmax serve`` reach the same server the ``temporal`` CLI does. The API key and the
    TLS material never appear in a ``repr`` (and so never in a log line).
    """

    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    api_key: str | None = field(default=None, repr=False)
    """Sent as ``authorization: Bearer <key>`` on every call (Temporal Cloud API keys)."""
    tls: bool | TLSConfig | None = field(default=None, repr=False)
    """``None``: TLS exactly when an API key is set; ``True``: TLS with the system roots; a
    ``TLSConfig`` for a private CA, a server name or a client certificate (mTLS)."""
    rpc_metadata: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Extra gRPC metadata (``TEMPORAL_GRPC_META_<NAME>``) sent with every call."""
    address_configured: bool = False
    """Whether the address was named (env, profile or flag): then nothing starts a server."""

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        profile: str | None = None,
        config_file: Path | str | None = None,
    ) -> TemporalConnection:
        """The connection Temporal's environment configuration describes (``profile`` wins
        over ``TEMPORAL_PROFILE``; ``config_file`` over ``TEMPORAL_CONFIG_FILE``).
        A malformed ``temporal.toml`` or an unknown profile is a :class:`ConfigurationError`."""
        env = dict(os.environ if env is None else env)
        named_profile = profile or env.get("TEMPORAL_PROFILE")
        try:
            loaded = ClientConfigProfile.load(
                profile=named_profile,
                config_source=Path(config_file) if config_file else None,
                override_env_vars=env,
            )
        except Exception as exc:  # the bridge raises RuntimeError/ValueError/OSError
            where = f" (profile {named_profile!r})" if named_profile else ""
            raise ConfigurationError(
                f"cannot read Temporal's client configuration{where}: {exc}"
            ) from None
        tls: bool | TLSConfig | None = None
        if loaded.tls is not None:
            try:
                tls = loaded.tls.to_connect_tls_config()
            except OSError as exc:
                raise ConfigurationError(f"cannot read a TLS file: {exc}") from None
        return cls(
            address=loaded.address or DEFAULT_ADDRESS,
            namespace=loaded.namespace or DEFAULT_NAMESPACE,
            api_key=loaded.api_key or None,
            tls=tls,
            rpc_metadata=dict(loaded.grpc_meta),
            address_configured=bool(loaded.address),
        )

    def with_overrides(
        self,
        *,
        address: str | None = None,
        namespace: str | None = None,
        api_key: str | None = None,
        tls: bool | TLSConfig | None = None,
    ) -> TemporalConnection:
        """A copy with what the command line named (``None`` keeps the configured value);
        a named address counts as configured."""
        return replace(
            self,
            address=address or self.address,
            namespace=namespace or self.namespace,
            api_key=api_key if api_key is not None else self.api_key,
            tls=tls if tls is not None else self.tls,
            address_configured=self.address_configured or bool(address),
        )

    @property
    def uses_tls(self) -> bool:
        """Whether the connection is encrypted (an API key turns TLS on unless disabled)."""
        if self.tls is None:
            return self.api_key is not None
        return self.tls is not False

    @property
    def plain(self) -> bool:
        """Neither TLS nor credentials: what the embedded dev server speaks."""
        return not self.uses_tls and self.api_key is None and not self.rpc_metadata

    def describe(self) -> str:
        """One line for a terminal: address, namespace, TLS and whether a key is set
        (never the key)."""
        extras = [f"namespace {self.namespace}"]
        if self.uses_tls:
            extras.append("TLS")
        if self.api_key is not None:
            extras.append("API key")
        if isinstance(self.tls, TLSConfig) and self.tls.client_cert is not None:
            extras.append("client certificate")
        return f"{self.address} · {' · '.join(extras)}"


async def connect(connection: TemporalConnection, *, runtime: Runtime | None = None) -> Client:
    """The one place a Temporal client is made: the connection's address, namespace, TLS, API
    key and metadata, with the project's one data converter (and ``runtime``, the Temporal
    runtime whose telemetry the worker exports, when given). With tracing active
    (:mod:`archmax_temporal.activities.tracing`) the client, and every worker built on it,
    records OpenTelemetry spans.

    A server that cannot be reached is :class:`TemporalUnavailableError` naming the address
    and why (the SDK raises a bare ``RuntimeError``)."""
    try:
        return await Client.connect(
            connection.address,
            namespace=connection.namespace,
            api_key=connection.api_key,
            tls=connection.tls,
            rpc_metadata=dict(connection.rpc_metadata),
            data_converter=DATA_CONVERTER,
            runtime=runtime,
            interceptors=tracing_interceptors(),
        )
    except RuntimeError as exc:
        if not str(exc).startswith(CONNECT_FAILED):
            raise
        reason = _connect_reason(str(exc))
        raise TemporalUnavailableError(
            f"could not connect to Temporal at {connection.address} "
            f"(namespace {connection.namespace}): {reason}"
        ) from None


CONNECT_FAILED: Final = "Failed client connect"
"""How the SDK's ``RuntimeError`` for a server it cannot reach begins."""


def _connect_reason(message: str) -> str:
    """The readable part of the SDK's connect error: the OS's words when it quotes them
    (``Connection refused``), else the message less its prefix, shortened."""
    quoted = re.search(r'message: "([^"]+)"', message)
    if quoted:
        return quoted.group(1)
    return message.removeprefix(CONNECT_FAILED).lstrip(": ")[:300]


CORE_LOGGER: Final = "temporalio.core"
"""The Python logger the Temporal core's (Rust) log lines are forwarded to."""


def core_logging() -> LoggingConfig:
    """The Temporal core's logging: forwarded to Python's ``logging`` (:data:`CORE_LOGGER`,
    the target appended to its name), so the entry point's set-up formats them like every
    other line, on stderr. Left to itself the core prints plain text on stdout, where a
    command's output goes. Warnings and up; INFO too when Python's root logger shows info."""
    info = logging.getLogger().getEffectiveLevel() <= logging.INFO
    return LoggingConfig(
        filter=TelemetryFilter(core_level="INFO" if info else "WARN", other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logging.getLogger(CORE_LOGGER)),
    )


def forward_core_logs() -> None:
    """Make the default Temporal runtime one whose core logs go through Python's logging
    (:func:`core_logging`). For an entry point, after its logging set-up and before its first
    client connects; a library leaves the runtime to its host."""
    Runtime.set_default(
        Runtime(telemetry=TelemetryConfig(logging=core_logging())), error_if_already_set=False
    )


async def poller_listed(client: Client, task_queue: str, identity: str) -> bool:
    """Whether Temporal lists a poller of ``identity`` on ``task_queue``'s workflow tasks: what
    commands read to tell whether a worker serves the queue (``DescribeTaskQueue``)."""
    from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return any(poller.identity == identity for poller in response.pollers)


def worker_identity(prefix: str) -> str:
    """``<prefix><pid>@<host>``: lets a later command tell a dead local worker from a live one."""
    return f"{prefix}{os.getpid()}@{socket.gethostname()}"
