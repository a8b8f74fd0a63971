"""A scripted model's playbook: rules tried in order, what each matches on a request, and what it
answers.

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
        stream: {chunks: 40, delay_ms: 50}  # a slow writer (completion_stream)
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
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Self, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

_STATE_MARKER: Final = re.compile(r"Current state:\s*`([^`\n]+)`")
_REGEX_TOKEN: Final = re.compile(r"/(.+)/([A-Za-z]*)", re.DOTALL)
_REGEX_FLAGS: Final = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


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


# --------------------------------------------------------------------------- the conversation


def message_text(content: Any) -> str | None:
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
            text = message_text(message.get("content"))
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
            last_tool_result = message_text(messages[-1].get("content")) or ""
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


def rule_label(rule: Rule, index: int) -> str:
    """How a rule is named in the log and in its ``RecordedRequest``: its ``name``, else
    ``rules[i]``."""
    return rule.name if rule.name is not None else f"rules[{index}]"
