"""The two artifacts that grow with a session, written at the cost of what is new.

``trail.json`` and ``trajectory.json`` are whole JSON documents (the seed's artifacts), rewritten
atomically at the end of every turn. Serializing every step and message again each turn would
make a turn cost more the longer its session (a thousand turns: ~8 MB of JSON a turn), so a
worker keeps the serialized text of each item it wrote and renders the document from those
texts plus the new items: byte for byte what ``json.dumps(document, indent=2)`` gives
(:func:`render`, tested against it).

What the cache holds is checked before it is used, so another worker writing the same session
(a shared store) or a reset that rewound it never lets stale text through:

- a trajectory's texts are tagged with the store log's chained digests (:mod:`transcript_log`):
  the cached prefix is used only as far as the digest at its end matches the log's;
- a trail's texts are tagged with the ``trail.json`` (size, mtime) this worker last wrote; any
  other file is read back instead.

The cache is per process, least recently used first out, bounded in characters.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

CACHE_CHARS: Final = 64_000_000
"""How many characters of serialized items a worker process keeps, all sessions together."""


def item_text(value: Any) -> str:
    """One list item as ``json.dumps(..., indent=2)`` writes it inside a top-level document's
    list (two levels deep: four spaces)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return "    " + text.replace("\n", "\n    ")  # JSON strings hold no raw newline


def render(head: dict[str, Any], key: str, items: list[str]) -> str:
    """The document ``{**head, key: [items]}`` as ``json.dumps(indent=2)`` plus a newline
    writes it, from the items' texts (:func:`item_text`). ``head`` must not be empty."""
    opening = json.dumps(head, indent=2, ensure_ascii=False, default=str)
    listed = "[\n" + ",\n".join(items) + "\n  ]" if items else "[]"
    return f"{opening[:-2]},\n  {json.dumps(key, ensure_ascii=False)}: {listed}\n}}\n"


@dataclass
class Texts:
    """The serialized items of one artifact and what vouches for them."""

    items: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    """Per item, what identifies it (a trajectory's log digests); empty when not used."""
    stamp: str | None = None
    """The store's version of the document these texts were last written as."""

    @property
    def chars(self) -> int:
        return sum(len(t) for t in self.items)


class ArtifactCache:
    """Serialized artifact items by (session, artifact), bounded in characters."""

    def __init__(self, budget: int = CACHE_CHARS) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str], tuple[Texts, int]] = OrderedDict()
        self._chars = 0

    def get(self, session_id: str, artifact: str) -> Texts | None:
        with self._lock:
            entry = self._entries.get((session_id, artifact))
            if entry is None:
                return None
            self._entries.move_to_end((session_id, artifact))
            return entry[0]

    def put(self, session_id: str, artifact: str, texts: Texts) -> None:
        size = texts.chars
        with self._lock:
            previous = self._entries.pop((session_id, artifact), None)
            if previous is not None:
                self._chars -= previous[1]
            if size > self._budget:
                return
            self._entries[(session_id, artifact)] = (texts, size)
            self._chars += size
            while self._chars > self._budget:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._chars -= dropped

    def forget(self, session_id: str, artifact: str) -> None:
        with self._lock:
            previous = self._entries.pop((session_id, artifact), None)
            if previous is not None:
                self._chars -= previous[1]
