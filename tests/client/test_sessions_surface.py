"""What a reader is told of a session's wait (a retried model call, a worker of another
store), and an activity's workspace refusal turned back into its typed error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse
from temporalio.client import WorkflowExecutionDescription
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.store_errors import PathEscapeError
from archmax_temporal.client.sessions_surface import _retrying, _store_wait, workspace_error
from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
from archmax_temporal.workflows.store_binding import MISMATCH

SCHEDULED = PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
STARTED = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED


def _pending(
    name: str, attempt: int, message: str, *, kind: str = "", state: int = SCHEDULED
) -> PendingActivityInfo:
    info = PendingActivityInfo(attempt=attempt, state=state)  # type: ignore[arg-type]
    info.activity_type.name = name
    info.last_failure.CopyFrom(
        Failure(message=message, application_failure_info=ApplicationFailureInfo(type=kind))
    )
    return info


def _described(*pending: PendingActivityInfo) -> WorkflowExecutionDescription:
    raw = DescribeWorkflowExecutionResponse(pending_activities=list(pending))
    return cast(WorkflowExecutionDescription, SimpleNamespace(raw_description=raw))


def test_a_retried_model_call_is_what_the_session_waits_on() -> None:
    described = _described(_pending(MODEL_ACTIVITY, 3, "429 rate limited"))
    assert _retrying(described) == "waiting on the model: 429 rate limited (attempt 3)"
    other = _described(_pending("archmax.workspace.read_file", 2, "store down"))
    assert _retrying(other) == "waiting on archmax.workspace.read_file: store down (attempt 2)"


def test_a_first_attempt_or_a_failure_without_message_waits_on_nothing() -> None:
    assert _retrying(_described(_pending(MODEL_ACTIVITY, 1, "boom"))) is None
    assert _retrying(_described(_pending(MODEL_ACTIVITY, 4, ""))) is None
    assert _retrying(_described()) is None


def test_a_refusal_by_another_stores_worker_comes_first() -> None:
    refused = _pending("archmax.store.persist_turn", 2, "wrong store", kind=MISMATCH)
    described = _described(_pending(MODEL_ACTIVITY, 5, "timeout"), refused)
    expected = "waiting on a worker of its store: wrong store (attempt 2)"
    assert _store_wait(described) == expected
    assert _retrying(described) == expected


def test_a_refused_activity_running_again_is_no_store_wait() -> None:
    running = _pending("archmax.store.persist_turn", 2, "wrong store", kind=MISMATCH, state=STARTED)
    assert _store_wait(_described(running)) is None


def test_a_workspace_refusal_becomes_its_class_with_its_path() -> None:
    back = workspace_error(ApplicationError("escapes", "../x", type="PathEscapeError"))
    assert isinstance(back, PathEscapeError)
    assert (str(back), back.path) == ("escapes", "../x")
    other = ApplicationError("not a workspace error", type="SessionNotFoundError")
    assert workspace_error(other) is other
