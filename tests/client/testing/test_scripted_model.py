"""The scripted model's server (``client/testing/scripted_model.py``), driven through the real
``openai`` client.

Every server binds a free port on 127.0.0.1 and is stopped when its ``with`` block ends.
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from tests.support.paths import REPO

ROOT = REPO
SYSTEM = "# Workflow: support\n\n## Current state: `{state}` — A title\n"


@asynccontextmanager
async def serve(playbook_yaml: str) -> AsyncIterator[tuple[ScriptedModelServer, Any]]:
    with ScriptedModelServer(Playbook.from_yaml(playbook_yaml)) as srv:
        client = openai.AsyncOpenAI(base_url=srv.url, api_key="x", max_retries=0)
        try:
            yield srv, client
        finally:
            await client.close()


def system(state: str) -> Any:
    return {"role": "system", "content": SYSTEM.format(state=state)}


def user(text: str) -> Any:
    return {"role": "user", "content": text}


def note(call_id: str, result: str) -> list[Any]:
    """A runtime note: a synthetic archmax_note call and its tool result."""
    function = {"name": "archmax_note", "arguments": "{}"}
    call = {"id": call_id, "type": "function", "function": function}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "archmax_wait",
            "parameters": {"type": "object", "properties": {"reason": {"type": "string"}}},
        },
    }
]


async def test_text_reply_is_a_normal_completion() -> None:
    async with serve("rules: [{name: hi, when: {last_user: hello}, reply: {content: Hi!}}]") as (
        srv,
        client,
    ):
        resp = await client.chat.completions.create(model="m1", messages=[user("well hello")])
    assert resp.choices[0].message.content == "Hi!"
    assert resp.choices[0].message.tool_calls is None
    assert resp.choices[0].finish_reason == "stop"
    assert resp.model == "m1"
    assert resp.object == "chat.completion"
    assert resp.usage is not None
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (3, 1)  # 10 and 3 chars
    assert resp.usage.total_tokens == 4
    [rec] = srv.requests
    assert (rec.rule, rec.rule_index, rec.had_authorization, rec.status) == ("hi", 0, True, 200)
    assert rec.messages == [user("well hello")]


async def test_tool_call_reply_has_parsed_arguments_and_deterministic_ids() -> None:
    playbook = """
rules:
  - reply:
      tool_calls:
        - name: archmax_wait
          arguments: {reason: "need info", until: "1d", nested: {n: 3, list: [a, b]}}
        - name: archmax_advance
          arguments: {to: done}
"""
    async with serve(playbook) as (_, client):

        async def ask(text: str) -> Any:
            return await client.chat.completions.create(
                model="m", messages=[user(text)], tools=TOOLS
            )

        first, again, other = await ask("a"), await ask("a"), await ask("b")
    message = first.choices[0].message
    assert message.content is None
    assert first.choices[0].finish_reason == "tool_calls"
    calls = message.tool_calls
    assert [c.function.name for c in calls] == ["archmax_wait", "archmax_advance"]
    assert json.loads(calls[0].function.arguments) == {
        "reason": "need info",
        "until": "1d",
        "nested": {"n": 3, "list": ["a", "b"]},
    }
    ids = [c.id for c in calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    assert [c.id for c in again.choices[0].message.tool_calls] == ids
    assert first.id == again.id
    assert other.choices[0].message.tool_calls[0].id not in ids


async def test_state_comes_from_the_last_system_marker() -> None:
    playbook = """
rules:
  - {when: {state: clarify}, reply: {content: in clarify}}
  - {when: {state: triage}, reply: {content: in triage}}
"""
    async with serve(playbook) as (srv, client):
        two_markers = [system("triage"), user("x"), system("clarify")]
        resp = await client.chat.completions.create(model="m", messages=two_markers)
        assert resp.choices[0].message.content == "in clarify"
        resp = await client.chat.completions.create(model="m", messages=[system("triage")])
        assert resp.choices[0].message.content == "in triage"
        resp = await client.chat.completions.create(model="m", messages=[user("no marker")])
        assert resp.choices[0].message.content == (
            "[scripted-model] no rule matched (state=None, last_user=no marker)"
        )
    assert [r.state for r in srv.requests] == ["clarify", "triage", None]
    assert [r.rule for r in srv.requests] == ["rules[0]", "rules[1]", None]


async def test_last_tool_result_groups_fill_content_and_arguments() -> None:
    playbook = r"""
rules:
  - name: event
    when:
      state: waiting
      last_tool: archmax_note
      last_tool_result: '/(?P<order>ORD-\d+)/'
      last_user: '/(?P<who>\w+)@/'
    reply:
      content: "{who}: order {order} is on its way {{literally}} {unknown}"
      tool_calls:
        - name: archmax_wait
          arguments: {reason: "waiting for {order}", ids: ["{order}", 7]}
"""
    async with serve(playbook) as (_, client):
        convo = [system("waiting"), user("mail from ann@x.org"), *note("n1", "[event] ORD-42 ok")]
        resp = await client.chat.completions.create(model="m", messages=convo, tools=TOOLS)
        message = resp.choices[0].message
        assert message.content == "ann: order ORD-42 is on its way {literally} {unknown}"
        assert json.loads(message.tool_calls[0].function.arguments) == {
            "reason": "waiting for ORD-42",
            "ids": ["ORD-42", 7],
        }
        # The tool result must be the LAST message: a later user message hides it.
        resp = await client.chat.completions.create(
            model="m", messages=[*convo, user("ann@x.org again")]
        )
        assert resp.choices[0].message.content.startswith("[scripted-model] no rule matched")
        # A result of another tool does not count as archmax_note.
        other = [*convo[:2], *note("n2", "ORD-1")]
        other[2]["tool_calls"][0]["function"]["name"] = "lookup"
        resp = await client.chat.completions.create(model="m", messages=other)
        assert resp.choices[0].message.content.startswith("[scripted-model] no rule matched")


async def test_a_json_slot_copies_a_tool_result_as_structured_data() -> None:
    playbook = r"""
rules:
  - when: { last_tool: archmax_note, last_tool_result: '/(?P<rows>\[.*\])/s' }
    reply:
      tool_calls:
        - name: archmax_set_variables
          arguments: { variables: { rows: "{rows|json}", text: "{rows}", bad: "{nope|json}" } }
"""
    async with serve(playbook) as (_, client):
        convo = [system("s"), user("go"), *note("n1", 'result: [{"id": 1}, 2]')]
        resp = await client.chat.completions.create(model="m", messages=convo, tools=TOOLS)
        arguments = json.loads(resp.choices[0].message.tool_calls[0].function.arguments)
        assert arguments["variables"] == {
            "rows": [{"id": 1}, 2],
            "text": '[{"id": 1}, 2]',
            "bad": "{nope|json}",
        }


async def test_handoff_drops_tool_calls_and_is_matchable() -> None:
    playbook = """
rules:
  - when: {handoff: false}
    reply: {content: working, tool_calls: [{name: archmax_wait, arguments: {reason: r}}]}
  - when: {handoff: true}
    reply: {content: "parked, waiting", tool_calls: [{name: archmax_wait}]}
"""
    async with serve(playbook) as (srv, client):
        normal = await client.chat.completions.create(model="m", messages=[user("x")], tools=TOOLS)
        handoff = await client.chat.completions.create(
            model="m", messages=[user("x")], tools=TOOLS, tool_choice="none"
        )
    assert normal.choices[0].message.tool_calls is not None
    assert handoff.choices[0].message.content == "parked, waiting"
    assert handoff.choices[0].message.tool_calls is None
    assert handoff.choices[0].finish_reason == "stop"
    assert [r.handoff for r in srv.requests] == [False, True]


async def test_times_limits_a_rule_until_counters_reset() -> None:
    playbook = """
rules:
  - {name: first, times: 2, reply: {content: A}}
  - {name: rest, reply: {content: B}}
"""
    async with serve(playbook) as (srv, client):

        async def say() -> Any:
            resp = await client.chat.completions.create(model="m", messages=[user("x")])
            return resp.choices[0].message.content

        assert [await say() for _ in range(3)] == ["A", "A", "B"]
        srv.reset_counters()
        assert await say() == "A"
    assert [r.rule for r in srv.requests] == ["first", "first", "rest", "first"]


async def test_error_rule_raises_rate_limit_error_with_retry_after() -> None:
    playbook = """
rules:
  - {times: 1, error: {status: 429, retry_after: 0.2, message: "slow down"}}
  - {when: {last_user: crash}, error: {status: 503}}
  - {reply: {content: recovered}}
"""
    async with serve(playbook) as (srv, client):
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(model="m", messages=[user("x")])
        assert caught.value.status_code == 429
        assert caught.value.response.headers["retry-after"] == "0.2"
        assert "slow down" in caught.value.message
        assert caught.value.body == {
            "message": "slow down",
            "type": "rate_limit_error",
            "param": None,
            "code": None,
        }
        resp = await client.chat.completions.create(model="m", messages=[user("x")])
        assert resp.choices[0].message.content == "recovered"
        with pytest.raises(openai.InternalServerError) as server_error:
            await client.chat.completions.create(model="m", messages=[user("crash")])
        assert server_error.value.status_code == 503
        assert "retry-after" not in server_error.value.response.headers
    assert [r.status for r in srv.requests] == [429, 200, 503]


async def test_default_reply_and_any_message() -> None:
    playbook = """
rules:
  - when: {any_message: "/ticket (?P<ticket>T-\\\\d+)/"}
    reply: {content: "ticket {ticket}"}
default: {content: "fallback {x}"}
"""
    async with serve(playbook) as (srv, client):
        convo = [system("s"), user("about ticket T-1"), {"role": "assistant", "content": "ok"}]
        resp = await client.chat.completions.create(
            model="m", messages=[*convo, user("ticket T-9 too")]
        )
        assert resp.choices[0].message.content == "ticket T-9"  # the latest match wins
        resp = await client.chat.completions.create(model="m", messages=[user("nothing")])
        assert resp.choices[0].message.content == "fallback {x}"
    assert srv.requests[-1].rule is None


async def test_delay_models_and_paths_without_v1() -> None:
    playbook = "rules: [{when: {last_user: slow}, delay_ms: 400, reply: {content: late}}]"
    async with serve(playbook) as (srv, client):
        models = await client.models.list()
        assert [m.id for m in models.data] == ["scripted-model"]
        impatient = client.with_options(timeout=0.1)
        with pytest.raises(openai.APITimeoutError):
            await impatient.chat.completions.create(model="m", messages=[user("slow")])
        base = srv.url.removesuffix("/v1")
        request = urllib.request.Request(
            f"{base}/chat/completions",
            data=json.dumps({"model": "m", "messages": [user("fast")]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as raw:
            body = json.load(raw)
        assert body["choices"][0]["message"]["content"].startswith("[scripted-model]")
        assert srv.requests[-1].had_authorization is False
        assert srv.requests[-1].path == "/chat/completions"


def test_connections_send_without_nagle_delay() -> None:
    """The handler writes headers and body in two sends: with Nagle's algorithm on, the body
    would wait for the client's delayed ACK (~40 ms a call), so every connection it serves
    has TCP_NODELAY set."""
    with ScriptedModelServer(Playbook.from_yaml("rules: [{reply: {content: hi}}]")) as srv:
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
        try:
            body = json.dumps({"model": "m", "messages": [user("hello")]})
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            answer = json.loads(conn.getresponse().read())
            assert answer["choices"][0]["message"]["content"] == "hi"
            served = list(srv._connections)  # the keep-alive connection, still open
            assert len(served) == 1
            assert served[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            conn.close()


@pytest.mark.parametrize("close", ["reset", "close"])
def test_a_client_gone_mid_request_is_dropped_quietly(
    close: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A client that goes away in the middle of its request (a worker SIGKILLed during a
    model call: its connection reset, or closed, before the body is whole) is dropped: no
    traceback on stderr, no request recorded, no answer to a half-read body; the server goes
    on serving."""
    with ScriptedModelServer(Playbook.from_yaml("rules: [{reply: {content: hi}}]")) as srv:
        gone = socket.create_connection((srv.host, srv.port), timeout=5)
        gone.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model"'
        )
        deadline = time.monotonic() + 5
        while not srv._connections:  # the server is reading the body
            assert time.monotonic() < deadline
            time.sleep(0.01)
        if close == "reset":
            gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        gone.close()
        while srv._connections:  # the server let the connection go
            assert time.monotonic() < deadline
            time.sleep(0.01)
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
        try:
            body = json.dumps({"model": "m", "messages": [user("hello")]})
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            assert json.loads(conn.getresponse().read())["choices"][0]["message"]["content"] == "hi"
        finally:
            conn.close()
    assert [r.body["messages"] for r in srv.requests] == [[user("hello")]]
    assert "Traceback" not in capsys.readouterr().err


async def test_streaming_yields_the_same_answer() -> None:
    playbook = "rules: [{reply: {content: hi, tool_calls: [{name: t, arguments: {a: 1}}]}}]"
    async with serve(playbook) as (_, client):
        stream = await client.chat.completions.create(
            model="m",
            messages=[user("x")],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].content == "hi"
    assert deltas[0].tool_calls[0].function.name == "t"
    assert json.loads(deltas[0].tool_calls[0].function.arguments) == {"a": 1}
    assert [c.choices[0].finish_reason for c in chunks if c.choices] == [None, "tool_calls"]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0


def test_command_line_prints_the_url_and_serves(tmp_path: Path) -> None:
    book = tmp_path / "book.yaml"
    book.write_text("default: {content: from the cli}")
    command = [
        sys.executable,
        "-m",
        "archmax_temporal.client.testing.scripted_model",
        str(book),
        "--port",
        "0",
    ]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
            with openai.OpenAI(base_url=url, api_key="x", max_retries=0) as sync:
                resp = sync.chat.completions.create(model="m", messages=[user("x")])
            assert resp.choices[0].message.content == "from the cli"
        finally:
            proc.terminate()
            assert proc.wait(timeout=10) == 0  # SIGTERM is a clean stop
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [{nope: 1}]")
    failed = subprocess.run(
        [sys.executable, "-m", "archmax_temporal.client.testing.scripted_model", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert failed.returncode == 2
    assert "rules[0].nope: unknown key" in failed.stderr
