"""The model call: one Chat Completions request through the real ``openai`` client.

Any OpenAI-compatible endpoint works (OpenAI, Azure, vLLM, Ollama, llama.cpp, LM Studio,
gateways, or the scripted model the tests start). The endpoint and key are worker
configuration read from the environment; they never travel in an activity input, so no key
ever lands in a workflow history.

Temporal owns retries: the client's own retries are off, and :func:`translate_error` is the one
place provider errors become Temporal errors — 408/409/429/5xx, timeouts and connection errors
retry (a ``Retry-After`` becomes the next retry delay); any other 4xx is the non-retryable
``ModelCallError``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import openai
import structlog
from openai.types import CompletionUsage
from temporalio import activity
from temporalio.exceptions import ApplicationError

from archmax_temporal.workflows.contracts import MODEL_ACTIVITY
from archmax_temporal.workflows.errors import ModelCallError
from archmax_temporal.workflows.models import (
    Message,
    ModelCallInput,
    ModelCallResult,
    ToolCall,
    Usage,
)

log = structlog.get_logger("archmax.model")

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses worth another attempt, besides every 5xx."""

PLACEHOLDER_KEY = "not-set"
"""Sent when no key is configured: local endpoints (Ollama, vLLM) need none."""


@dataclass(frozen=True)
class ModelConfig:
    """Where model calls go, and the model id used when neither state nor spec names one."""

    base_url: str | None = None
    api_key: str | None = None
    default_model: str | None = None
    request_timeout: float = 170.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ModelConfig:
        """archmax's names first (``ARCHMAX_API_BASE_URL``, ``ARCHMAX_API_KEY``,
        ``ARCHMAX_MODEL``), then ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``."""
        env = os.environ if env is None else env
        return cls(
            base_url=env.get("ARCHMAX_API_BASE_URL") or env.get("OPENAI_BASE_URL") or None,
            api_key=env.get("ARCHMAX_API_KEY") or env.get("OPENAI_API_KEY") or None,
            default_model=env.get("ARCHMAX_MODEL") or None,
        )

    def describe(self) -> str:
        """A one-line, key-free description for narration."""
        return f"{self.default_model or 'unset'} @ {self.base_url or 'api.openai default'}"


def openai_client(config: ModelConfig, *, max_retries: int = 0) -> openai.AsyncOpenAI:
    """The one place an ``AsyncOpenAI`` client is built from a :class:`ModelConfig`.

    Retries default to off: inside an activity Temporal owns them. A host-side caller with no
    Temporal around it (the ``grade`` judge) asks for a few of the client's own.
    """
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

    def __init__(self, config: ModelConfig, client: openai.AsyncOpenAI | None = None) -> None:
        self._config = config
        self._client = client or openai_client(config)

    @activity.defn(name=MODEL_ACTIVITY)
    async def complete(self, call: ModelCallInput) -> ModelCallResult:
        """One chat completion with the state's tools; usage recorded per call."""
        model = call.model or self._config.default_model
        if not model:
            raise ModelCallError(
                "no model configured: set ARCHMAX_MODEL, settings.model or the state's model"
            ).to_application_error()
        info = activity.info()
        bound = log.bind(
            session_id=call.session_id,
            state=call.state,
            activity=info.activity_type,
            attempt=info.attempt,
            model=model,
        )
        request: dict[str, Any] = {
            "model": model,
            "messages": [to_openai_message(m) for m in call.messages],
        }
        if call.tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in call.tools
            ]
            request["tool_choice"] = call.tool_choice
        try:
            response = await self._client.chat.completions.create(**request)
        except openai.OpenAIError as exc:
            bound.warning("model call failed", error=str(exc))
            raise translate_error(exc) from exc
        if not response.choices:
            raise ApplicationError("model returned no choices", type="ModelEmptyResponse")
        choice = response.choices[0]
        tool_calls = [
            ToolCall(id=tc.id, name=tc.function.name, arguments=tc.function.arguments or "{}")
            for tc in (choice.message.tool_calls or [])
            if tc.type == "function"
        ]
        if call.tool_choice == "none":
            tool_calls = []
        usage = usage_of(response.usage)
        bound.info("model call", tool_calls=len(tool_calls), tokens=usage.total_tokens)
        return ModelCallResult(
            content=choice.message.content,
            tool_calls=tool_calls,
            model=response.model or model,
            finish_reason=choice.finish_reason,
            usage=usage,
        )


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


def translate_error(exc: openai.OpenAIError) -> ApplicationError:
    """The one boundary where provider errors become Temporal's retryable or final errors."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in RETRYABLE_STATUS or status >= 500:
            return ApplicationError(
                f"model endpoint answered {status}: {exc.message}",
                type="ModelUnavailable",
                next_retry_delay=retry_after(exc.response.headers),
            )
        return ModelCallError(
            f"model endpoint refused the call ({status}): {exc.message}"
        ).to_application_error()
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return ApplicationError(f"model endpoint unreachable: {exc}", type="ModelUnavailable")
    return ModelCallError(f"model call failed: {exc}").to_application_error()


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
