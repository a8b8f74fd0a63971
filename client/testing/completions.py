"""The scripted model's answers as the Chat Completions API writes them: a ``chat.completion``
with its templates filled, or an error's body.

Tool-call ids are derived from the request messages, so a retried (replayed) request gets the
same ids. A handoff request (``tool_choice: "none"``) never gets tool calls, as with the real
API.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from archmax_temporal.client.testing.playbook import ConversationView, Reply, message_text

MODEL_ID: Final = "scripted-model"
"""The model id ``GET /v1/models`` lists. Requests may name any model; it is echoed back."""

_TEMPLATE: Final = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """Fill ``{name}`` from ``values``; unknown names stay verbatim; ``{{``/``}}`` are braces."""

    def replace(found: re.Match[str]) -> str:
        token = found.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = found.group(1)
        return values.get(name, token)

    return _TEMPLATE.sub(replace, template)


_JSON_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\|json\}")


def _fill_json(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        slot = _JSON_SLOT.fullmatch(value)
        if slot is not None and slot.group(1) in values:
            try:  # a whole argument copied as data, as a model copies a tool's JSON result
                return json.loads(values[slot.group(1)])
            except json.JSONDecodeError:
                return values[slot.group(1)]
        return fill_template(value, values)
    if isinstance(value, list):
        return [_fill_json(item, values) for item in value]
    if isinstance(value, dict):
        return {key: _fill_json(item, values) for key, item in value.items()}
    return value


def _request_hash(messages: Any) -> str:
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _estimate_tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _prompt_chars(messages: Any) -> int:
    chars = 0
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        chars += len(message_text(message.get("content")) or "")
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                chars += len(str(function.get("name", ""))) + len(
                    str(function.get("arguments", ""))
                )
    return chars


def completion(
    body: Mapping[str, Any], content: str | None, calls: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    """A ``chat.completion`` object with deterministic ids."""
    messages = body.get("messages")
    digest = _request_hash(messages)
    tool_calls = [
        {
            "id": f"call_{digest[:16]}_{index}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        for index, (name, arguments) in enumerate(calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    completion_chars = len(content or "") + sum(len(n) + len(a) for n, a in calls)
    prompt_tokens = _estimate_tokens(_prompt_chars(messages))
    completion_tokens = _estimate_tokens(completion_chars)
    model = body.get("model")
    return {
        "id": f"chatcmpl-{digest[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model if isinstance(model, str) else MODEL_ID,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def render_reply(
    reply: Reply, groups: Mapping[str, str], view: ConversationView
) -> tuple[str | None, list[tuple[str, str]]]:
    """``reply``'s content and tool calls (name, JSON arguments), its templates filled from
    ``groups``; a handoff request gets no tool calls."""
    content = None if reply.content is None else fill_template(reply.content, groups)
    calls = [
        (
            call.name,
            call.raw_arguments
            if call.raw_arguments is not None
            else json.dumps(_fill_json(call.arguments, groups), ensure_ascii=False),
        )
        for call in reply.tool_calls
    ]
    if view.handoff and calls:
        # tool_choice "none": the real API never answers with tool calls.
        calls = []
        if content is None:
            content = ""
    return content, calls


def error_body(status: int, message: str, type_: str | None, code: str | None) -> dict[str, Any]:
    """An error answer's JSON, shaped like OpenAI's (its ``type`` from the status unless given)."""
    default_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error")
    return {
        "error": {"message": message, "type": type_ or default_type, "param": None, "code": code}
    }
