"""The scripted model's answers (``client/testing/completions.py``): templates, a reply rendered
into a ``chat.completion`` with ids a retried request gets again, and an error's body."""

from __future__ import annotations

import json
from typing import Any

from archmax_temporal.client.testing.completions import (
    MODEL_ID,
    completion,
    error_body,
    fill_template,
    render_reply,
)
from archmax_temporal.client.testing.playbook import ConversationView, Reply

USER: Any = {"role": "user", "content": "hello"}


def test_templates_fill_known_names_and_keep_the_rest() -> None:
    assert fill_template("{{a}} {a} {b}", {"a": "1"}) == "{a} 1 {b}"


def test_a_reply_is_rendered_with_its_groups_and_a_json_slot_as_data() -> None:
    reply = Reply.model_validate(
        {
            "content": "order {order}",
            "tool_calls": [
                {"name": "save", "arguments": {"id": "{order}", "items": "{items|json}"}},
                {"name": "raw", "raw_arguments": "{not json"},
            ],
        }
    )
    view = ConversationView.from_body({"messages": [USER]})
    content, calls = render_reply(reply, {"order": "ORD-1", "items": "[1, 2]"}, view)
    assert content == "order ORD-1"
    assert [(name, json.loads(args)) for name, args in calls[:1]] == [
        ("save", {"id": "ORD-1", "items": [1, 2]})
    ]
    assert calls[1] == ("raw", "{not json")


def test_a_handoff_gets_no_tool_calls() -> None:
    reply = Reply.model_validate({"tool_calls": [{"name": "t"}]})
    view = ConversationView.from_body({"messages": [USER], "tool_choice": "none"})
    assert render_reply(reply, {}, view) == ("", [])


def test_ids_come_from_the_messages_so_a_retry_gets_the_same() -> None:
    body = {"model": "m", "messages": [USER]}
    first = completion(body, None, [("t", "{}")])
    again = completion(dict(body), None, [("t", "{}")])
    other = completion({"messages": [USER, USER]}, None, [("t", "{}")])
    assert first["id"] == again["id"] != other["id"]
    assert (
        first["choices"][0]["message"]["tool_calls"][0]["id"]
        == (again["choices"][0]["message"]["tool_calls"][0]["id"])
    )
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert (first["model"], other["model"]) == ("m", MODEL_ID)
    usage = completion(body, "four", [])["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0


def test_an_error_body_is_typed_from_its_status() -> None:
    assert error_body(429, "slow down", None, None)["error"]["type"] == "rate_limit_error"
    assert error_body(503, "x", None, None)["error"]["type"] == "server_error"
    assert error_body(418, "x", None, "teapot")["error"] == {
        "message": "x",
        "type": "api_error",
        "param": None,
        "code": "teapot",
    }
