"""What a request says: its body, read within the limit and parsed into a typed body (JSON, or
multipart for a trigger), and its headers and query parameters, each refused with the problem
that names what is wrong."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.datastructures import UploadFile
from starlette.requests import Request

from archmax_temporal.client.http.problems import (
    MalformedRequestError,
    RequestValidationError,
    UnsupportedMediaTypeError,
)
from archmax_temporal.client.http.wire import TriggerFiring
from archmax_temporal.workflows.errors import InvalidVariableNameError, PayloadTooLargeError
from archmax_temporal.workflows.variables import invalid_names

IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")
"""An ``Idempotency-Key``: 1-200 visible ASCII characters (it becomes a Temporal update id)."""

MAX_JSON_DEPTH = 64
"""How deep a request's JSON may nest (the body itself is level 1): far beyond any event
payload, and well inside what a session's payloads can carry (their serializer stops near 250
levels, the session's own models included)."""

T = TypeVar("T", bound=BaseModel)


async def body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to be over the limit: from
    ``Content-Length`` before a byte is read, else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise MalformedRequestError("Content-Length is not a number") from None
        if size > limit:
            raise PayloadTooLargeError(f"the body is {size} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise PayloadTooLargeError(f"the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def firing(
    request: Request, raw: bytes
) -> tuple[TriggerFiring, dict[str, tuple[str, str | bytes]]]:
    """The trigger body (JSON, or multipart whose file parts are named by their variable)."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        return await _multipart(request, raw)
    if raw and content_type and not is_json(content_type):
        raise UnsupportedMediaTypeError("a trigger takes application/json or multipart/form-data")
    firing = parse(TriggerFiring, json_body(raw))
    files: dict[str, tuple[str, str | bytes]] = {}
    for variable, part in firing.files.items():
        if part.encoding == "base64":
            try:
                files[variable] = (part.name, base64.b64decode(part.content, validate=True))
            except (binascii.Error, ValueError):
                raise RequestValidationError(
                    f"files.{variable}.content is not valid base64"
                ) from None
        else:
            files[variable] = (part.name, part.content)
    return firing, files


async def _multipart(
    request: Request, raw: bytes
) -> tuple[TriggerFiring, dict[str, tuple[str, str | bytes]]]:
    sent = False

    async def replay() -> Mapping[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    copy = Request(request.scope, receive=replay)  # type: ignore[arg-type]
    try:
        form = await copy.form(max_part_size=len(raw) + 1)
    except Exception as exc:
        raise MalformedRequestError(f"the multipart body does not parse: {exc}") from None
    fields: dict[str, Any] = {}
    files: dict[str, tuple[str, str | bytes]] = {}
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            files[name] = (value.filename or name, await value.read())
        elif name == "variables":
            fields[name] = json_body(value.encode(), "variables")
        else:
            fields[name] = value
    await form.close()
    return parse(TriggerFiring, fields), files


def parse(model: type[T], data: Any) -> T:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '<body>'}: {error['msg']}"
            for error in exc.errors()
        )
        raise RequestValidationError(problems) from None


def json_body(raw: bytes, what: str = "the body") -> Any:
    """``raw`` parsed as JSON, at most :data:`MAX_JSON_DEPTH` levels deep; otherwise
    :class:`MalformedRequestError`."""
    if not raw.strip():
        return {}
    too_deep = MalformedRequestError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedRequestError(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:  # deeper than the parser's own recursion limit
        raise too_deep from None
    if depth(value) > MAX_JSON_DEPTH:
        raise too_deep
    return value


def depth(value: Any) -> int:
    """How many levels of arrays and objects ``value`` nests (a scalar: 0), counted without
    recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, level + 1)
        stack.extend((child, level + 1) for child in children)
    return deepest


def is_json(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def check_names(seeds: Mapping[str, Any]) -> None:
    bad = invalid_names(list(seeds))
    if bad:
        raise InvalidVariableNameError(
            f"invalid variable name(s): {', '.join(map(str, bad))} "
            "(names match ^[a-z][a-z0-9_]*$; 'trigger' is reserved)"
        )


def update_id(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.match(key):
        raise MalformedRequestError("Idempotency-Key must be 1-200 visible ASCII characters")
    return key


def prefers_async(request: Request) -> bool:
    preferences = request.headers.get("prefer", "")
    return any(p.split(";")[0].strip().lower() == "respond-async" for p in preferences.split(","))


def flag(raw: str | None, name: str, *, default: bool) -> bool:
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    raise MalformedRequestError(f"{name} must be true or false")


def integer(raw: str | None, name: str, default: int, low: int, high: int) -> int:
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise MalformedRequestError(f"{name} must be an integer") from None
    if not low <= value <= high:
        raise MalformedRequestError(f"{name} must be between {low} and {high}")
    return value


def event_position(raw: str) -> tuple[int, int]:
    """``Last-Event-ID`` (``seq`` or ``seq.k``) as the last event the client has."""
    seq, _, index = raw.strip().partition(".")
    try:
        position = (int(seq), int(index) if index else 0)
    except ValueError:
        raise MalformedRequestError("Last-Event-ID must be seq or seq.k") from None
    if position[0] < 0 or position[1] < 0:
        raise MalformedRequestError("Last-Event-ID must be seq or seq.k")
    return position
