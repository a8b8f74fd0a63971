"""The write side's own rules, without a server: a session reopening from its checkpoint goes
back to the store it was created in, a failed start half of an update-with-start is
collected, and a firing that names its session never needs the agent's workflow."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from temporalio.client import WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy

from archmax_temporal.client.host import Agent
from archmax_temporal.client.workflow_surface import WorkflowSurface, _collect_start, _store_of
from archmax_temporal.workflows.models import Checkpoint


def _reopening(store_id: str | None, description: str | None) -> Checkpoint:
    held = SimpleNamespace(store_id=store_id, store_description=description)
    return cast(Checkpoint, SimpleNamespace(checkpoint=held))


def test_a_reopening_session_starts_in_the_store_it_was_created_in() -> None:
    assert _store_of(_reopening("store-a", "folder a")) == {
        "store_id": "store-a",
        "store_description": "folder a",
    }
    assert _store_of(_reopening(None, None)) == {}  # an older session's: this host's store
    assert _store_of(None) == {}


@pytest.fixture
async def unretrieved() -> AsyncIterator[list[str]]:
    """What the loop would print as "Future exception was never retrieved"."""
    loop = asyncio.get_running_loop()
    seen: list[str] = []
    previous = loop.get_exception_handler()

    def record(_: object, context: dict[str, Any]) -> None:
        # the message, and the task or future it is about: which code left it, if any
        about = context.get("task") or context.get("future")
        seen.append(f"{context.get('message')}{f' ({about!r})'[:300] if about else ''}")

    loop.set_exception_handler(record)
    yield seen
    loop.set_exception_handler(previous)


def _operation() -> WithStartWorkflowOperation[Any, Any]:
    return WithStartWorkflowOperation(
        "ArchmaxSession",
        id="collect-start",
        task_queue="unused",
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


async def test_a_failed_start_half_is_collected_settled_now_or_later(
    unretrieved: list[str],
) -> None:
    failed_before = _operation()
    failed_before._workflow_handle.set_exception(RuntimeError("server went away"))
    _collect_start(failed_before)
    failed_after = _operation()
    _collect_start(failed_after)
    failed_after._workflow_handle.set_exception(RuntimeError("server went away"))
    await asyncio.sleep(0)  # the done callback runs
    del failed_before, failed_after
    gc.collect()
    await asyncio.sleep(0)
    assert unretrieved == []


async def test_an_uncollected_failed_start_half_would_be_reported(
    unretrieved: list[str],
) -> None:
    """The check above can fail: left alone, the loop reports the future."""
    left = _operation()
    left._workflow_handle.set_exception(RuntimeError("server went away"))
    del left
    gc.collect()
    await asyncio.sleep(0)
    assert any("never retrieved" in message for message in unretrieved)


def test_a_firing_that_names_its_session_needs_no_workflow() -> None:
    class NoWorkflow(SimpleNamespace):
        @property
        def loaded(self) -> Any:
            raise AssertionError("the workflow was read")

    surface = WorkflowSurface(cast(Agent, NoWorkflow(session_path="a")))
    assert surface._session_id_for("manual", {"a": "x"}, "named", None) == ("named", False)
    with pytest.raises(AssertionError, match="the workflow was read"):
        surface._session_id_for("manual", {"a": "x"}, None, None)
