"""A live-text channel that records what is published, for the tests of the channels and of the
model activity's streaming."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

from archmax_temporal.live import LiveEvent


class Recorder:
    """A channel that keeps what is published, with the loop time of each."""

    def __init__(self) -> None:
        self.events: list[tuple[float, LiveEvent]] = []
        self.first = threading.Event()
        """Set once the first event is published."""

    def publish(self, event: LiveEvent) -> None:
        self.events.append((asyncio.get_running_loop().time(), event))
        self.first.set()

    def subscribe(self, session_id: str) -> AbstractAsyncContextManager[AsyncIterator[LiveEvent]]:
        raise NotImplementedError

    def describe(self) -> str:
        return "recorder"

    async def aclose(self) -> None:
        return None
