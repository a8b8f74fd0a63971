"""A scripted answer streamed (``client/testing/completion_stream.py``): one delta whole, or the
content in a rule's ``chunks`` and each tool call in two halves, then the finish, the usage
when asked, and ``[DONE]``."""

from __future__ import annotations

import json
from typing import Any

from archmax_temporal.client.testing.completion_stream import sse_events
from archmax_temporal.client.testing.completions import completion
from archmax_temporal.client.testing.playbook import StreamShape

BODY: Any = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _chunks(events: list[tuple[bytes, bool]]) -> list[Any]:
    assert events[-1] == (b"data: [DONE]\n\n", False)
    return [json.loads(event.removeprefix(b"data: ")) for event, _ in events[:-1]]


def test_unshaped_the_answer_is_one_delta_then_the_finish() -> None:
    answer = completion(BODY, "hello", [("t", '{"a": 1}')])
    chunks = _chunks(sse_events(answer, include_usage=False))
    assert len(chunks) == 2
    delta = chunks[0]["choices"][0]["delta"]
    assert (delta["role"], delta["content"]) == ("assistant", "hello")
    assert delta["tool_calls"][0]["function"] == {"name": "t", "arguments": '{"a": 1}'}
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


def test_shaped_the_content_comes_in_chunks_and_each_call_in_halves() -> None:
    answer = completion(BODY, "abcdefgh", [("t", '{"a": 1}')])
    events = sse_events(answer, include_usage=True, shape=StreamShape(chunks=4))
    chunks = _chunks(events)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert [d.get("content") for d in deltas[:4]] == ["ab", "cd", "ef", "gh"]
    assert deltas[0]["role"] == "assistant" and "role" not in deltas[1]
    opening, rest = deltas[4]["tool_calls"][0], deltas[5]["tool_calls"][0]
    assert opening["function"]["name"] == "t"
    assert opening["function"]["arguments"] + rest["function"]["arguments"] == '{"a": 1}'
    assert chunks[-1]["usage"] == answer["usage"] and chunks[-1]["choices"] == []
    assert [text for _, text in events] == [True] * 4 + [False] * 5


def test_no_more_chunks_than_characters() -> None:
    chunks = _chunks(sse_events(completion(BODY, "ab", []), False, StreamShape(chunks=10)))
    assert [c["choices"][0]["delta"].get("content") for c in chunks] == ["a", "b", None]
