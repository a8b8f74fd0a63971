"""Live text: what a model writes while its call runs, beside the durable event stream.

A session's events are read from its Temporal history (:mod:`archmax_temporal.client.events`).
The text a model writes while its call runs is not, and must never be: every history event is
kept for the session's life, and Temporal's own way out of a workflow (Workflow Streams,
``temporalio.contrib.workflow_streams``) publishes through signals, so each delta would cost
history. Instead the model activity publishes advisory events on a channel outside Temporal,
and a follower of the session's events (``follow=True``: ``on_event``, ``archmax events
--follow``, the HTTP event stream) merges them in:

- ``agent-text-delta`` ``{messageId, text, offset, attempt}``: text as the model writes it,
  coalesced to a few events a second (:data:`FLUSH_EVERY`, :data:`FLUSH_CHARS`); ``offset`` is
  how many characters of the message came before (a follower that joined late sees it > 0);
- ``agent-text-reset`` ``{messageId, attempt}``: the text published so far for ``messageId`` is
  void (the attempt failed, or a new attempt of the call starts): a client clears it.

``messageId`` is ``<run id>:<activity id>`` of the model call: one id per call of a run, the same
across its attempts, and the same the durable ``agent-text`` that follows carries. Deltas are
advisory: a lost one costs liveliness only, and the durable ``agent-text`` is the message.

Publishing never fails and never waits: :meth:`LiveChannel.publish` hands the event over
without blocking (a full buffer drops it), and a channel's errors are logged once.

Two channels (:func:`live_channel` picks one):

- :class:`RedisChannel`, with ``ARCHMAX_STREAM_URL=redis://host:6379/0`` (the ``stream``
  extra): Redis pub/sub, one channel per session (``archmax:live:<namespace>:<session id>``).
  The worker that runs the model call and the process that serves the stream may be on
  different machines.
- :class:`LocalChannel`, with nothing configured: the same machine and user. Each follower binds
  a unix datagram socket in the root's runtime folder, ``<root>/.archmax/live/`` (or, where that
  path is too long for a socket address, a private folder in the temporary directory named by
  the root's digest); the publisher sends each event to every follower of the session. It
  serves a worker in the same process (the embedded default, ``archmax serve``) and the root's
  background worker (another process) alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.text import clean_str

if TYPE_CHECKING:
    import redis.asyncio
    import structlog


def _log() -> structlog.stdlib.BoundLogger:
    """The channel's logger, loaded on first use (the host API loads no structlog)."""
    from archmax_temporal.activities.logs import get_logger

    return get_logger("archmax.live")


DELTA: Final = "agent-text-delta"
RESET: Final = "agent-text-reset"
LIVE_TYPES: Final = (DELTA, RESET)
"""The event types of the live channel (never in a history)."""

LiveType = Literal["agent-text-delta", "agent-text-reset"]

FLUSH_EVERY: Final = 0.2
"""Seconds between two deltas of one call at most (the first text goes out at once)."""

FLUSH_CHARS: Final = 2048
"""Characters that go out at once, whatever the time since the last delta."""

MAX_DELTA_CHARS: Final = 8192
"""The most text one delta carries (a longer flush is cut into several)."""

MAX_DATAGRAM: Final = 65536
"""The largest event the local channel sends or reads (a delta is far smaller)."""

FOLLOWER_BUFFER: Final = 1024
"""Events a follower holds unread before the oldest are dropped."""

PUBLISH_BUFFER: Final = 1024
"""Events the Redis publisher holds unsent before new ones are dropped."""

REDIS_TIMEOUT: Final = 2.0
"""Seconds a Redis connect or command may take (the publisher drops, never waits longer)."""

STREAM_URL_ENV: Final = "ARCHMAX_STREAM_URL"
"""The environment variable naming the Redis channel."""

_SUN_PATH_MAX: Final = 107
"""The longest unix socket path (bytes) a portable bind takes."""

_NAME_BYTES: Final = 40
"""The longest socket name a follower binds (``<topic>.<pid>.<random>``)."""


class LiveEvent(BaseModel):
    """One advisory event of a running model call."""

    model_config = ConfigDict(extra="forbid")

    type: LiveType
    session_id: str
    message_id: str
    attempt: int = 1
    text: str = ""
    offset: int = 0
    ts: datetime

    def data(self) -> dict[str, Any]:
        """The event's fields as a :class:`~archmax_temporal.client.events.SessionEvent`'s
        ``data``, in archmax's camelCase."""
        if self.type == RESET:
            return {"messageId": self.message_id, "attempt": self.attempt}
        return {
            "messageId": self.message_id,
            "text": self.text,
            "offset": self.offset,
            "attempt": self.attempt,
        }


class LiveChannel(Protocol):
    """Where live events go from a model call, and where a follower reads them."""

    def publish(self, event: LiveEvent) -> None:
        """Hand ``event`` over without blocking; never raises (a failure is logged once)."""
        ...

    def subscribe(self, session_id: str) -> AbstractAsyncContextManager[AsyncIterator[LiveEvent]]:
        """Follow ``session_id``'s live events: subscribed once entered, until left."""
        ...

    def describe(self) -> str:
        """Where events go, for a banner (no secret)."""
        ...

    async def aclose(self) -> None:
        """Release the channel's connections."""
        ...


class _Once:
    """Warns once per kind of failure: a broken channel must not flood the log."""

    def __init__(self, channel: str) -> None:
        self._channel = channel
        self._seen: set[str] = set()

    def warn(self, what: str, error: BaseException | str) -> None:
        if what in self._seen:
            return
        self._seen.add(what)
        _log().warning(
            "live channel: " + what + " (logged once; live text is advisory)",
            channel=self._channel,
            error=str(error),
        )


def _parse(data: bytes | str, session_id: str) -> LiveEvent | None:
    """The event ``data`` holds when it is one of ``session_id``'s (else None)."""
    try:
        event = LiveEvent.model_validate_json(data)
    except (ValidationError, ValueError):
        return None
    return event if event.session_id == session_id else None


async def _queued(queue: asyncio.Queue[LiveEvent]) -> AsyncIterator[LiveEvent]:
    while True:
        yield await queue.get()


def _offer(queue: asyncio.Queue[LiveEvent], event: LiveEvent) -> None:
    """Queue ``event`` for a follower, dropping the oldest when it reads too slowly."""
    if queue.full():
        with contextlib.suppress(asyncio.QueueEmpty):
            queue.get_nowait()
    queue.put_nowait(event)


# --- the local channel -----------------------------------------------------------------------


def _topic(session_id: str) -> str:
    """A session's part of a socket name: a digest (ids may hold any character)."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:16]


def local_folder(root: Path) -> Path:
    """Where the followers of ``root``'s sessions bind their sockets: ``<root>/.archmax/live``,
    or, when a socket there would pass the socket path limit, ``<tmp>/archmax-<uid>/live-<root
    digest>`` (the same for every process of the root)."""
    resolved = Path(root).resolve()
    preferred = resolved / ".archmax" / "live"
    if len(os.fsencode(preferred)) + 1 + _NAME_BYTES <= _SUN_PATH_MAX:
        return preferred
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"archmax-{uid}" / f"live-{digest}"


def _private(path: Path) -> bool:
    """Whether ``path`` is a real folder of this user that no one else may enter."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    own = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return stat.S_ISDIR(info.st_mode) and own and not info.st_mode & 0o077


class LocalChannel:
    """Same machine, same user: unix datagram sockets in :func:`local_folder`, one per
    follower, named by the session's digest; the publisher sends to each of the session's."""

    def __init__(self, root: Path) -> None:
        self.folder = local_folder(root)
        self._sender: socket.socket | None = None
        self._warn = _Once(f"local {self.folder}")

    @staticmethod
    def available() -> bool:
        """Whether this platform has unix datagram sockets."""
        return hasattr(socket, "AF_UNIX") and hasattr(os, "getuid")

    def describe(self) -> str:
        return f"local sockets in {self.folder}"

    def publish(self, event: LiveEvent) -> None:
        try:
            self._publish(event)
        except Exception as exc:  # never the model call's problem
            self._warn.warn("publishing failed", exc)

    def _publish(self, event: LiveEvent) -> None:
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return  # no follower ever bound here
        prefix = _topic(event.session_id) + "."
        targets = [name for name in names if name.startswith(prefix)]
        if not targets:
            return
        if not _private(self.folder):
            self._warn.warn("the folder is not private to this user: nothing sent", "")
            return
        data = event.model_dump_json().encode("utf-8")
        if len(data) > MAX_DATAGRAM:
            self._warn.warn("an event too large for a datagram was dropped", str(len(data)))
            return
        if self._sender is None:
            self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sender.setblocking(False)
        for name in targets:
            path = self.folder / name
            try:
                self._sender.sendto(data, os.fsencode(path))
            except BlockingIOError:
                continue  # that follower reads too slowly: it misses this one
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    path.unlink()  # a follower that died without unbinding
            except OSError as exc:
                self._warn.warn("sending failed", exc)

    def _ensure_folder(self) -> bool:
        try:
            self.folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.folder.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            self._warn.warn("cannot create the folder", exc)
            return False
        if self.folder.parent.name.startswith("archmax-") and not _private(self.folder.parent):
            self._warn.warn("the temporary folder is not private to this user", "")
            return False
        if not _private(self.folder):
            self._warn.warn("the folder is not private to this user", "")
            return False
        return True

    @contextlib.asynccontextmanager
    async def subscribe(self, session_id: str) -> AsyncIterator[AsyncIterator[LiveEvent]]:
        queue: asyncio.Queue[LiveEvent] = asyncio.Queue(maxsize=FOLLOWER_BUFFER)
        if not self._ensure_folder():
            yield _queued(queue)  # nothing arrives: the durable events still do
            return
        name = f"{_topic(session_id)}.{os.getpid()}.{secrets.token_hex(4)}"
        path = self.folder / name
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            receiver.setblocking(False)
            receiver.bind(os.fsencode(path))
            os.chmod(path, 0o600)
        except OSError as exc:
            receiver.close()
            self._warn.warn("cannot bind a socket", exc)
            yield _queued(queue)
            return
        loop = asyncio.get_running_loop()

        def readable() -> None:
            while True:
                try:
                    data = receiver.recv(MAX_DATAGRAM)
                except OSError:  # BlockingIOError: read all there is
                    return
                event = _parse(data, session_id)
                if event is not None:
                    _offer(queue, event)

        loop.add_reader(receiver.fileno(), readable)
        try:
            yield _queued(queue)
        finally:
            loop.remove_reader(receiver.fileno())
            receiver.close()
            with contextlib.suppress(OSError):
                path.unlink()

    async def aclose(self) -> None:
        if self._sender is not None:
            self._sender.close()
            self._sender = None


# --- the Redis channel -----------------------------------------------------------------------


class RedisChannel:
    """Redis pub/sub (``redis.asyncio``): a channel per session, any number of machines. The
    publisher queues (at most :data:`PUBLISH_BUFFER`) and one task sends; a follower
    subscribes before it reads the history, so it misses nothing published after."""

    def __init__(self, url: str, namespace: str) -> None:
        try:
            import redis.asyncio  # noqa: F401  (the optional ``stream`` extra)
        except ImportError:
            raise ConfigurationError(
                f"{STREAM_URL_ENV} needs the redis package: pip install 'archmax-temporal[stream]'"
            ) from None
        self._url = url
        self._namespace = namespace
        self._client: redis.asyncio.Redis | None = None
        self._queue: asyncio.Queue[tuple[str, bytes]] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._warn = _Once(f"redis {self.describe()}")

    def describe(self) -> str:
        """The URL without its password."""
        scheme, sep, rest = self._url.partition("://")
        if "@" in rest:
            rest = "…@" + rest.rpartition("@")[2]
        return f"{scheme}{sep}{rest}"

    def channel(self, session_id: str) -> str:
        """The Redis channel of ``session_id``'s live events."""
        return f"archmax:live:{self._namespace}:{session_id}"

    def _redis(self) -> redis.asyncio.Redis:
        if self._client is None:
            import redis.asyncio

            self._client = redis.asyncio.Redis.from_url(
                self._url,
                socket_connect_timeout=REDIS_TIMEOUT,
                socket_timeout=REDIS_TIMEOUT,
            )
        return self._client

    def publish(self, event: LiveEvent) -> None:
        try:
            if self._queue is None:
                self._queue = asyncio.Queue(maxsize=PUBLISH_BUFFER)
            if self._pump is None or self._pump.done():
                self._pump = asyncio.get_running_loop().create_task(self._send(self._queue))
            self._queue.put_nowait(
                (self.channel(event.session_id), event.model_dump_json().encode("utf-8"))
            )
        except asyncio.QueueFull:
            self._warn.warn("the publish buffer is full: events dropped", "")
        except Exception as exc:
            self._warn.warn("publishing failed", exc)

    async def _send(self, queue: asyncio.Queue[tuple[str, bytes]]) -> None:
        while True:
            channel, data = await queue.get()
            try:
                await self._redis().publish(channel, data)
            except Exception as exc:
                self._warn.warn("publishing failed", exc)

    @contextlib.asynccontextmanager
    async def subscribe(self, session_id: str) -> AsyncIterator[AsyncIterator[LiveEvent]]:
        pubsub = self._redis().pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.channel(session_id))
        except Exception as exc:
            self._warn.warn("cannot subscribe", exc)
            with contextlib.suppress(Exception):
                await pubsub.aclose()
            yield _queued(asyncio.Queue())
            return
        try:
            yield self._messages(pubsub, session_id)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()

    async def _messages(self, pubsub: Any, session_id: str) -> AsyncIterator[LiveEvent]:
        while True:
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            except Exception as exc:  # the connection dropped: redis-py subscribes again
                self._warn.warn("reading failed", exc)
                await asyncio.sleep(1.0)
                continue
            if not message or message.get("type") != "message":
                continue
            event = _parse(message["data"], session_id)
            if event is not None:
                yield event

    async def aclose(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pump
            self._pump = None
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()


def live_channel(
    root: Path, namespace: str, env: Mapping[str, str] | None = None
) -> LiveChannel | None:
    """The channel this process publishes and follows live text on: Redis when
    ``ARCHMAX_STREAM_URL`` names one, else the local sockets of ``root`` (None where the
    platform has none: followers then get the durable events only)."""
    env = os.environ if env is None else env
    url = (env.get(STREAM_URL_ENV) or "").strip()
    if url:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                f"{STREAM_URL_ENV} must be a redis://, rediss:// or unix:// URL, not {url!r}"
            )
        return RedisChannel(url, namespace)
    return LocalChannel(root) if LocalChannel.available() else None


class LiveText:
    """One model call's text as it is written, published as coalesced deltas: the first text
    at once, then at most one delta per :data:`FLUSH_EVERY` (or :data:`FLUSH_CHARS` at once);
    :meth:`finish` sends what is left before the call returns, :meth:`void` says the text
    so far is void. Publishing never raises."""

    def __init__(
        self,
        channel: LiveChannel,
        session_id: str,
        message_id: str,
        attempt: int,
        *,
        every: float = FLUSH_EVERY,
        size: int = FLUSH_CHARS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._channel = channel
        self._session = session_id
        self.message_id = message_id
        self._attempt = attempt
        self._every = every
        self._size = size
        self._clock = clock
        self._pending: list[str] = []
        self._chars = 0
        self.offset = 0
        """Characters published so far."""
        self._last = float("-inf")
        self._timer: asyncio.TimerHandle | None = None

    def begin(self) -> None:
        """A retried call (attempt > 1) first voids what an earlier attempt published."""
        if self._attempt > 1:
            self._send(RESET, "")

    def write(self, text: str) -> None:
        """Text the model just wrote."""
        if not text:
            return
        self._pending.append(text)
        self._chars += len(text)
        loop = asyncio.get_running_loop()
        waited = loop.time() - self._last
        if self._chars >= self._size or waited >= self._every:
            self.flush()
        elif self._timer is None:
            self._timer = loop.call_later(self._every - waited, self.flush)

    def flush(self) -> None:
        """Publish the pending text now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending, self._chars = [], 0
        self._last = asyncio.get_running_loop().time()
        for start in range(0, len(text), MAX_DELTA_CHARS):
            piece = text[start : start + MAX_DELTA_CHARS]
            self._send(DELTA, piece)
            self.offset += len(piece)

    def finish(self) -> None:
        """The call returned its message: publish what is left."""
        self.flush()

    def void(self) -> None:
        """The attempt failed: drop what is pending and void what was published."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        written = bool(self.offset or self._pending)
        self._pending, self._chars = [], 0
        if written:
            self._send(RESET, "")
        self.offset = 0

    def _send(self, kind: LiveType, text: str) -> None:
        try:
            event = LiveEvent(
                type=kind,
                session_id=self._session,
                message_id=self.message_id,
                attempt=self._attempt,
                text=clean_str(text)[0],
                offset=self.offset,
                ts=self._clock(),
            )
            self._channel.publish(event)
        except Exception as exc:  # never the model call's problem
            _log().warning("live text not published", error=str(exc))


def message_id(run_id: str | None, activity_id: str) -> str:
    """The ``messageId`` of a model call: ``<run id>:<activity id>`` (the same across its
    attempts; the durable ``agent-text`` of its answer carries it too)."""
    return f"{run_id or ''}:{activity_id}"


__all__ = [
    "DELTA",
    "FLUSH_CHARS",
    "FLUSH_EVERY",
    "LIVE_TYPES",
    "RESET",
    "STREAM_URL_ENV",
    "LiveChannel",
    "LiveEvent",
    "LiveText",
    "LocalChannel",
    "RedisChannel",
    "live_channel",
    "local_folder",
    "message_id",
]
