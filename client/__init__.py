"""The host side of archmax-temporal: ``create_agent`` and what a host reads back."""

from client.agent import Agent, ResolvedSession, create_agent
from client.case_results import AssertionRecord, CaseResult, RunTestsResult, Verdict
from client.runner import discover_cases, run_case, run_tests
from workflows.errors import (
    ArchmaxError,
    InvalidSessionIdError,
    InvalidVariableNameError,
    MissingDeliveryTriggerError,
    SessionNotAwaitingInputError,
    SessionNotFoundError,
    SessionNotResumableError,
    SpecValidationError,
    UnknownTriggerError,
    UnknownWorkflowError,
)
from workflows.matching import partial_match
from workflows.models import (
    Outcome,
    PendingInput,
    SessionExit,
    SessionSummary,
    SessionView,
    TrailStep,
    Variable,
    is_finished,
    is_runtime_note,
)

__all__ = [
    "Agent",
    "ArchmaxError",
    "AssertionRecord",
    "CaseResult",
    "InvalidSessionIdError",
    "InvalidVariableNameError",
    "MissingDeliveryTriggerError",
    "Outcome",
    "PendingInput",
    "ResolvedSession",
    "RunTestsResult",
    "SessionExit",
    "SessionNotAwaitingInputError",
    "SessionNotFoundError",
    "SessionNotResumableError",
    "SessionSummary",
    "SessionView",
    "SpecValidationError",
    "TrailStep",
    "UnknownTriggerError",
    "UnknownWorkflowError",
    "Variable",
    "Verdict",
    "create_agent",
    "discover_cases",
    "is_finished",
    "is_runtime_note",
    "partial_match",
    "run_case",
    "run_tests",
]
