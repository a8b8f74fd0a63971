"""Texts a worker process knows by their digest: what lets a model call name a session's tool
list by digest from the session's first call on.

A state's tool list (its schemas' canonical text, :func:`archmax_temporal.workflows.transcript.
schemas_text`) is alike in every session of the workflow, about 9 KB, and was carried whole by
every new session's first model call (a new run's later calls named it by digest since
``SessionState.prompts_kept``). Now every call names it by digest, and the model activity finds
the text here before it reads the session's store:

- The workflow code puts the list it offers here (:data:`KNOWN_TEXTS`) before it schedules the
  call, so a model activity on the same worker always finds it. The put is the only thing the
  workflow does with this cache: nothing it decides reads it, so a replay is the same.
- The model activity puts every list a call carried, or it read from a store, here too.
- A model activity that finds the text here keeps it in the session's store as it keeps a list
  a call carried, so another worker reads it from there.
- A worker that knows neither (a fresh worker, handed the first call of a session another worker
  rendered) answers ``PromptMissing``, and the workflow sends the call again with the list.

Content-addressed, so never stale and alike for every store and worker in the process; bounded,
least recently used dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    """What a worker process keeps in memory of content-addressed things (never stale): at
    most ``size`` entries, the least recently used dropped first. Model calls run in worker
    threads side by side, so every read and write takes the lock (one thread evicting an
    entry while another moves it to the end would raise ``KeyError``)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The entry (now the most recently used), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` as the most recently used entry."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()


KNOWN_TEXTS_SIZE: Final = 256
"""Tool lists a worker process knows (a workflow offers one per state and set of grants)."""

KNOWN_TEXTS: Final[Kept[str, str]] = Kept(KNOWN_TEXTS_SIZE)
"""The tool lists this process knows, by digest."""
