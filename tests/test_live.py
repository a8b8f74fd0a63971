"""archmax_temporal/live.py: the live-text channels and the coalescing of one call's text.

The local channel runs over real unix datagram sockets, the Redis one against a real
``redis-server`` on 127.0.0.1 (``redis_url``); nothing is faked."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from archmax_temporal.live import (
    DELTA,
    RESET,
    LiveEvent,
    LiveText,
    LocalChannel,
    RedisChannel,
    live_channel,
    local_folder,
    message_id,
)
from archmax_temporal.workflows.errors import ConfigurationError
from tests.support.live import Recorder


def _event(session_id: str, text: str = "hi", kind: str = DELTA) -> LiveEvent:
    return LiveEvent.model_validate(
        {
            "type": kind,
            "session_id": session_id,
            "message_id": "run:5",
            "text": text,
            "ts": datetime.now(UTC),
        }
    )


async def _next(events: AsyncIterator[LiveEvent], timeout: float = 5.0) -> LiveEvent:
    return await asyncio.wait_for(anext(events), timeout)


class TestLiveText:
    async def test_text_is_coalesced_the_first_at_once_and_nothing_is_lost(self) -> None:
        """Forty pieces written over ~0.4 s become a handful of deltas: the first piece at
        once, then at most one per interval; joined in order they are the text, each
        ``offset`` the characters before it."""
        channel = Recorder()
        text = LiveText(channel, "s-1", "run:5", 1, every=0.1)
        loop = asyncio.get_running_loop()
        began = loop.time()
        pieces = [f"word{i} " for i in range(40)]
        for piece in pieces:
            text.write(piece)
            await asyncio.sleep(0.01)
        text.finish()
        elapsed = loop.time() - began
        deltas = [event for _, event in channel.events]
        assert all(event.type == DELTA for event in deltas)
        assert "".join(event.text for event in deltas) == "".join(pieces)
        assert deltas[0].text == pieces[0] and channel.events[0][0] - began < 0.05
        assert 3 <= len(deltas) <= elapsed / 0.1 + 2 < len(pieces), (len(deltas), elapsed)
        offsets = [sum(len(e.text) for e in deltas[:i]) for i in range(len(deltas))]
        assert [event.offset for event in deltas] == offsets

    async def test_a_pause_still_flushes_what_was_written(self) -> None:
        """Text pending when the model pauses goes out on its own timer, not with the next
        piece."""
        channel = Recorder()
        text = LiveText(channel, "s-1", "run:5", 1, every=0.05)
        text.write("a")
        text.write("b")
        assert [e.text for _, e in channel.events] == ["a"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while len(channel.events) < 2 and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert [e.text for _, e in channel.events] == ["a", "b"]
        assert channel.events[1][0] - channel.events[0][0] >= 0.04  # on its timer

    async def test_a_large_flush_is_cut_and_size_flushes_early(self) -> None:
        channel = Recorder()
        text = LiveText(channel, "s-1", "run:5", 1, every=10.0, size=100)
        text.write("x")
        text.write("y" * 50)
        assert len(channel.events) == 1  # waiting for the interval
        text.write("z" * 20_000)  # past the size: at once, cut into pieces
        texts = [e.text for _, e in channel.events]
        assert "".join(texts) == "x" + "y" * 50 + "z" * 20_000
        assert max(len(t) for t in texts) <= 8192 and len(texts) >= 4

    async def test_a_retried_attempt_resets_and_a_failure_voids(self) -> None:
        """Attempt 2 first says the text so far is void; a failing attempt that published
        text says so too; one that published nothing says nothing."""
        channel = Recorder()
        retried = LiveText(channel, "s-1", "run:5", 2)
        retried.begin()
        retried.write("partial")
        retried.void()
        kinds = [(e.type, e.attempt) for _, e in channel.events]
        assert kinds == [(RESET, 2), (DELTA, 2), (RESET, 2)]
        quiet = Recorder()
        first = LiveText(quiet, "s-1", "run:5", 1)
        first.begin()
        first.void()
        assert quiet.events == []

    async def test_a_channel_that_raises_never_reaches_the_writer(self) -> None:
        class Broken(Recorder):
            def publish(self, event: LiveEvent) -> None:
                raise OSError("down")

        text = LiveText(Broken(), "s-1", "run:5", 1)
        text.write("still fine")
        text.finish()
        text.void()

    def test_message_ids_name_the_run_and_the_call(self) -> None:
        assert message_id("run-1", "7") == "run-1:7"
        assert message_id(None, "7") == ":7"

    async def test_lone_surrogates_are_made_valid(self) -> None:
        """A lone surrogate in the model's text (valid JSON, invalid UTF-8) is replaced:
        the delta can be sent."""
        channel = Recorder()
        text = LiveText(channel, "s", "run:5", 1)
        text.write("bad \ud800 text")
        text.finish()
        (_, event), *_ = channel.events
        assert event.model_dump_json().encode("utf-8")
        assert "\ud800" not in event.text


class TestLocalChannel:
    async def test_a_follower_gets_its_sessions_events_only(self, tmp_path: Path) -> None:
        """Two followers of two sessions on one root: each gets its own session's events,
        in order, over real sockets; the sockets are gone once they leave."""
        publisher, follower = LocalChannel(tmp_path), LocalChannel(tmp_path)
        mine, other = f"s-{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex[:6]}"
        async with (
            follower.subscribe(mine) as events,
            follower.subscribe(other) as others,
        ):
            assert len(os.listdir(follower.folder)) == 2
            for text in ("one", "two", "three"):
                publisher.publish(_event(mine, text))
            publisher.publish(_event(other, "theirs"))
            got = [(await _next(events)).text for _ in range(3)]
            assert got == ["one", "two", "three"]
            assert (await _next(others)).text == "theirs"
        assert os.listdir(follower.folder) == []
        await publisher.aclose()

    async def test_publishing_with_no_follower_or_a_dead_one_is_harmless(
        self, tmp_path: Path
    ) -> None:
        """No folder yet, then a socket left by a follower that died: nothing raises and the
        stale socket is removed."""
        channel = LocalChannel(tmp_path)
        channel.publish(_event("s-1"))  # no folder at all
        async with channel.subscribe("s-1"):
            pass
        topic = hashlib.sha256(b"s-1").hexdigest()[:16]
        stale = channel.folder / f"{topic}.1.dead"
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        dead.bind(os.fsencode(stale))
        dead.close()  # bound, then gone: the file stays
        assert stale.exists()
        channel.publish(_event("s-1"))
        assert not stale.exists()

    async def test_a_folder_others_may_enter_gets_nothing(self, tmp_path: Path) -> None:
        channel = LocalChannel(tmp_path)
        async with channel.subscribe("s-1") as events:
            os.chmod(channel.folder, 0o777)
            try:
                channel.publish(_event("s-1", "leak?"))
                with pytest.raises(TimeoutError):
                    await _next(events, timeout=0.3)
            finally:
                os.chmod(channel.folder, 0o700)

    def test_a_long_root_takes_a_private_temporary_folder(self, tmp_path: Path) -> None:
        """A socket path has a length limit: a deep root's folder moves to the temporary
        directory, named by the root's digest (the same for every process of that root)."""
        short = local_folder(Path("/r"))
        assert short == Path("/r/.archmax/live")
        deep = tmp_path / ("d" * 120)
        folder = local_folder(deep)
        assert folder.name.startswith("live-") and folder.parent.name == f"archmax-{os.getuid()}"
        assert local_folder(deep) == folder
        assert len(os.fsencode(folder)) < 80

    async def test_a_deep_root_still_delivers(self, tmp_path: Path) -> None:
        deep = tmp_path / ("d" * 120)
        deep.mkdir()
        channel = LocalChannel(deep)
        session = f"s-{uuid.uuid4().hex[:6]}"
        async with channel.subscribe(session) as events:
            LocalChannel(deep).publish(_event(session, "far"))
            assert (await _next(events)).text == "far"


class TestChoosingTheChannel:
    def test_nothing_configured_is_the_local_channel_of_the_root(self, tmp_path: Path) -> None:
        channel = live_channel(tmp_path, "default", {})
        assert isinstance(channel, LocalChannel)
        assert channel.folder == local_folder(tmp_path)

    def test_a_redis_url_is_redis_and_its_password_never_shows(self, tmp_path: Path) -> None:
        channel = live_channel(
            tmp_path, "ns", {"ARCHMAX_STREAM_URL": "redis://:s3cret@cache:6379/0"}
        )
        assert isinstance(channel, RedisChannel)
        assert "s3cret" not in channel.describe() and "cache:6379" in channel.describe()
        assert channel.channel("chat-1") == "archmax:live:ns:chat-1"

    def test_another_scheme_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigurationError, match="ARCHMAX_STREAM_URL"):
            live_channel(tmp_path, "ns", {"ARCHMAX_STREAM_URL": "http://cache:6379"})


class TestRedisChannel:
    async def test_a_follower_gets_what_is_published(self, redis_url: str) -> None:
        """Through a real redis-server: subscribed, the follower gets the session's events
        in order and nothing of another session's."""
        publisher, follower = RedisChannel(redis_url, "ns"), RedisChannel(redis_url, "ns")
        session = f"s-{uuid.uuid4().hex[:6]}"
        try:
            async with follower.subscribe(session) as events:
                publisher.publish(_event(f"{session}-other", "theirs"))
                for text in ("one", "two"):
                    publisher.publish(_event(session, text))
                assert [(await _next(events)).text for _ in range(2)] == ["one", "two"]
        finally:
            await publisher.aclose()
            await follower.aclose()

    async def test_an_unreachable_redis_never_reaches_the_writer(self) -> None:
        """Nothing listens: publishing returns at once, the pump logs once and goes on; a
        follower gets nothing (and no error)."""
        from tests.support.child_server import free_port

        channel = RedisChannel(f"redis://127.0.0.1:{free_port()}/0", "ns")
        loop = asyncio.get_running_loop()
        began = loop.time()
        for i in range(2000):  # past the buffer: the rest is dropped, nothing waits
            channel.publish(_event("s-1", str(i)))
        assert loop.time() - began < 1.0
        async with channel.subscribe("s-1") as events:
            with pytest.raises(TimeoutError):
                await _next(events, timeout=0.3)
        await channel.aclose()
