"""Text that is safe to keep: valid Unicode, no secrets, never too long to copy.

Pure functions, imported by workflow code, activities and the client alike.

- **Valid UTF-8.** A model's JSON (``"\\ud800"``) or a host's string can hold a lone UTF-16
  surrogate: valid in a Python ``str``, but no UTF-8 encoder takes it, so a payload carrying
  one can never be written to a history and the workflow task that schedules it fails on
  every attempt. :func:`clean` replaces each lone surrogate with U+FFFD (a well-formed pair
  becomes its character) and says whether anything changed, so the model can be told.
- **No secrets.** :func:`scrub` removes the configured keys and the shapes of keys
  (``Bearer …``, ``sk-…``) from provider text before it reaches an error, a log or a history.
- **Bounded copies.** :func:`preview` cuts a value's text form for notes and narration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

REPLACEMENT: Final = "\ufffd"
"""What a lone surrogate becomes."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")

_KEY_SHAPES: Final = (
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 [redacted]"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"), "sk-[redacted]"),
    (
        re.compile(r"(?i)\b(api[_-]?key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9._~+/=-]{6,}"),
        r"\1[redacted]",
    ),
)
"""Shapes a key takes in provider text: an ``Authorization`` header, an OpenAI-style key, an
``api_key=…`` pair."""


def clean_str(text: str) -> tuple[str, bool]:
    """``text`` with every lone surrogate replaced by U+FFFD, and whether anything changed."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text, False
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed, fixed != text


def clean(value: Any) -> tuple[Any, bool]:
    """A JSON-like value (strings, lists, mappings, keys included) with every string made
    valid UTF-8; the second value says whether anything was replaced."""
    if isinstance(value, str):
        return clean_str(value)
    if isinstance(value, list | tuple):
        changed = False
        items = []
        for item in value:
            fixed, altered = clean(item)
            items.append(fixed)
            changed = changed or altered
        return (items if changed else value), changed
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            fixed_key, key_altered = clean(key) if isinstance(key, str) else (key, False)
            fixed, altered = clean(item)
            out[fixed_key] = fixed
            changed = changed or altered or key_altered
        return (out if changed else value), changed
    return value, False


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without the given secrets (any of at least 6 characters) or anything shaped
    like a key. Applied to every provider text that may reach a history, a log or a user."""
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "[redacted]")
    for pattern, replacement in _KEY_SHAPES:
        text = pattern.sub(replacement, text)
    return text


def preview(value: Any, limit: int) -> str:
    """A one-line text form of ``value`` of at most ``limit`` characters, marked when cut
    (``…(+N chars)``): what a note or a narration line copies of a large value."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…(+{len(text) - limit} chars)"
