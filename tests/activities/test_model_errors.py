"""activities/model.py's error boundary and message shapes, and workflows/errors.py's wire form.

Provider errors are the real ``openai`` exception classes over real HTTP responses: Temporal owns
retries, so :func:`translate_error` decides what is retried and after how long.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.model import (
    TRANSIENT_ATTEMPTS,
    ModelConfig,
    chat_request,
    openai_client,
    retry_after,
    to_openai_message,
    translate_error,
)
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.workflows import errors
from archmax_temporal.workflows.models import Message, ToolCall, ToolSchema
from tests.support.agents import Scripted, running_agent, write_workflow

# openai >= 3 is built on httpx2, older releases on httpx: build requests with the one it uses.
httpx: Any = importlib.import_module("httpx2" if importlib.util.find_spec("httpx2") else "httpx")

REQUEST = httpx.Request("POST", "http://x")
STATUS_CLASSES = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
    500: openai.InternalServerError,
    503: openai.InternalServerError,
}


def status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    response = httpx.Response(status, headers=headers or {}, request=REQUEST)
    cls = STATUS_CLASSES.get(status, openai.APIStatusError)
    return cls(f"endpoint said {status}", response=response, body=None)


class TestTranslateError:
    @pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
    def test_transient_statuses_are_retryable(self, status: int) -> None:
        """408, 409, 429 and every 5xx become a retryable ModelUnavailable."""
        error = translate_error(status_error(status))
        assert isinstance(error, ApplicationError)
        assert error.type == "ModelUnavailable"
        assert error.non_retryable is False
        assert str(status) in error.message and f"endpoint said {status}" in error.message

    @pytest.mark.parametrize("status", [400, 422])
    def test_refusals_of_the_call_are_final(self, status: int) -> None:
        """A 400 or 422 is the call's fault: the non-retryable ModelCallError."""
        error = translate_error(status_error(status))
        assert error.type == "ModelCallError"
        assert error.non_retryable is True
        assert f"({status})" in error.message

    @pytest.mark.parametrize("status", [401, 403, 404])
    def test_deployment_errors_wait_for_a_fix(self, status: int) -> None:
        """A rejected key, a forbidden or unknown model is the deployment's fault: retried
        without end (never a turn failure), the wait growing to a cap."""
        first = translate_error(status_error(status), attempt=1)
        late = translate_error(status_error(status), attempt=40)
        assert first.type == late.type == "ModelConfigurationError"
        assert first.non_retryable is False and late.non_retryable is False
        assert first.next_retry_delay == timedelta(seconds=2)
        assert late.next_retry_delay == timedelta(seconds=60)

    def test_transient_failures_give_up_after_their_attempts(self) -> None:
        """A 5xx retries for TRANSIENT_ATTEMPTS attempts, then fails the turn for good."""
        assert translate_error(status_error(503), attempt=5).type == "ModelUnavailable"
        final = translate_error(status_error(503), attempt=TRANSIENT_ATTEMPTS)
        assert (final.type, final.non_retryable) == ("ModelCallError", True)
        assert f"gave up after {TRANSIENT_ATTEMPTS} attempts" in final.message

    def test_provider_text_is_scrubbed_of_keys(self) -> None:
        """A gateway that echoes the key never puts it in an error (or a history)."""
        key = "sk-live-abcdef0123456789"
        response = httpx.Response(401, request=REQUEST)
        exc = openai.AuthenticationError(
            f"Incorrect API key provided: {key}", response=response, body=None
        )
        error = translate_error(exc, secrets=(key,))
        assert key not in error.message and "[redacted]" in error.message
        upstream = openai.InternalServerError(
            "upstream 500: Authorization: Bearer abcdefghijkl1234", response=response, body=None
        )
        assert "abcdefghijkl1234" not in translate_error(upstream).message

    @pytest.mark.parametrize(
        ("headers", "delay"),
        [
            ({"Retry-After": "7"}, timedelta(seconds=7)),
            ({"retry-after": "1.5"}, timedelta(seconds=1.5)),
            ({"retry-after-ms": "250"}, timedelta(milliseconds=250)),
            ({"retry-after-ms": "250", "Retry-After": "9"}, timedelta(milliseconds=250)),
            ({}, None),
        ],
    )
    def test_retry_after_becomes_the_next_retry_delay(
        self, headers: dict[str, str], delay: timedelta | None
    ) -> None:
        """A Retry-After (seconds) or retry-after-ms header sets the next retry delay."""
        error = translate_error(status_error(429, headers))
        assert error.next_retry_delay == delay

    def test_refusals_carry_no_retry_delay(self) -> None:
        """A final error ignores Retry-After: there is no next attempt."""
        assert translate_error(status_error(400, {"Retry-After": "5"})).next_retry_delay is None

    def test_a_timed_out_request_is_transient(self) -> None:
        """A hung endpoint is retried like a 5xx (a fresh attempt, bounded)."""
        error = translate_error(openai.APITimeoutError(request=REQUEST))
        assert (error.type, error.non_retryable) == ("ModelUnavailable", False)

    def test_an_unreachable_endpoint_waits_for_a_fix(self) -> None:
        """A refused connection is the deployment's: retried without end."""
        exc = openai.APIConnectionError(message="connection refused", request=REQUEST)
        error = translate_error(exc, attempt=3)
        assert (error.type, error.non_retryable) == ("ModelConfigurationError", False)
        assert error.message.startswith("model endpoint unreachable: ")

    def test_other_openai_errors_are_final(self) -> None:
        """An OpenAIError outside the HTTP taxonomy is a final ModelCallError."""
        error = translate_error(openai.OpenAIError("no key"))
        assert (error.type, error.non_retryable) == ("ModelCallError", True)
        assert "no key" in error.message


class TestRetryAfter:
    @pytest.mark.parametrize(
        ("headers", "delay"),
        [
            ({"retry-after": "0"}, timedelta(0)),
            ({"retry-after": "600"}, timedelta(seconds=600)),
            ({"retry-after": "601"}, None),
            ({"retry-after": "-1"}, None),
            ({"retry-after": "nan"}, None),
            ({"retry-after": "inf"}, None),
            ({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, None),
            ({"retry-after-ms": "soon", "retry-after": "3"}, timedelta(seconds=3)),
            ({"retry-after-ms": "700000", "retry-after": "3"}, timedelta(seconds=3)),
        ],
    )
    def test_header_parsing(self, headers: dict[str, str], delay: timedelta | None) -> None:
        """Only a sane number of seconds (0–600) counts; an unreadable ms header falls back."""
        assert retry_after(httpx.Headers(headers)) == delay

    def test_header_names_are_case_insensitive(self) -> None:
        """Header lookup ignores case, as HTTP does."""
        assert retry_after(httpx.Headers({"RETRY-AFTER-MS": "20"})) == timedelta(milliseconds=20)


class TestToOpenAIMessage:
    def test_user_and_system_messages(self) -> None:
        """User and system entries carry role and content, a missing content as ``""``."""
        assert to_openai_message(Message(role="user", content="hi")) == {
            "role": "user",
            "content": "hi",
        }
        assert to_openai_message(Message(role="system")) == {"role": "system", "content": ""}

    def test_archmax_markers_stay_behind(self) -> None:
        """``note``, ``status``, ``state`` and ``name`` never reach the provider."""
        message = Message(role="user", content="x", note="event", status="ok", state="a", name="n")
        assert to_openai_message(message) == {"role": "user", "content": "x"}

    def test_assistant_with_tool_calls(self) -> None:
        """An assistant turn lists its calls as function calls with raw argument text."""
        call = ToolCall(id="c1", name="archmax_advance", arguments='{"to": "answer"}')
        shaped = to_openai_message(Message(role="assistant", content=None, tool_calls=[call]))
        assert shaped == {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "archmax_advance", "arguments": '{"to": "answer"}'},
                }
            ],
        }

    def test_assistant_without_tool_calls_has_no_tool_calls_key(self) -> None:
        """A plain assistant reply sends no empty ``tool_calls`` list."""
        assert to_openai_message(Message(role="assistant", content="done")) == {
            "role": "assistant",
            "content": "done",
        }

    def test_tool_result(self) -> None:
        """A tool result names its call; a missing content is sent as ``""``."""
        message = Message(role="tool", tool_call_id="c1", name="archmax_note", note="event")
        assert to_openai_message(message) == {"role": "tool", "tool_call_id": "c1", "content": ""}


CONVERSATION = [
    Message(role="system", content="You are terse."),
    Message(role="user", content="read the file ünïcode ✓"),
    Message(
        role="assistant",
        content=None,
        tool_calls=[ToolCall(id="c1", name="read_file", arguments='{"path": "a.txt"}')],
    ),
    Message(role="tool", tool_call_id="c1", content="1\tline one\n"),
    Message(role="assistant", content="done"),
    Message(role="user", content="again"),
]
TOOLS = [
    ToolSchema(
        name="read_file",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string", "description": "where"}},
            "required": ["path"],
        },
    )
]


class TestChatRequest:
    @pytest.mark.parametrize("tools", [[], TOOLS], ids=["no-tools", "tools"])
    async def test_the_endpoint_receives_what_the_typed_call_would_send(
        self, tools: list[ToolSchema]
    ) -> None:
        """The wire-shaped request (the conversation in ``extra_body``, skipping the client's
        per-message transform) arrives as the same JSON body as the plain typed call."""
        with ScriptedModelServer(Playbook.from_yaml("default: {content: ok}\n")) as server:
            client = openai_client(ModelConfig(base_url=server.url, api_key="sk-test"))
            wire = [to_openai_message(m) for m in CONVERSATION]
            typed: dict[str, Any] = {"model": "m", "messages": wire}
            if tools:
                typed["tools"] = chat_request("m", [], tools, "auto")["extra_body"]["tools"]
                typed["tool_choice"] = "auto"
            await client.chat.completions.create(**typed)
            await client.chat.completions.create(**chat_request("m", CONVERSATION, tools, "auto"))
            await client.close()
            plain, fast = (r.body for r in server.requests)
        assert fast == plain
        assert fast["messages"] == wire and len(fast["messages"]) == 6
        assert ("tools" in fast) is bool(tools)
        assert all(r.had_authorization for r in server.requests)


class TestModelConfigFromEnv:
    def test_archmax_names_win(self) -> None:
        """ARCHMAX_* settings take precedence over OPENAI_*."""
        config = ModelConfig.from_env(
            {
                "ARCHMAX_API_BASE_URL": "http://archmax",
                "OPENAI_BASE_URL": "http://openai",
                "ARCHMAX_API_KEY": "a-key",
                "OPENAI_API_KEY": "o-key",
                "ARCHMAX_MODEL": "m1",
            }
        )
        assert (config.base_url, config.api_key, config.default_model) == (
            "http://archmax",
            "a-key",
            "m1",
        )

    def test_openai_names_are_the_fallback(self) -> None:
        """OPENAI_BASE_URL / OPENAI_API_KEY apply when archmax's are unset or empty."""
        env = {"ARCHMAX_API_KEY": "", "OPENAI_BASE_URL": "http://o", "OPENAI_API_KEY": "k"}
        config = ModelConfig.from_env(env)
        assert (config.base_url, config.api_key) == ("http://o", "k")

    def test_empty_environment(self) -> None:
        """Nothing set means no endpoint, key or model, and OPENAI_MODEL is not read."""
        config = ModelConfig.from_env({"OPENAI_MODEL": "gpt-x", "ARCHMAX_MODEL": ""})
        assert config == ModelConfig()

    def test_describe_never_shows_the_key(self) -> None:
        """The narration line names model and endpoint, never the key."""
        config = ModelConfig(base_url="http://b", api_key="sk-secret", default_model="m")
        assert config.describe() == "m @ http://b"
        assert "sk-secret" not in config.describe()


ALL_ERRORS: list[type[errors.ArchmaxError]] = list(errors._ALL)
"""The tree, derived from the classes (tests/test_public_surface.py holds it to the drawing)."""


def make(cls: type[errors.ArchmaxError]) -> errors.ArchmaxError:
    if cls is errors.SpecValidationError:
        return cls("wf.yaml", ['states.review: unknown key "transtions"'])
    return cls(f"{cls.__name__} happened")


class TestErrorWireForm:
    @pytest.mark.parametrize("cls", ALL_ERRORS)
    def test_application_error_is_typed_by_class_name(self, cls: type[errors.ArchmaxError]) -> None:
        """The wire form is an ApplicationError whose type is the class name, non-retryable
        unless the class says a retry may succeed (busy, server away)."""
        error = make(cls)
        wire = error.to_application_error()
        assert (wire.type, wire.message) == (cls.__name__, str(error))
        assert wire.non_retryable is not cls.retryable
        assert errors.application_error(error).type == cls.__name__

    @pytest.mark.parametrize("cls", ALL_ERRORS)
    def test_type_round_trips_to_the_class(self, cls: type[errors.ArchmaxError]) -> None:
        """``error_from_type`` rebuilds exactly the class the wire type names."""
        wire = make(cls).to_application_error()
        rebuilt = errors.error_from_type(wire.type, wire.message)
        assert rebuilt is not None and type(rebuilt) is cls
        assert wire.message in str(rebuilt)
        assert rebuilt.to_application_error().type == cls.__name__

    def test_messages_survive_the_round_trip(self) -> None:
        """A rebuilt error says what the original said."""
        wire = errors.SessionNotAwaitingInputError(
            "session 'x' is completed"
        ).to_application_error()
        assert str(errors.error_from_type(wire.type, wire.message)) == "session 'x' is completed"

    def test_spec_errors_keep_the_text_as_their_issue(self) -> None:
        """A rebuilt SpecValidationError carries the wire text as its one issue."""
        rebuilt = errors.error_from_type("SpecValidationError", "states: bad")
        assert isinstance(rebuilt, errors.SpecValidationError) and rebuilt.issues == ["states: bad"]

    @pytest.mark.parametrize("type_name", [None, "", "ModelUnavailable", "ValueError", "object"])
    def test_foreign_types_are_not_ours(self, type_name: str | None) -> None:
        """An unknown or missing type rebuilds nothing."""
        assert errors.error_from_type(type_name, "x") is None

    def test_spec_error_lists_every_issue(self) -> None:
        """A SpecValidationError's message names its source and each issue on its own line."""
        error = errors.SpecValidationError("wf.yaml", ["a: one", "b: two"])
        assert str(error) == "wf.yaml: invalid workflow spec\n  - a: one\n  - b: two"

    def test_session_errors_share_a_base(self) -> None:
        """Every session-shape error is a SessionError, and every error an ArchmaxError."""
        assert issubclass(errors.SessionNotResumableError, errors.SessionError)
        assert issubclass(errors.MissingDeliveryTriggerError, errors.SessionError)
        assert all(issubclass(cls, errors.ArchmaxError) for cls in ALL_ERRORS)
        retryable = {cls for cls in ALL_ERRORS if cls.retryable}
        assert retryable == {
            errors.SessionBusyError,
            errors.TemporalUnavailableError,
            errors.StoreMismatchError,  # waits for a worker of the session's store
        }

    def test_every_declared_error_class_is_mapped(self) -> None:
        """No ArchmaxError subclass in workflows.errors is missing from the type mapping."""
        declared = {
            value
            for value in vars(errors).values()
            if isinstance(value, type) and issubclass(value, errors.ArchmaxError)
        }
        assert declared == set(ALL_ERRORS)
        assert all(errors.error_from_type(cls.__name__, "m") is not None for cls in declared)


UNREADABLE = """
states:
  triage:
    triggers: { manual: }
    instructions: Answer.
"""


class TestUnreadableAnswerThroughTemporal:
    async def test_a_200_whose_body_is_not_json_is_one_request_and_a_rejected_turn(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """Under Temporal's retry policy (which retries a configuration error without end)
        a JSON-typed 200 that is not JSON is final: the endpoint sees exactly one request and
        the turn ends rejected, naming the model call."""
        write_workflow(tmp_path, "unreadable", UNREADABLE)
        playbook = {
            "rules": [
                {"error": {"status": 200, "body": "<html>oops", "content_type": "application/json"}}
            ]
        }
        server = scripted(json.dumps(playbook))
        async with running_agent(client, task_queue, tmp_path, "unreadable", server) as agent:
            outcome = await agent.workflow.send(f"unreadable-{uuid.uuid4().hex[:8]}", "hi")
        assert outcome.kind == "rejected", outcome
        assert outcome.rejected is not None and "no chat completion" in outcome.rejected
        assert len(server.requests) == 1
