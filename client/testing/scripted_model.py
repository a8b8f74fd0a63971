"""A scripted model: an OpenAI-compatible Chat Completions server driven by a YAML playbook.

Why: archmax sessions call a model through the real ``openai`` client. To test a workflow end to
end — states, tool calls, waits, event deliveries, retries — without a model bill and without
flaky, non-deterministic answers, point that client at this server instead. It speaks just
enough of the Chat Completions HTTP API (``POST /v1/chat/completions``, ``GET /v1/models``) for
the production code path to run unchanged; only the model is replaced. It is a test double for
the model, nothing more: it never calls out, and answers from the playbook alone.

A playbook is a list of rules tried in order; the first whose ``when`` holds answers::

    rules:
      - name: ask-for-order
        when:
          state: clarify                    # the last "Current state: `slug`" system marker
          last_user: "/phone/i"             # substring, or /pattern/flags (flags i, m, s)
          last_tool: archmax_note           # tool whose result is the last message
          last_tool_result: "/(?P<order>ORD-\\d+)/"
          handoff: false                    # tool_choice "none" (true) or not (false)
          any_message: "text"               # any message's content
        reply:
          content: "Your order {order} is on its way."
          tool_calls:
            - name: archmax_wait
              arguments: {reason: "waiting for {order}", until: "1d"}
        times: 2                            # only its first 2 matching requests
        delay_ms: 0                         # sleep before answering
        stream: {chunks: 40, delay_ms: 50}  # a slow writer (below)
      - when: {last_user: boom}
        error: {status: 429, retry_after: 0.2, message: "slow down"}
    default:
      content: "..."

``{name}`` in reply strings is filled from the named regex groups of the matched conditions;
an unknown ``{x}`` stays as written, and ``{{`` / ``}}`` are literal braces. A tool-call argument
that is exactly ``"{name|json}"`` becomes the captured text parsed as JSON (a list, an object),
the way a model copies a tool's JSON result into a structured argument. With nothing
matching and no ``default``, the answer is a visible ``[scripted-model] no rule matched ...``
message, so a broken playbook shows up in the transcript instead of being retried forever.
Tool-call ids are derived from the request messages, so a retried (replayed) request gets the
same ids. A handoff request (``tool_choice: "none"``) never gets tool calls, as with the real
API.

A request with ``stream: true`` gets the same answer as server-sent events (``data:`` chunks
of ``chat.completion.chunk``, the usage last when ``stream_options.include_usage`` asks, then
``data: [DONE]``). A rule's ``stream`` shapes it: the content in ``chunks`` pieces with
``delay_ms`` before each (a model that writes slowly; a request without ``stream`` waits as
long, then gets the whole answer), and ``break_after: N`` breaks the stream off after N chunks,
by dropping the connection (``break_with: close``) or with an error event
(``break_with: error``, its ``code`` ``error_status``).

Use it in-process (``with ScriptedModelServer(Playbook.load(path)) as srv: ... srv.url``) or
from a shell: ``python -m archmax_temporal.client.testing.scripted_model PLAYBOOK [--port N]``
prints the base URL.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import itertools
import json
import logging
import math
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Final, Literal, Self, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "MODEL_ID",
    "ConversationView",
    "ErrorReply",
    "Playbook",
    "PlaybookError",
    "RecordedRequest",
    "Reply",
    "Rule",
    "ScriptedModelServer",
    "ScriptedToolCall",
    "StreamShape",
    "When",
    "fill_template",
    "main",
]

logger = logging.getLogger(__name__)

MODEL_ID: Final = "scripted-model"
"""The model id ``GET /v1/models`` lists. Requests may name any model; it is echoed back."""

_STATE_MARKER: Final = re.compile(r"Current state:\s*`([^`\n]+)`")
_REGEX_TOKEN: Final = re.compile(r"/(.+)/([A-Za-z]*)", re.DOTALL)
_REGEX_FLAGS: Final = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
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


class PlaybookError(ValueError):
    """The playbook cannot be used: bad YAML, an unknown key, a malformed regex, ...

    The message names each bad place as a path such as ``rules[0].when.last_user``;
    :attr:`problems` holds the same lines one by one.
    """

    def __init__(self, problems: Sequence[str], *, source: str | None = None) -> None:
        self.problems: list[str] = list(problems)
        self.source = source
        where = f"invalid playbook {source}" if source else "invalid playbook"
        super().__init__(f"{where}: " + "; ".join(self.problems))


# --------------------------------------------------------------------------- matching tokens


@dataclass(frozen=True)
class _Token:
    """A compiled ``when`` token: a plain substring, or a ``/pattern/flags`` regex."""

    text: str
    pattern: re.Pattern[str] | None

    def match(self, value: str | None) -> dict[str, str] | None:
        """Named groups (possibly none) when ``value`` matches, else None."""
        if value is None:
            return None
        if self.pattern is None:
            return {} if self.text in value else None
        found = self.pattern.search(value)
        if found is None:
            return None
        return {k: v for k, v in found.groupdict().items() if v is not None}


@functools.lru_cache(maxsize=1024)
def _compile_token(text: str) -> _Token:
    """Parse a token; raise ValueError for a malformed ``/pattern/flags``."""
    parsed = _REGEX_TOKEN.fullmatch(text)
    if parsed is None:
        return _Token(text, None)
    body, letters = parsed.group(1), parsed.group(2)
    flags = 0
    for letter in letters:
        if letter not in _REGEX_FLAGS:
            raise ValueError(
                f"regex {text!r}: unknown flag {letter!r} (allowed: i, m, s); to match a "
                "literal string of the form /a/b, write it as a regex with escaped slashes"
            )
        flags |= _REGEX_FLAGS[letter]
    try:
        return _Token(text, re.compile(body, flags))
    except re.error as exc:
        raise ValueError(f"invalid regex {text!r}: {exc}") from None


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


# --------------------------------------------------------------------------- the conversation


def _text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a content-part list."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)


@dataclass(frozen=True)
class ConversationView:
    """What rules match on, read from one chat.completions request body."""

    state: str | None
    last_user: str | None
    last_tool: str | None
    last_tool_result: str | None
    handoff: bool
    contents: tuple[str, ...]

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ConversationView:
        raw = body.get("messages")
        messages = [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
        state: str | None = None
        last_user: str | None = None
        contents: list[str] = []
        for message in messages:
            text = _text(message.get("content"))
            if text is None:
                continue
            contents.append(text)
            role = message.get("role")
            if role in ("system", "developer"):
                markers = _STATE_MARKER.findall(text)
                if markers:
                    state = markers[-1].strip()
            elif role == "user":
                last_user = text
        last_tool: str | None = None
        last_tool_result: str | None = None
        if messages and messages[-1].get("role") == "tool":
            last_tool_result = _text(messages[-1].get("content")) or ""
            last_tool = _tool_name(messages, messages[-1].get("tool_call_id"))
        return cls(
            state=state,
            last_user=last_user,
            last_tool=last_tool,
            last_tool_result=last_tool_result,
            handoff=body.get("tool_choice") == "none",
            contents=tuple(contents),
        )


def _tool_name(messages: Sequence[Mapping[str, Any]], call_id: Any) -> str | None:
    """The function name of the assistant tool call ``call_id`` answers."""
    for message in reversed(messages):
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and call.get("id") == call_id:
                function = call.get("function")
                if isinstance(function, dict) and isinstance(function.get("name"), str):
                    return cast(str, function["name"])
                return None
    return None


# --------------------------------------------------------------------------- the playbook


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class When(_Strict):
    """Conditions of a rule; every given one must hold, an absent one does not matter."""

    state: str | None = None
    last_user: str | None = None
    last_tool: str | None = None
    last_tool_result: str | None = None
    handoff: bool | None = None
    any_message: str | None = None

    @field_validator("last_user", "last_tool_result", "any_message")
    @classmethod
    def _valid_token(cls, value: str | None) -> str | None:
        if value is not None:
            _compile_token(value)
        return value

    def match(self, view: ConversationView) -> dict[str, str] | None:
        """Named groups of the regex conditions when all conditions hold, else None."""
        if self.state is not None and view.state != self.state:
            return None
        if self.handoff is not None and view.handoff != self.handoff:
            return None
        if self.last_tool is not None and view.last_tool != self.last_tool:
            return None
        groups: dict[str, str] = {}
        for token, value in (
            (self.last_user, view.last_user),
            (self.last_tool_result, view.last_tool_result),
        ):
            if token is None:
                continue
            found = _compile_token(token).match(value)
            if found is None:
                return None
            groups.update(found)
        if self.any_message is not None:
            compiled = _compile_token(self.any_message)
            # The most recent matching message supplies the groups.
            for text in reversed(view.contents):
                found = compiled.match(text)
                if found is not None:
                    groups.update(found)
                    break
            else:
                return None
        return groups


class ScriptedToolCall(_Strict):
    """One tool call of a reply; string leaves of ``arguments`` are templated. ``raw_arguments``
    is sent verbatim instead (malformed JSON, escapes a model may emit)."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None


class Reply(_Strict):
    """An assistant message: content, tool calls, or both."""

    content: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if self.content is None and not self.tool_calls:
            raise ValueError("a reply needs 'content' or 'tool_calls'")
        return self


class ErrorReply(_Strict):
    """An HTTP error answer, shaped like OpenAI's error JSON; or, with ``body``, that text
    sent verbatim (a gateway's HTML page, even under a 200) as ``content_type``."""

    status: int = Field(ge=200, le=599)
    message: str = "scripted error"
    retry_after: float | None = Field(default=None, ge=0)
    type: str | None = None
    code: str | None = None
    body: str | None = None
    content_type: str = "text/html"

    @model_validator(mode="after")
    def _an_error_or_a_body(self) -> Self:
        if self.body is None and self.status < 400:
            raise ValueError("an error reply without a raw body needs a 4xx or 5xx status")
        return self


class StreamShape(_Strict):
    """How a streamed answer is written: the content in ``chunks`` pieces, ``delay_ms``
    before each; with ``break_after``, the stream breaks off after that many chunks."""

    chunks: int = Field(default=1, ge=1, le=10_000)
    delay_ms: int = Field(default=0, ge=0)
    break_after: int | None = Field(default=None, ge=0)
    break_with: Literal["close", "error"] = "close"
    error_status: int | None = Field(default=None, ge=400, le=599)
    error_message: str = "the stream broke"


class Rule(_Strict):
    """``when`` this holds, answer ``reply`` or ``error`` (exactly one)."""

    name: str | None = None
    when: When = Field(default_factory=When)
    reply: Reply | None = None
    error: ErrorReply | None = None
    times: int | None = Field(default=None, ge=1)
    delay_ms: int = Field(default=0, ge=0)
    stream: StreamShape | None = None

    @model_validator(mode="after")
    def _one_answer(self) -> Self:
        if (self.reply is None) == (self.error is None):
            got = "both" if self.reply is not None else "neither"
            raise ValueError(f"a rule needs exactly one of 'reply' or 'error' (got {got})")
        return self


class Playbook(_Strict):
    """Rules tried in order, and an optional default reply."""

    rules: list[Rule] = Field(default_factory=list)
    default: Reply | None = None

    @classmethod
    def from_data(cls, data: object, *, source: str | None = None) -> Playbook:
        """Validate parsed YAML/JSON data; raise :class:`PlaybookError`."""
        if not isinstance(data, dict):
            kind = "nothing" if data is None else type(data).__name__
            raise PlaybookError(
                [f"expected a mapping with 'rules' and/or 'default', got {kind}"], source=source
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise PlaybookError(_problems(exc), source=source) from None

    @classmethod
    def from_yaml(cls, text: str, *, source: str | None = None) -> Playbook:
        """Parse a YAML playbook; raise :class:`PlaybookError`."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PlaybookError([f"not valid YAML: {exc}"], source=source) from None
        return cls.from_data(data, source=source)

    @classmethod
    def load(cls, path: str | Path) -> Playbook:
        """Read and parse a YAML playbook file; raise :class:`PlaybookError`."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise PlaybookError([f"cannot read: {exc}"], source=str(path)) from None
        return cls.from_yaml(text, source=str(path))


def _problems(exc: ValidationError) -> list[str]:
    problems = []
    for error in exc.errors():
        where = ""
        for part in error["loc"]:
            where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else part)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            parents = [part for part in error["loc"][:-1] if isinstance(part, str)]
            model = _MODEL_OF_KEY.get(parents[-1], Playbook) if parents else Playbook
            message = f"unknown key (allowed: {', '.join(model.model_fields)})"
        problems.append(f"{where or '<top>'}: {message}")
    return problems


_MODEL_OF_KEY: Final[dict[str, type[BaseModel]]] = {
    "rules": Rule,
    "when": When,
    "reply": Reply,
    "default": Reply,
    "error": ErrorReply,
    "tool_calls": ScriptedToolCall,
    "stream": StreamShape,
}


def _rule_label(rule: Rule, index: int) -> str:
    return rule.name if rule.name is not None else f"rules[{index}]"


# --------------------------------------------------------------------------- responses


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
        chars += len(_text(message.get("content")) or "")
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                chars += len(str(function.get("name", ""))) + len(
                    str(function.get("arguments", ""))
                )
    return chars


def _completion(
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


def _render_reply(
    reply: Reply, groups: Mapping[str, str], view: ConversationView
) -> tuple[str | None, list[tuple[str, str]]]:
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


def _sse(
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


def _error_body(status: int, message: str, type_: str | None, code: str | None) -> dict[str, Any]:
    default_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error")
    return {
        "error": {"message": message, "type": type_ or default_type, "param": None, "code": code}
    }


# --------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class RecordedRequest:
    """One chat.completions request the server answered."""

    path: str
    body: dict[str, Any]
    rule: str | None
    """The answering rule's name (``rules[i]`` when unnamed); None for default / no match."""
    rule_index: int | None
    had_authorization: bool
    status: int
    state: str | None
    handoff: bool
    response: dict[str, Any]
    """The JSON answered (for a streamed answer, the equivalent ``chat.completion``)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.body.get("messages", []))


@dataclass(frozen=True)
class _Answer:
    status: int
    payload: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    raw: tuple[bytes, str] | None = None
    """A verbatim body and its content type, sent instead of ``payload``."""
    stream: StreamShape | None = None
    """How a streamed answer is written (None: at once)."""


class ScriptedModelServer:
    """The playbook served over HTTP on ``host:port`` (0 = a free port) in a daemon thread."""

    def __init__(self, playbook: Playbook, host: str = "127.0.0.1", port: int = 0) -> None:
        self.playbook = playbook
        self.host = host
        self._port = port
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._counts: dict[int, int] = {}
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self.stream_gate: threading.Event | None = None
        """When set to an event, a stream's last chunk waits for it (up to a minute): a test
        can show that text reached a client while the answer was still being written."""
        self.gate_opened: bool | None = None
        """Whether the last stream's gate opened in time (``None``: no gate was waited on)."""

    # lifecycle

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        """The request handler the server runs (a subclass may wrap it, e.g. to time it)."""
        return _Handler

    def start(self) -> Self:
        """Bind and serve; idempotent. Returns self."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer((self.host, self._port), self.handler_class())
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-model:{self.port}",
            daemon=True,
        )
        self._thread.start()
        logger.info("scripted model serving at %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving and close open connections; idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (the requested one before :meth:`start`)."""
        if self._httpd is None:
            return self._port
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for ``openai.OpenAI(base_url=...)``, including ``/v1``."""
        if self._httpd is None:
            raise RuntimeError("ScriptedModelServer is not started")
        return f"http://{self.host}:{self.port}/v1"

    def reset_counters(self) -> None:
        """Forget how often each rule answered, so ``times`` counts from zero again."""
        with self._lock:
            self._counts.clear()

    # answering

    def _answer_chat(
        self, path: str, body: dict[str, Any], had_authorization: bool
    ) -> tuple[_Answer, bool]:
        """The answer for one chat.completions request, recorded; and whether to stream."""
        view = ConversationView.from_body(body)
        with self._lock:
            chosen: tuple[int, Rule, dict[str, str]] | None = None
            for index, rule in enumerate(self.playbook.rules):
                if rule.times is not None and self._counts.get(index, 0) >= rule.times:
                    continue
                groups = rule.when.match(view)
                if groups is not None:
                    self._counts[index] = self._counts.get(index, 0) + 1
                    chosen = (index, rule, groups)
                    break
        answer: _Answer
        if chosen is not None:
            index, rule, groups = chosen
            label: str | None = _rule_label(rule, index)
            delay_s = rule.delay_ms / 1000
            if rule.error is not None:
                error = rule.error
                headers: tuple[tuple[str, str], ...] = ()
                if error.retry_after is not None:
                    headers = (("Retry-After", _format_seconds(error.retry_after)),)
                answer = _Answer(
                    error.status,
                    _error_body(
                        error.status, fill_template(error.message, groups), error.type, error.code
                    ),
                    headers,
                    delay_s,
                    None
                    if error.body is None
                    else (fill_template(error.body, groups).encode("utf-8"), error.content_type),
                )
            else:
                assert rule.reply is not None
                content, calls = _render_reply(rule.reply, groups, view)
                answer = _Answer(
                    200, _completion(body, content, calls), (), delay_s, stream=rule.stream
                )
        else:
            label = None
            if self.playbook.default is not None:
                content, calls = _render_reply(self.playbook.default, {}, view)
            else:
                last_user = None if view.last_user is None else view.last_user[:80]
                content = (
                    f"[scripted-model] no rule matched (state={view.state}, last_user={last_user})"
                )
                calls = []
                logger.warning("scripted model: %s", content)
            answer = _Answer(200, _completion(body, content, calls))
        record = RecordedRequest(
            path=path,
            body=body,
            rule=label,
            rule_index=chosen[0] if chosen is not None else None,
            had_authorization=had_authorization,
            status=answer.status,
            state=view.state,
            handoff=view.handoff,
            response=answer.payload,
        )
        with self._lock:
            self.requests.append(record)
        logger.info(
            "scripted model: %s state=%s handoff=%s rule=%s status=%d",
            path,
            view.state,
            view.handoff,
            label,
            answer.status,
        )
        return answer, bool(body.get("stream")) and answer.status == 200

    def _track(self, connection: socket.socket, active: bool) -> None:
        with self._lock:
            if active:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)


def _format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ScriptedModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request (a worker SIGKILLed during a model call) is no
        error of the server's: dropped quietly. Anything else is printed as usual."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            logger.debug("scripted model: client %s went away mid-request", client_address)
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-model"
    disable_nagle_algorithm = True  # headers and body leave at once (no 40 ms ACK stall)
    timeout = 60  # an idle keep-alive connection frees its thread after this

    @property
    def _owner(self) -> ScriptedModelServer:
        return cast(_HTTPServer, self.server).owner

    def setup(self) -> None:
        super().setup()
        self._owner._track(self.connection, True)

    def finish(self) -> None:
        self._owner._track(self.connection, False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("scripted model http: " + format, *args)

    def _route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def do_GET(self) -> None:
        route = self._route()
        model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "scripted"}
        if route in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [model]})
        elif route.startswith(("/v1/models/", "/models/")):
            self._send_json(200, {**model, "id": route.rsplit("/", 1)[1]})
        else:
            self._send_json(404, _error_body(404, f"no route GET {route}", None, None))

    def do_POST(self) -> None:
        route = self._route()
        body = self._read_body()
        if route not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, _error_body(404, f"no route POST {route}", None, None))
            return
        if body is None:
            return
        if not isinstance(body.get("messages"), list):
            self._send_json(400, _error_body(400, "'messages' must be a list", None, None))
            return
        had_authorization = bool(self.headers.get("Authorization"))
        answer, stream = self._owner._answer_chat(route, body, had_authorization)
        if answer.delay_s > 0:
            time.sleep(answer.delay_s)
        shape = answer.stream
        if answer.raw is not None:
            self._send(answer.status, answer.raw[0], answer.raw[1], answer.headers)
        elif stream:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            events = _sse(answer.payload, include_usage, shape)
            if shape is None:
                self._send(200, b"".join(e for e, _ in events), "text/event-stream", ())
            else:
                self._send_stream(events, shape)
        elif shape is not None:  # a slow writer takes as long to answer whole
            written = shape.chunks if shape.break_after is None else shape.break_after
            time.sleep(written * shape.delay_ms / 1000)
            if shape.break_after is not None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._send_json(answer.status, answer.payload, answer.headers)
        else:
            self._send_json(answer.status, answer.payload, answer.headers)

    def _send_stream(self, events: list[tuple[bytes, bool]], shape: StreamShape) -> None:
        """``events`` in chunked transfer encoding, each written and flushed on its own, with
        ``shape.delay_ms`` before each that carries content; broken off as ``shape`` says."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for sent, (event, text) in enumerate(events):
            if sent == shape.break_after:
                if shape.break_with == "close":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                error: dict[str, Any] = {"message": shape.error_message, "type": "server_error"}
                if shape.error_status is not None:
                    error["code"] = shape.error_status
                self._write_chunk(f"data: {json.dumps({'error': error})}\n\n".encode())
                break
            if shape.delay_ms and text:
                time.sleep(shape.delay_ms / 1000)
            gate = self._owner.stream_gate
            if gate is not None and sent == len(events) - 1:
                self._owner.gate_opened = gate.wait(timeout=60)
            self._write_chunk(event)
        self.wfile.write(b"0\r\n\r\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _read_body(self) -> dict[str, Any] | None:
        """The JSON object body; on failure an error is already sent (none to a client gone
        before its body was whole) and None returned."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._send_json(400, _error_body(400, "bad Content-Length", None, None))
            return None
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:  # the client went away before its body was whole
            self.close_connection = True
            return None
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            self._send_json(400, _error_body(400, f"body is not JSON: {exc}", None, None))
            return None
        if not isinstance(body, dict):
            self._send_json(400, _error_body(400, "body must be a JSON object", None, None))
            return None
        return body

    def _send_json(
        self, status: int, payload: Mapping[str, Any], headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        try:
            data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in the playbook: send it as an escape
            data = json.dumps(payload).encode("ascii")
        self._send(status, data, "application/json", headers)

    def _send(
        self, status: int, data: bytes, content_type: str, headers: Sequence[tuple[str, str]]
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m client.scripted_model PLAYBOOK``: serve until interrupted; print the URL."""
    parser = argparse.ArgumentParser(
        prog="python -m client.scripted_model",
        description="Serve a scripted, OpenAI-compatible model from a YAML playbook.",
    )
    parser.add_argument("playbook", type=Path, help="the YAML playbook")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (0 = a free one)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    try:
        playbook = Playbook.load(args.playbook)
    except PlaybookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server = ScriptedModelServer(playbook, host=args.host, port=args.port).start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    with server:
        print(server.url, flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
