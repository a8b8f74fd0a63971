"""The model activity streaming (``stream=True``) over real HTTP: the real ``openai`` client
against the scripted model, run through Temporal's ``ActivityEnvironment``. The assembled
answer is exactly the whole one, a stream that breaks mid-way maps onto today's kinds of
error, and a session's call publishes its text while it is written."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.model import (
    TRANSIENT_ATTEMPTS,
    ModelActivities,
    ModelConfig,
    streaming_from,
)
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.live import DELTA, RESET, LiveEvent
from archmax_temporal.workflows.models import (
    Message,
    ModelCallInput,
    ModelCallResult,
    ToolSchema,
    TranscriptLog,
)
from archmax_temporal.workflows.transcript import digest_of
from tests.support.live import Recorder

KEY = "sk-live-0123456789abcdef"
SYSTEM = "You answer customers."
TOOL = ToolSchema(
    name="lookup", description="Look an order up.", parameters={"type": "object", "properties": {}}
)


def _call(*, logged: bool = False, handoff: bool = False) -> ModelCallInput:
    return ModelCallInput(
        session_id="s-1",
        state="triage",
        model="scripted",
        messages=[Message(role="user", content="hello")],
        tools=[TOOL],
        tool_choice="none" if handoff else "auto",
        log=TranscriptLog() if logged else None,
        system=SYSTEM if logged else None,
        system_digest=digest_of(SYSTEM) if logged else None,
    )


def _serve(playbook: dict[str, Any]) -> ScriptedModelServer:
    return ScriptedModelServer(Playbook.model_validate(playbook))


async def _complete(
    server: ScriptedModelServer,
    call: ModelCallInput,
    *,
    streaming: bool = True,
    live: Recorder | None = None,
    attempt: int = 1,
) -> ModelCallResult:
    config = ModelConfig(base_url=server.url, api_key=KEY, streaming=streaming)
    logs = TranscriptLogs(MemorySessionStore())
    activities = ModelActivities(config, logs=logs, live=live)
    env = ActivityEnvironment()
    env.info = replace(env.info, attempt=attempt, workflow_run_id="run-1", activity_id="5")
    result: ModelCallResult = await env.run(activities.complete, call)
    return result


SHAPED = {"chunks": 7, "delay_ms": 0}
REPLIES = [
    {"content": "Your order ORD-1001 is on its way; it arrives on Tuesday."},
    {"tool_calls": [{"name": "lookup", "arguments": {"order": "ORD-1001", "deep": [1, 2]}}]},
    {
        "content": "Let me check two things.",
        "tool_calls": [
            {"name": "lookup", "arguments": {"order": "A"}},
            {"name": "lookup", "arguments": {"order": "B", "note": "é ✓"}},
        ],
    },
    {"content": ""},
]


class TestTheAssembledAnswer:
    @pytest.mark.parametrize("reply", REPLIES, ids=["text", "call", "text+calls", "empty"])
    @pytest.mark.parametrize("shape", [None, SHAPED], ids=["one-chunk", "chunked"])
    async def test_streamed_equals_whole(
        self, reply: dict[str, Any], shape: dict[str, Any] | None
    ) -> None:
        """Text and tool calls (their arguments arriving in halves), finish reason, usage and
        model: the streamed result is the whole one, field for field."""
        rule: dict[str, Any] = {"reply": reply}
        if shape is not None:
            rule["stream"] = shape
        with _serve({"rules": [rule]}) as server:
            whole = await _complete(server, _call(), streaming=False)
            streamed = await _complete(server, _call(), streaming=True)
            bodies = [request.body for request in server.requests]
        assert streamed == whole
        assert "stream" not in bodies[0]
        assert bodies[1]["stream"] is True and bodies[1]["stream_options"] == {
            "include_usage": True
        }

    async def test_a_handoff_gets_no_calls_either_way(self) -> None:
        reply = {"content": "Handing over.", "tool_calls": [{"name": "lookup"}]}
        with _serve({"rules": [{"reply": reply, "stream": SHAPED}]}) as server:
            whole = await _complete(server, _call(handoff=True), streaming=False)
            streamed = await _complete(server, _call(handoff=True), streaming=True)
        assert streamed == whole and streamed.tool_calls == []

    def test_archmax_streaming_zero_turns_it_off(self) -> None:
        assert ModelConfig.from_env({}).streaming is True
        assert ModelConfig.from_env({"ARCHMAX_STREAMING": "1"}).streaming is True
        for off in ("0", "false", "OFF", " no "):
            assert ModelConfig.from_env({"ARCHMAX_STREAMING": off}).streaming is False
        assert streaming_from(None) is True


class TestAStreamThatBreaks:
    async def _fails(self, shape: dict[str, Any], attempt: int = 1) -> ApplicationError:
        reply = {"content": "a long answer that never ends " * 4}
        with _serve({"rules": [{"reply": reply, "stream": shape}]}) as server:
            with pytest.raises(ApplicationError) as raised:
                await _complete(server, _call(), attempt=attempt)
            assert len(server.requests) == 1
        assert KEY not in raised.value.message
        return raised.value

    async def test_a_dropped_connection_is_transient(self) -> None:
        """The endpoint answered and broke off: retried with backoff, as a 5xx is."""
        error = await self._fails({"chunks": 8, "break_after": 3})
        assert error.type == "ModelUnavailable" and not error.non_retryable
        assert "broke off" in error.message

    async def test_an_error_event_reads_as_its_status(self) -> None:
        """An error event mid-answer that names a status is that status: 503 transient, 400
        the call's fault (final), 401 the deployment's (waited out)."""
        unavailable = await self._fails(
            {"chunks": 8, "break_after": 2, "break_with": "error", "error_status": 503}
        )
        assert unavailable.type == "ModelUnavailable" and not unavailable.non_retryable
        refused = await self._fails(
            {"chunks": 8, "break_after": 2, "break_with": "error", "error_status": 400}
        )
        assert refused.type == "ModelCallError" and refused.non_retryable
        rejected = await self._fails(
            {"chunks": 8, "break_after": 2, "break_with": "error", "error_status": 401}
        )
        assert rejected.type == "ModelConfigurationError" and not rejected.non_retryable

    async def test_an_error_event_without_a_status_is_transient(self) -> None:
        error = await self._fails({"chunks": 8, "break_after": 2, "break_with": "error"})
        assert error.type == "ModelUnavailable" and "the stream broke" in error.message

    async def test_transient_breaks_give_up_after_their_attempts(self) -> None:
        error = await self._fails({"chunks": 8, "break_after": 3}, attempt=TRANSIENT_ATTEMPTS)
        assert error.type == "ModelCallError" and error.non_retryable
        assert "gave up" in error.message


class TestLiveText:
    async def test_a_sessions_call_publishes_its_text_while_it_is_written(self) -> None:
        """A slow writer (12 chunks, 40 ms apart): the first delta goes out long before the
        answer is whole; the deltas join to the answer's text; each names the call."""
        content = "Thanks for waiting. Your parcel is with the carrier and arrives soon."
        channel = Recorder()
        playbook = {
            "rules": [{"reply": {"content": content}, "stream": {"chunks": 12, "delay_ms": 40}}]
        }
        with _serve(playbook) as server:
            # the stream's last chunk is held until the first delta is out: if text went
            # out only once the answer was whole, the gate would never open
            server.stream_gate = channel.first
            result = await _complete(server, _call(logged=True), live=channel)
        assert server.gate_opened is True
        deltas = [event for _, event in channel.events]
        assert result.content == content
        assert {e.type for e in deltas} == {DELTA}
        assert "".join(e.text for e in deltas) == content
        assert {(e.session_id, e.message_id, e.attempt) for e in deltas} == {("s-1", "run-1:5", 1)}
        assert 2 <= len(deltas) <= 6  # coalesced: 12 chunks over ~0.5 s

    async def test_a_retried_attempt_resets_first_and_a_failed_one_voids(self) -> None:
        """Attempt 1 breaks mid-answer after some text: it voids it. Attempt 2 starts with a
        reset, then writes the whole answer."""
        content = "The whole answer, written twice over two attempts of one call."
        channel = Recorder()
        playbook = {
            "rules": [
                {
                    "times": 1,
                    "reply": {"content": content},
                    "stream": {"chunks": 8, "delay_ms": 30, "break_after": 5},
                },
                {"reply": {"content": content}, "stream": {"chunks": 8, "delay_ms": 30}},
            ]
        }
        with _serve(playbook) as server:
            with pytest.raises(ApplicationError):
                await _complete(server, _call(logged=True), live=channel)
            result = await _complete(server, _call(logged=True), live=channel, attempt=2)
        events: list[LiveEvent] = [event for _, event in channel.events]
        kinds = [(e.type, e.attempt) for e in events]
        failed_at = kinds.index((RESET, 1))
        assert all(kind == (DELTA, 1) for kind in kinds[:failed_at]) and failed_at >= 1
        assert kinds[failed_at + 1] == (RESET, 2)
        shown = ""
        for event in events:  # what a client shows, applying resets
            shown = "" if event.type == RESET else shown + event.text
        assert shown == content == result.content

    async def test_no_text_goes_out_for_a_grader_or_with_streaming_off(self) -> None:
        """A call without the store's log (a rubric's grader) is no session's voice; with
        ``ARCHMAX_STREAMING=0`` nothing streams at all."""
        channel = Recorder()
        playbook = {"rules": [{"reply": {"content": "verdict"}, "stream": {"chunks": 4}}]}
        with _serve(playbook) as server:
            await _complete(server, _call(logged=False), live=channel)
            await _complete(server, _call(logged=True), live=channel, streaming=False)
        assert channel.events == []
