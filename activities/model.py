"""The model call: one Chat Completions request through the real ``openai`` client.

Any OpenAI-compatible endpoint works (OpenAI, Azure, vLLM, Ollama, llama.cpp, LM Studio,
gateways, or the scripted model the tests start). The endpoint and key are worker
configuration read from the environment; they never travel in an activity input, so no key
ever lands in a workflow history.

Temporal owns retries: the client's own retries are off, and :func:`translate_error` is the one
place provider errors become Temporal errors, in three kinds:

- **the deployment's** (no model configured, a missing or rejected key: 401/403, an unknown
  model: 404, an endpoint that refuses connections): ``ModelConfigurationError``, retried
  without end at a capped interval, so the turn waits, visibly, until the worker is fixed;
  never a turn failure, never an ``on_error`` route;
- **transient** (408/409/429/5xx, a timed-out request): ``ModelUnavailable``, retried with
  backoff (a ``Retry-After`` becomes the next retry delay) for :data:`TRANSIENT_ATTEMPTS`
  attempts, then the final ``ModelCallError``;
- **the call's** (400, 422, a 200 whose body is not JSON or no chat completion, whether the
  client's own parsing or ours finds it): the final ``ModelCallError``, which fails the turn
  through ``on_error`` after one attempt.

Calls stream (``stream=True``; ``ARCHMAX_STREAMING=0`` turns it off for an endpoint that
misbehaves): the message, text and tool calls, is assembled from the chunks into exactly what
the whole answer would have been, so nothing downstream (the result, the history) changes.
What breaks mid-stream maps onto the same kinds (:func:`stream_error`): a dropped connection
or an error event without a status is transient, one with a status is read as that status, a
chunk that is no chat completion chunk is the call's. While a session's own call streams, its
text goes out as advisory live events (:mod:`archmax_temporal.live`), never into the history.

Every provider text is scrubbed of the configured key and of key shapes before it reaches an
error, a log or a history, and the model's own text is made valid UTF-8.
The activity heartbeats while it waits, so a worker that dies mid-call is noticed within the
heartbeat timeout, not at the end of the call's time budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.logs import get_logger
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.live import LiveChannel, LiveText, message_id
from archmax_temporal.workflows.contracts.model import BUDGET_EXHAUSTED, MODEL_ACTIVITY
from archmax_temporal.workflows.errors import ModelCallError
from archmax_temporal.workflows.models import (
    Message,
    ModelCallInput,
    ModelCallResult,
    ToolCall,
    ToolSchema,
    Usage,
)
from archmax_temporal.workflows.text import clean_str, scrub

if TYPE_CHECKING:  # the ``openai`` package loads when a client is built (~1 s of imports)
    import openai
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletionChunk

log = get_logger("archmax.model")

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses worth another attempt, besides every 5xx."""

CONFIGURATION_STATUS = frozenset({401, 403, 404})
"""HTTP statuses that say the deployment is wrong (key, permission, model id): waited out."""

PLACEHOLDER_KEY = "not-set"
"""Sent when no key is configured: local endpoints (Ollama, vLLM) need none."""

TRANSIENT_ATTEMPTS = 6
"""Attempts a call gets against transient failures (429, 5xx, timeouts) before the turn fails."""

CONFIGURATION_RETRY_CAP = timedelta(seconds=60)
"""The longest wait between attempts while the deployment is misconfigured."""

HEARTBEAT_EVERY = timedelta(seconds=5)
"""How often a running model call tells Temporal its worker is alive."""

CONFIGURATION_ERROR = "ModelConfigurationError"
"""The ``ApplicationError`` type of a deployment error: retryable, never a turn failure."""


@dataclass(frozen=True)
class ModelConfig:
    """Where model calls go, and the model id used when neither state nor spec names one."""

    base_url: str | None = None
    api_key: str | None = None
    default_model: str | None = None
    request_timeout: float = 170.0
    streaming: bool = True
    """Whether calls stream (``ARCHMAX_STREAMING``, default on; ``0`` for an endpoint that
    misbehaves with server-sent events): only then is there live text."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ModelConfig:
        """archmax's names first (``ARCHMAX_API_BASE_URL``, ``ARCHMAX_API_KEY``,
        ``ARCHMAX_MODEL``), then ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``; and
        ``ARCHMAX_STREAMING``."""
        env = os.environ if env is None else env
        return cls(
            base_url=env.get("ARCHMAX_API_BASE_URL") or env.get("OPENAI_BASE_URL") or None,
            api_key=env.get("ARCHMAX_API_KEY") or env.get("OPENAI_API_KEY") or None,
            default_model=env.get("ARCHMAX_MODEL") or None,
            streaming=streaming_from(env.get("ARCHMAX_STREAMING")),
        )

    def describe(self) -> str:
        """A one-line, key-free description for narration."""
        return f"{self.default_model or 'unset'} @ {self.base_url or 'api.openai default'}"


STREAMING_OFF = frozenset({"0", "false", "off", "no"})
"""The values of ``ARCHMAX_STREAMING`` that turn streaming off."""


def streaming_from(text: str | None) -> bool:
    """``ARCHMAX_STREAMING``: on unless ``0`` (``false``, ``off``, ``no``)."""
    return (text or "").strip().lower() not in STREAMING_OFF


def openai_client(config: ModelConfig, *, max_retries: int = 0) -> openai.AsyncOpenAI:
    """The one place an ``AsyncOpenAI`` client is built from a :class:`ModelConfig`.

    Retries default to off: inside an activity Temporal owns them. A host-side caller with no
    Temporal around it (the ``grade`` judge) asks for a few of the client's own.
    """
    import openai

    return openai.AsyncOpenAI(
        base_url=config.base_url,
        api_key=config.api_key or PLACEHOLDER_KEY,
        max_retries=max_retries,
        timeout=config.request_timeout,
        # A plain httpx client: openai's own wrapper schedules its close from __del__,
        # which can land inside a workflow's event loop when the worker is collected.
        http_client=openai.DefaultAsyncHttpxClient(timeout=config.request_timeout),
    )


class ModelActivities:
    """Activities that talk to the model endpoint, sharing one client per worker."""

    def __init__(
        self,
        config: ModelConfig,
        client: openai.AsyncOpenAI | None = None,
        logs: TranscriptLogs | None = None,
        live: LiveChannel | None = None,
    ) -> None:
        self._config = config
        self._client = client or openai_client(config)
        self._logs = logs
        """The store's conversation logs (calls that carry only what is new read the rest)."""
        self._live = live
        """Where a streamed call's text goes while it is written (None: nowhere)."""

    @activity.defn(name=MODEL_ACTIVITY)
    async def complete(self, call: ModelCallInput) -> ModelCallResult:
        """One chat completion with the state's tools; usage recorded per call."""
        info = activity.info()
        model = call.model or self._config.default_model
        if not model:
            raise configuration_error(
                "no model configured: set ARCHMAX_MODEL, settings.model or the state's model",
                info.attempt,
            )
        bound = log.bind(
            session_id=call.session_id,
            state=call.state,
            activity=info.activity_type,
            attempt=info.attempt,
            model=model,
        )
        messages, tools, logged, unwritten = await self._conversation(call)
        secrets = (self._config.api_key,)
        import openai  # loaded with the client (__init__)

        request = chat_request(model, messages, tools, call.tool_choice)
        live = self._live_text(call, info)
        answering: Awaitable[Any]
        if self._config.streaming:
            answering = self._streamed(request, live)
        else:
            answering = self._client.chat.completions.create(**request)
        if live is not None:
            live.begin()
        try:
            response = await _heartbeating(answering, budget_ms=call.budget_ms)
            try:
                result = _result(response, call, model)
            except Exception as exc:  # a 200 whose body is not a chat completion
                body = scrub(str(response)[:300], secrets)
                raise ModelCallError(
                    f"model endpoint answered with a body that is no chat completion "
                    f"({type(exc).__name__}): {body}"
                ).to_application_error() from None
        except BaseException as exc:
            if live is not None:
                live.void()
            if isinstance(exc, TimeoutError):
                raise ApplicationError(
                    f"budget.timeoutMs ({call.budget_ms} ms) exhausted by a model call in "
                    f"state '{call.state}'",
                    type=BUDGET_EXHAUSTED,
                    non_retryable=True,
                ) from None
            if isinstance(exc, BrokenStream):
                error = stream_error(exc.cause, attempt=info.attempt, secrets=secrets)
            elif isinstance(exc, openai.OpenAIError):
                error = translate_error(exc, attempt=info.attempt, secrets=secrets)
            elif isinstance(exc, UNREADABLE):  # the client's own parsing of a 2xx body failed
                error = unreadable_answer(exc, secrets)
            else:
                raise
            bound.warning("model call failed", error=error.message, kind=error.type)
            raise error from None
        if live is not None:
            live.finish()
        if unwritten is not None and self._logs is not None and call.log is not None:
            answer = Message(
                role="assistant",
                content=result.content,
                tool_calls=result.tool_calls,
                state=call.state,
            )  # as the workflow adds it to the conversation (``log_answer``)
            logs = self._logs
            written, end = await asyncio.to_thread(
                logs.extend, call.session_id, call.log, [*unwritten, answer]
            )
            logged = (len(written), end)
        if logged is not None:
            result.logged, result.log_hash = logged
        return result

    def _live_text(self, call: ModelCallInput, info: activity.Info) -> LiveText | None:
        """Where this call's text goes as it is written: a session's own turn's call (one
        that keeps the store's log) that streams, with a channel; a rubric's grader never."""
        if self._live is None or not self._config.streaming or call.log is None:
            return None
        return LiveText(
            self._live,
            call.session_id,
            message_id(info.workflow_run_id, info.activity_id),
            info.attempt,
        )

    async def _streamed(self, request: dict[str, Any], live: LiveText | None) -> _Assembled:
        """The call with ``stream=True``: chunks assembled as they arrive (their text to
        ``live``). An error once the answer started raises :class:`BrokenStream`; a chunk
        that is no chat completion chunk, one of :data:`UNREADABLE`."""
        import openai

        stream = await self._client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
        assembled = _Assembled()
        try:
            async for chunk in stream:
                text = assembled.add(chunk)
                if text and live is not None:
                    live.write(text)
        except (openai.APIError, OSError) as exc:
            raise BrokenStream(exc) from exc
        except (asyncio.CancelledError, *UNREADABLE):
            raise
        except Exception as exc:  # an older client's raw transport error
            raise BrokenStream(exc) from exc
        finally:
            with contextlib.suppress(Exception):
                await stream.close()
        return assembled

    async def _conversation(
        self, call: ModelCallInput
    ) -> tuple[list[Message], list[ToolSchema], tuple[int, str] | None, list[Message] | None]:
        """The messages and tools the call sends: as given, or, for a call that refers to the
        store's log, the new messages (the tool results it names by digest read back from the
        store) appended to it first (a retry finds them there) and the whole conversation
        read back after the system prompt; and the log's new end. A call that logs its
        answer (``log_answer``) writes nothing yet: the new messages come back last, for
        one write with the answer once it is there."""
        if call.log is None:
            return call.messages, call.tools, None, None
        if self._logs is None:
            raise ApplicationError(
                "this worker keeps no conversation logs (build it with a session store)",
                type="ModelCallError",
                non_retryable=True,
            )
        return await asyncio.to_thread(_conversation_from, self._logs, call)


def _conversation_from(
    logs: TranscriptLogs, call: ModelCallInput
) -> tuple[list[Message], list[ToolSchema], tuple[int, str] | None, list[Message] | None]:
    """:meth:`ModelActivities._conversation` for a call that refers to the store's log: its
    reads and its one write, in one trip to a worker thread (each trip costs the event loop a
    hand-off, and a model call made four)."""
    new = call.messages
    if call.refs:  # tool results named by digest: read back from the store
        new = logs.resolve(call.session_id, new, call.refs)
    unwritten: list[Message] | None = None
    logged: tuple[int, str] | None = None
    assert call.log is not None
    if call.log_answer:
        conversation, unwritten = [*logs.read(call.session_id, call.log), *new], new
    else:
        conversation, end = logs.extend(call.session_id, call.log, new)
        logged = (len(conversation), end)
    system = logs.prompt(call.session_id, call.system_digest or "", call.system)
    tools = logs.tools(call.session_id, call.tools_digest, call.tools)
    return [Message(role="system", content=system), *conversation], tools, logged, unwritten


async def _heartbeating(call: Awaitable[Any], *, budget_ms: int | None = None) -> Any:
    """Await ``call`` while heartbeating every :data:`HEARTBEAT_EVERY` (only inside an
    activity): a dead worker's call is retried elsewhere within the heartbeat timeout. With a
    budget, ``TimeoutError`` once it has passed (the call is abandoned, as archmax does)."""
    task = asyncio.ensure_future(call)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_ms / 1000 if budget_ms else None
    try:
        while True:
            wait = HEARTBEAT_EVERY.total_seconds()
            if deadline is not None:
                wait = min(wait, max(deadline - loop.time(), 0.0))
            done, _ = await asyncio.wait({task}, timeout=wait)
            if done:
                return task.result()
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError
            if activity.in_activity():
                activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()


def _result(response: Any, call: ModelCallInput, model: str) -> ModelCallResult:
    """The activity's result from a parsed completion, or from the chunks of a streamed one
    (the same result for the same answer): text and arguments made valid UTF-8 (a lone
    surrogate in them would wedge every history write that carries them)."""
    if isinstance(response, _Assembled):
        content, calls, finish_reason, reported, name = response.parts()
    else:
        if not response.choices:
            raise ValueError("no choices")
        choice = response.choices[0]
        content = choice.message.content
        calls = [
            (tc.id, tc.function.name, tc.function.arguments)
            for tc in (choice.message.tool_calls or [])
            if tc.type == "function"
        ]
        finish_reason, reported, name = choice.finish_reason, response.usage, response.model
    tool_calls = [
        ToolCall(
            id=clean_str(call_id)[0],
            name=clean_str(function)[0],
            arguments=clean_str(arguments or "{}")[0],
        )
        for call_id, function, arguments in calls
    ]
    if call.tool_choice == "none":
        tool_calls = []
    usage = usage_of(reported)
    log.info("model call", tool_calls=len(tool_calls), tokens=usage.total_tokens)
    return ModelCallResult(
        content=clean_str(content)[0] if isinstance(content, str) else None,
        tool_calls=tool_calls,
        model=name or model,
        finish_reason=finish_reason,
        usage=usage,
    )


class BrokenStream(Exception):
    """A streamed answer broke off after it started (:func:`stream_error` translates it)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _Assembled:
    """A streamed answer put back together chunk by chunk, as the ``openai`` client's own
    accumulation does: the first choice's text and tool calls (by ``index``; their ``id``,
    ``name`` and ``arguments`` strings concatenated), the last finish reason, the usage of
    the closing chunk (``stream_options.include_usage``) and the model."""

    def __init__(self) -> None:
        self._text: list[str] | None = None
        self._calls: dict[int, dict[str, str]] = {}
        self._finish: str | None = None
        self._usage: CompletionUsage | None = None
        self._model: str | None = None
        self._choices = 0
        self.chunks = 0

    def add(self, chunk: ChatCompletionChunk) -> str:
        """Take one chunk in; the text it adds."""
        self.chunks += 1
        self._model = self._model or chunk.model
        if chunk.usage is not None:
            self._usage = chunk.usage
        added = ""
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            self._choices += 1
            delta = choice.delta
            if isinstance(delta.content, str):
                self._text = [*(self._text or []), delta.content]
                added += delta.content
            for piece in delta.tool_calls or ():
                slot = self._calls.setdefault(
                    piece.index, {"id": "", "type": "", "name": "", "arguments": ""}
                )
                slot["id"] += piece.id or ""
                slot["type"] = piece.type or slot["type"]
                if piece.function is not None:
                    slot["name"] += piece.function.name or ""
                    slot["arguments"] += piece.function.arguments or ""
            if choice.finish_reason is not None:
                self._finish = choice.finish_reason
        return added

    def parts(
        self,
    ) -> tuple[str | None, list[tuple[str, str, str]], str | None, CompletionUsage | None, str]:
        """What a whole answer holds: content, ``(id, name, arguments)`` of each function
        call, finish reason, usage and model; ``ValueError`` when no choice ever came."""
        if not self._choices:
            raise ValueError("no choices")
        calls = [
            (slot["id"], slot["name"], slot["arguments"])
            for _, slot in sorted(self._calls.items())
            if slot["type"] in ("", "function")
        ]
        content = "".join(self._text) if self._text is not None else None
        return content, calls, self._finish, self._usage, self._model or ""

    def __repr__(self) -> str:
        return f"<a stream of {self.chunks} chunk(s), {self._choices} with a choice>"


def chat_request(
    model: str, messages: list[Message], tools: list[ToolSchema], tool_choice: str
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for one call.

    The conversation and the tool schemas go as ``extra_body``, already in wire shape: the
    client would otherwise walk every message with its typed-parameter transform (about half
    a millisecond a message, on the worker's event loop), so a model call of a long session
    would cost more the longer the session, for a transform that changes nothing in these
    plain JSON values (a test holds the two request bodies equal). ``messages`` itself is sent
    empty and replaced by ``extra_body``'s, which the client merges over the typed body.
    """
    body: dict[str, Any] = {"messages": [to_openai_message(m) for m in messages]}
    request: dict[str, Any] = {"model": model, "messages": [], "extra_body": body}
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
        request["tool_choice"] = tool_choice
    return request


def to_openai_message(message: Message) -> dict[str, Any]:
    """A transcript entry in Chat Completions shape (archmax's markers stay behind)."""
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content or "",
        }
    if message.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": tc.arguments},
                }
                for tc in message.tool_calls
            ]
        return out
    return {"role": message.role, "content": message.content or ""}


def configuration_error(message: str, attempt: int) -> ApplicationError:
    """A deployment error: retryable, the wait doubling per attempt up to
    :data:`CONFIGURATION_RETRY_CAP`, so a fixed worker picks the turn up by itself."""
    delay = min(timedelta(seconds=2 ** min(attempt, 10)), CONFIGURATION_RETRY_CAP)
    return ApplicationError(message, type=CONFIGURATION_ERROR, next_retry_delay=delay)


def translate_error(
    exc: openai.OpenAIError, *, attempt: int = 1, secrets: tuple[str | None, ...] = ()
) -> ApplicationError:
    """The one boundary where provider errors become Temporal's retryable or final errors
    (the module docstring has the three kinds); every text scrubbed of ``secrets``."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        detail = scrub(str(exc.message), secrets)
        return _by_status(exc.status_code, detail, attempt, retry_after(exc.response.headers))
    if isinstance(exc, openai.APITimeoutError):
        return _transient("model endpoint timed out", attempt, None)
    if isinstance(exc, openai.APIConnectionError):
        cause = scrub(str(exc.__cause__ or exc), secrets)
        return configuration_error(f"model endpoint unreachable: {cause}", attempt)
    return ModelCallError(f"model call failed: {scrub(str(exc), secrets)}").to_application_error()


def stream_error(
    cause: BaseException, *, attempt: int = 1, secrets: tuple[str | None, ...] = ()
) -> ApplicationError:
    """What a stream that broke off after its answer started becomes: an error event that
    carries an HTTP status (``code`` or ``status``) is read as that status would be
    (:func:`translate_error`); a timeout is transient, as before an answer; a dropped
    connection or an error event without a status is transient too (the endpoint answered,
    and may well answer the same request whole)."""
    import openai

    if isinstance(cause, openai.APITimeoutError):
        return _transient("model endpoint timed out mid-answer", attempt, None)
    detail = scrub(str(cause) or type(cause).__name__, secrets)
    body = getattr(cause, "body", None)
    status = _status_of(body)
    if status is not None:
        return _by_status(status, f"{detail} (an error event mid-answer)", attempt, None)
    return _transient(f"model endpoint broke off its answer: {detail}", attempt, None)


def _status_of(body: object) -> int | None:
    """The HTTP status an error event's body names (OpenAI-compatible gateways put it in
    ``code``; some in ``status``)."""
    if not isinstance(body, dict):
        return None
    for key in ("code", "status"):
        value = body.get(key)
        if isinstance(value, int) and 400 <= value <= 599:
            return value
        if isinstance(value, str) and value.isdigit() and 400 <= int(value) <= 599:
            return int(value)
    return None


UNREADABLE = (ValueError, TypeError, AttributeError, KeyError)
"""What the ``openai`` client raises, outside its own error classes, when it cannot read a 2xx
answer: a body that is not JSON (``JSONDecodeError``) or JSON of another shape. The call was
made and answered (and may be billed): the same request would get the same answer."""


def unreadable_answer(exc: Exception, secrets: tuple[str | None, ...] = ()) -> ApplicationError:
    """The final ``ModelCallError`` of a 2xx answer the client could not read."""
    detail = scrub(str(exc)[:300], secrets)
    return ModelCallError(
        f"model endpoint answered with a body that is no chat completion "
        f"({type(exc).__name__}: {detail})"
    ).to_application_error()


def _by_status(status: int, detail: str, attempt: int, delay: timedelta | None) -> ApplicationError:
    """An HTTP status's kind: the deployment's, transient, or the call's."""
    if status in CONFIGURATION_STATUS:
        return configuration_error(
            f"model endpoint refused the deployment's credentials or model ({status}): {detail}",
            attempt,
        )
    if status in RETRYABLE_STATUS or status >= 500:
        return _transient(f"model endpoint answered {status}: {detail}", attempt, delay)
    return ModelCallError(
        f"model endpoint refused the call ({status}): {detail}"
    ).to_application_error()


def _transient(message: str, attempt: int, delay: timedelta | None) -> ApplicationError:
    if attempt >= TRANSIENT_ATTEMPTS:
        return ModelCallError(
            f"{message} (gave up after {attempt} attempts)"
        ).to_application_error()
    return ApplicationError(message, type="ModelUnavailable", next_retry_delay=delay)


def retry_after(headers: Mapping[str, str]) -> timedelta | None:
    """The delay a ``Retry-After`` (seconds) or ``retry-after-ms`` header asks for."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            continue
        if 0 <= seconds <= 600:
            return timedelta(seconds=seconds)
    return None


def usage_of(reported: CompletionUsage | None) -> Usage:
    """One call's :class:`Usage` from what the endpoint reported (nothing: the call alone).

    Cached prompt tokens come from ``prompt_tokens_details.cached_tokens`` (OpenAI); cache
    writes from ``cache_creation_input_tokens``, which gateways fronting Anthropic models add.
    """
    if reported is None:
        return Usage(calls=1)
    details = reported.prompt_tokens_details
    extra = reported.model_extra or {}
    written = extra.get("cache_creation_input_tokens")
    return Usage(
        calls=1,
        prompt_tokens=reported.prompt_tokens,
        completion_tokens=reported.completion_tokens,
        total_tokens=reported.total_tokens,
        cache_read_tokens=(details.cached_tokens or 0) if details is not None else 0,
        cache_write_tokens=written if isinstance(written, int) else 0,
    )
