"""``Idempotency-Key`` over HTTP: a key is bound to its request and scoped to its caller.

A keyed request's Temporal update id is ``<key>.<binding>``, where the binding is a digest of
the request: its method, its path (the workflow and trigger, or the session and the verb), the
caller (a digest of its bearer token, or the trigger whose secret signed it) and its body in
canonical form (parsed JSON, a file by its digest). So:

- the same request under the same key is the same update: Temporal dedupes an update id within
  a run and the session remembers the update ids of its last firings across continue-as-new
  and an idle close, so it applies once and answers its first Outcome;
- the same key from another caller, on another route or with another body is another update,
  never answered with the first one's Outcome (a minting trigger mints the session from the
  update id, so another caller's key mints another session);
- this process refuses a key it has seen with a different request
  (:class:`IdempotencyKeyReusedError`, 422), remembering the last :data:`KEY_MEMORY` keys.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from archmax_temporal.workflows.errors import IdempotencyKeyReusedError

KEY_MEMORY = 10_000
"""How many keys' bindings one server process remembers to refuse their reuse."""

BINDING_CHARS = 32
"""Hex characters of the request digest in the update id (128 bits)."""


def canonical(value: Any) -> bytes:
    """``value`` as the bytes its digest is taken of: JSON, keys sorted, no whitespace."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()


def digest(*parts: Any) -> str:
    """The SHA-256 hex digest of ``parts`` in canonical form."""
    return hashlib.sha256(canonical(list(parts))).hexdigest()


def file_digest(content: str | bytes) -> str:
    """A file as a request digest counts it: by its content's digest."""
    data = content.encode() if isinstance(content, str) else content
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Keyed:
    """A request's Temporal update id, and (for a caller's key) the binding that holds it."""

    update_id: str
    slot: str | None = None
    """The key's place in :class:`KeyBindings` (``None``: no key was sent)."""
    binding: str | None = None
    fresh: bool = False
    """Whether this request bound the key (no earlier request of this process had)."""


class KeyBindings:
    """The bindings of the keys this process has served: scoped key → request digest.

    A key is bound when its request arrives (so a second, different request racing the first
    is refused too) and released when its request was refused for a reason that applied
    nothing (a 4xx), so a corrected request may reuse the key."""

    def __init__(self, capacity: int = KEY_MEMORY) -> None:
        self._capacity = capacity
        self._bound: OrderedDict[str, str] = OrderedDict()

    def bind(self, key: str, *, scope: tuple[str, ...], request: Any) -> Keyed:
        """The update id of ``request`` under ``key`` (scoped to ``scope``: method, path,
        caller); :class:`IdempotencyKeyReusedError` when the key is bound to another
        request."""
        slot = digest("key", *scope, key)
        binding = digest("request", *scope, request)[:BINDING_CHARS]
        known = self._bound.get(slot)
        if known is not None and known != binding:
            raise IdempotencyKeyReusedError(
                f"Idempotency-Key {key!r} was already used with a different request on this "
                "route; use a new key for a new request (the same key answers only the same "
                "request)"
            )
        self._bound[slot] = binding
        self._bound.move_to_end(slot)
        while len(self._bound) > self._capacity:
            self._bound.popitem(last=False)
        return Keyed(f"{key}.{binding}", slot, binding, fresh=known is None)

    def release(self, keyed: Keyed) -> None:
        """Forget the binding ``keyed`` made (its request applied nothing)."""
        if keyed.fresh and keyed.slot is not None and self._bound.get(keyed.slot) == keyed.binding:
            del self._bound[keyed.slot]

    def __len__(self) -> int:
        return len(self._bound)
