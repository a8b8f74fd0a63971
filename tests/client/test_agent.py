"""``create_agent``'s parameters are written once, in :class:`AgentOptions`: its documented
keyword signature names the same ones with the same defaults and types, and what a call says
reaches ``open_agent`` as one options object."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

from archmax_temporal.client import host
from archmax_temporal.client.agent import AgentOpener, AgentOptions, create_agent


def test_the_signature_and_the_options_name_the_same_parameters() -> None:
    """Names, order, defaults and annotations agree: a parameter added to one and not the
    other fails here (and ``create_agent`` would fail to build its options)."""
    parameters = list(inspect.signature(create_agent).parameters.values())
    assert parameters[0].name == "workflow"
    keywords = parameters[1:]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in keywords)
    fields = dataclasses.fields(AgentOptions)
    assert [(p.name, p.default, p.annotation) for p in keywords] == [
        (f.name, f.default, f.type) for f in fields
    ]


def test_the_options_are_frozen_and_keyword_only() -> None:
    options = AgentOptions(root="somewhere")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.root = "elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        AgentOptions("somewhere")  # type: ignore[call-arg]


async def test_what_a_call_says_reaches_open_agent_as_its_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    opened: list[tuple[str | None, AgentOptions]] = []
    sentinel: Any = object()

    async def fake_open_agent(workflow: str | None, options: AgentOptions) -> Any:
        opened.append((workflow, options))
        return sentinel

    monkeypatch.setattr(host, "open_agent", fake_open_agent)
    opener = create_agent("support-inbox", root=tmp_path, worker_cache=0, session_path="a.b")
    assert isinstance(opener, AgentOpener)
    assert await opener is sentinel
    assert opened == [
        ("support-inbox", AgentOptions(root=tmp_path, worker_cache=0, session_path="a.b"))
    ]
    assert await create_agent() is sentinel
    assert opened[-1] == (None, AgentOptions())
