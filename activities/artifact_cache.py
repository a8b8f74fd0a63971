"""The two artifacts that grow with a session, written at the cost of what is new.

``trail.json`` and ``trajectory.json`` are whole JSON documents (the seed's artifacts), brought
up to date at the end of every turn. Serializing every step and message again each turn would
make a turn cost more the longer its session (a thousand turns: ~8 MB of JSON a turn), so a
worker keeps the serialized text of each item it wrote and renders the document from those
texts plus the new items: byte for byte what ``json.dumps(document, indent=2)`` gives
(:func:`render`, tested against it). On a store that writes in place (the folder store), only
what changed is written: the new items and the document's end, over the old end
(:func:`appended`, :func:`held_prefix`); a reader that meets a document cut short reads the
whole items before the cut (:func:`parse_items`).

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


TAIL: Final = "\n  ]\n}\n"
"""What follows a document's last item (:func:`render`)."""

SEPARATOR: Final = ",\n"
"""What stands between two items."""


def opening(head: dict[str, Any], key: str) -> str:
    """What comes before a document's list: ``head`` and the list's key."""
    text = json.dumps(head, indent=2, ensure_ascii=False, default=str)
    return f"{text[:-2]},\n  {json.dumps(key, ensure_ascii=False)}: "


def render(head: dict[str, Any], key: str, items: list[str]) -> str:
    """The document ``{**head, key: [items]}`` as ``json.dumps(indent=2)`` plus a newline
    writes it, from the items' texts (:func:`item_text`). ``head`` must not be empty."""
    if not items:
        return f"{opening(head, key)}[]\n}}\n"
    return f"{opening(head, key)}[\n{SEPARATOR.join(items)}{TAIL}"


def appended(items: list[str]) -> bytes:
    """What a document holding some items takes, from the end of its last one, to hold
    ``items`` after them (then its end)."""
    return ("".join(SEPARATOR + item for item in items) + TAIL).encode("utf-8")


def held_prefix(data: bytes, start: str, items: list[str]) -> tuple[int, int]:
    """How many of ``items`` the document ``data`` holds first, as :func:`render` writes them
    after ``start`` (its :func:`opening`), and the byte offset where the last of them ends;
    ``(0, -1)`` when it holds none."""
    pos = len((start + "[\n").encode("utf-8"))
    if not data.startswith((start + "[\n").encode("utf-8")):
        return 0, -1
    count, end = 0, -1
    for item in items:
        raw = item.encode("utf-8")
        if not data.startswith(raw, pos):
            break
        after = pos + len(raw)
        if not (data.startswith(b",\n", after) or data.startswith(TAIL.encode(), after)):
            break
        count, end, pos = count + 1, after, after + len(SEPARATOR)
    return count, end


def parse_items(text: str, key: str) -> list[Any]:
    """The items of the document's list ``key``; of a document cut short (a reader that raced an
    append in place, a write killed half-way: see
    :meth:`~archmax_temporal.activities.folder_store.FilesystemSessionStore.append_at`), the whole
    items before the cut. ``[]`` when none can be read."""
    try:
        whole = json.loads(text)[key]
        return list(whole) if isinstance(whole, list) else []
    except (ValueError, KeyError, TypeError):
        pass
    marker = f"\n  {json.dumps(key, ensure_ascii=False)}: ["
    at = text.find(marker)
    if at < 0:
        return []
    decoder = json.JSONDecoder()
    items: list[Any] = []
    pos = at + len(marker)
    while True:
        while pos < len(text) and text[pos] in " \n":
            pos += 1
        try:
            item, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return items
        if not isinstance(item, dict):
            return items  # a cut number or string would read as another: items are objects
        items.append(item)
        if not text.startswith(",", pos):
            return items
        pos += 1


@dataclass
class Texts:
    """The serialized items of one artifact and what vouches for them."""

    items: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    """Per item, what identifies it (a trajectory's log digests); empty when not used."""
    stamp: str | None = None
    """The store's version of the document these texts were last written as."""
    start: str = ""
    """The document's :func:`opening` as last written."""
    size: int = 0
    """The document's size in bytes as last written."""

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
