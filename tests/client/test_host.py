"""The assembly: an :class:`Agent` checks its session path once, where it is given, and carries
its two surfaces; an agent opened without a workflow reads sessions but fires into none."""

from __future__ import annotations

from typing import cast

import pytest

from archmax_temporal.client.host import Agent
from archmax_temporal.client.runtime import Runtime
from archmax_temporal.client.sessions_surface import SessionsSurface
from archmax_temporal.client.workflow_surface import WorkflowSurface
from archmax_temporal.workflows.errors import InvalidSessionIdError

UNUSED = cast(Runtime, object())
"""No runtime is touched by what these tests do."""


def test_a_malformed_agent_session_path_is_refused_at_assembly() -> None:
    with pytest.raises(InvalidSessionIdError, match=r"malformed session path 'mail\.\.id': "):
        Agent(UNUSED, None, session_path="mail..id")


def test_an_agent_carries_its_surfaces_and_session_path() -> None:
    agent = Agent(UNUSED, None, session_path="mail.thread.id", requests_per_run=3)
    assert isinstance(agent.workflow, WorkflowSurface)
    assert isinstance(agent.sessions, SessionsSurface)
    assert (agent.session_path, agent.requests_per_run, agent.delegates) == (
        "mail.thread.id",
        3,
        {},
    )


def test_an_agent_without_a_workflow_says_so_when_one_is_needed() -> None:
    agent = Agent(UNUSED, None)
    with pytest.raises(ValueError, match="without a workflow; pass workflow="):
        _ = agent.loaded
    with pytest.raises(ValueError, match="without a workflow; pass workflow="):
        agent.reload()
