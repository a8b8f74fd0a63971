"""``stream: true``: a scripted answer as server-sent events, chunked as its rule's ``stream``
shapes it.

A request with ``stream: true`` gets the same answer as server-sent events (``data:`` chunks
of ``chat.completion.chunk``, the usage last when ``stream_options.include_usage`` asks, then
``data: [DONE]``). A rule's ``stream`` shapes it: the content in ``chunks`` pieces with
``delay_ms`` before each (a model that writes slowly; a request without ``stream`` waits as
long, then gets the whole answer), and ``break_after: N`` breaks the stream off after N chunks,
by dropping the connection (``break_with: close``) or with an error event
(``break_with: error``, its ``code`` ``error_status``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from archmax_temporal.client.testing.playbook import StreamShape


def sse_events(
    completion: Mapping[str, Any], include_usage: bool, shape: StreamShape | None = None
) -> list[tuple[bytes, bool]]:
    """The same completion as a ``stream: true`` event stream, one ``data:`` event each (and
    whether it carries text). Unshaped: one delta with the role, the content and the tool
    calls whole. Shaped: the content in ``shape.chunks`` deltas (the role with the first),
    then each tool call's id and name with the first half of its arguments, then the rest.
    Then the finish, the usage when asked for, and ``[DONE]``."""
    choice = completion["choices"][0]
    message = choice["message"]
    head = {k: completion[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    calls = [{"index": index, **call} for index, call in enumerate(message.get("tool_calls") or [])]
    chunks: list[dict[str, Any]] = []
    content = message["content"]
    if shape is None:
        delta: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            delta["tool_calls"] = calls
        chunks.append(chunk(delta))
    else:
        if isinstance(content, str):
            pieces = min(shape.chunks, len(content)) or 1
            cuts = [len(content) * i // pieces for i in range(pieces + 1)]
            parts = [content[a:b] for a, b in itertools.pairwise(cuts)]
            chunks += [chunk({"content": part}) for part in parts]
        else:
            chunks.append(chunk({"content": None}))
        first_delta = chunks[0]["choices"][0]["delta"]
        chunks[0]["choices"][0]["delta"] = {"role": "assistant", **first_delta}
        for call in calls:
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            opening = {**call, "function": {**call["function"], "arguments": arguments[:half]}}
            rest = {"index": call["index"], "function": {"arguments": arguments[half:]}}
            chunks += [chunk({"tool_calls": [opening]}), chunk({"tool_calls": [rest]})]
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**head, "choices": [], "usage": completion["usage"]})
    events = [
        (f"data: {json.dumps(c)}\n\n".encode(), isinstance(_delta_text(c), str)) for c in chunks
    ]
    return [*events, (b"data: [DONE]\n\n", False)]


def _delta_text(chunk: Mapping[str, Any]) -> Any:
    """The text a chunk's delta carries (None: none)."""
    choices = chunk.get("choices") or [{}]
    return choices[0].get("delta", {}).get("content")
