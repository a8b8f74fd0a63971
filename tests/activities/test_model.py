"""The model activity over real HTTP: the real ``openai`` client against the scripted model,
run through Temporal's ``ActivityEnvironment``. What a hostile or broken endpoint sends never
becomes an unwritable payload, a retried paid call or a leaked key."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.model import ModelActivities, ModelConfig
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.workflows.models import Message, ModelCallInput, ModelCallResult
from archmax_temporal.workflows.text import REPLACEMENT

KEY = "sk-live-0123456789abcdef"


def _call() -> ModelCallInput:
    return ModelCallInput(
        session_id="s-1",
        state="triage",
        model="scripted",
        messages=[Message(role="user", content="hello")],
        tools=[],
        tool_choice="auto",
    )


async def _complete(server: ScriptedModelServer) -> ModelCallResult:
    activities = ModelActivities(ModelConfig(base_url=server.url, api_key=KEY))
    result: ModelCallResult = await ActivityEnvironment().run(activities.complete, _call())
    return result


def _serve(playbook: dict[str, Any]) -> ScriptedModelServer:
    return ScriptedModelServer(Playbook.model_validate(playbook))


async def test_a_lone_surrogate_in_the_reply_is_replaced_and_the_result_encodes() -> None:
    """Text carrying ``\\ud800`` (valid JSON) comes back with U+FFFD: the result can be
    written to a history, so the call is not retried into a failure loop."""
    with _serve({"default": {"content": "bad \ud800 text"}}) as server:
        result = await _complete(server)
        assert len(server.requests) == 1
    assert result.content == f"bad {REPLACEMENT} text"
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([result])
    assert payload.data


async def test_a_200_that_is_no_chat_completion_fails_at_once_without_a_retry() -> None:
    """A gateway's HTML page under a 200 is the final ``ModelCallError``, not a transient
    failure to pay for again."""
    playbook = {"rules": [{"error": {"status": 200, "body": "<html>maintenance</html>"}}]}
    with _serve(playbook) as server:
        with pytest.raises(ApplicationError) as raised:
            await _complete(server)
        assert len(server.requests) == 1
    assert raised.value.type == "ModelCallError"
    assert raised.value.non_retryable


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("<html>maintenance</html>", "application/json"),  # the client's own JSON parse fails
        ("", "application/json"),
        ('{"choices": ', "application/json; charset=utf-8"),
        ("null", "application/json"),
        ("[1, 2]", "application/json"),
        ("<html>maintenance</html>", "text/plain"),
    ],
)
async def test_any_200_the_client_cannot_read_is_final_after_one_request(
    body: str, content_type: str
) -> None:
    """Whether the ``openai`` client's own parsing fails (a body that is not JSON under a JSON
    content type) or ours does, the answer is the final ``ModelCallError``: one request,
    never a retried (and billed) call."""
    playbook = {"rules": [{"error": {"status": 200, "body": body, "content_type": content_type}}]}
    with _serve(playbook) as server:
        with pytest.raises(ApplicationError) as raised:
            await _complete(server)
        assert len(server.requests) == 1
    assert raised.value.type == "ModelCallError"
    assert raised.value.non_retryable
    assert "no chat completion" in raised.value.message
    assert KEY not in raised.value.message


async def test_a_rejected_key_waits_for_a_fix_and_is_never_echoed() -> None:
    """A 401 whose text quotes the key is a retryable deployment error with the key
    scrubbed from its message."""
    playbook = {
        "rules": [{"error": {"status": 401, "message": f"Incorrect API key provided: {KEY}"}}]
    }
    with _serve(playbook) as server, pytest.raises(ApplicationError) as raised:
        await _complete(server)
    assert raised.value.type == "ModelConfigurationError"
    assert not raised.value.non_retryable
    assert KEY not in raised.value.message and "[redacted]" in raised.value.message


async def test_no_model_configured_is_a_deployment_error() -> None:
    """With neither the state, the spec nor ARCHMAX_MODEL naming a model the turn waits
    (retryable) instead of failing through ``on_error``."""
    activities = ModelActivities(ModelConfig(base_url="http://127.0.0.1:9/v1"))
    call = _call().model_copy(update={"model": None})
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(activities.complete, call)
    assert raised.value.type == "ModelConfigurationError"
    assert "no model configured" in raised.value.message


async def test_a_slow_call_heartbeats(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the endpoint takes its time the activity heartbeats, so a dead worker's call is
    noticed within the heartbeat timeout."""
    from datetime import timedelta

    from archmax_temporal.activities import model

    monkeypatch.setattr(model, "HEARTBEAT_EVERY", timedelta(milliseconds=50))
    beats: list[tuple[Any, ...]] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    playbook = {"rules": [{"reply": {"content": "done"}, "delay_ms": 400}]}
    with _serve(playbook) as server:
        activities = ModelActivities(ModelConfig(base_url=server.url, api_key=KEY))
        result = await env.run(activities.complete, _call())
    assert result.content == "done"
    assert len(beats) >= 3
