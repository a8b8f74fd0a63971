"""The host side of archmax-temporal: ``create_agent`` and what a host reads back."""

from client.agent import Agent, ResolvedSession, create_agent
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
    "InvalidSessionIdError",
    "InvalidVariableNameError",
    "MissingDeliveryTriggerError",
    "Outcome",
    "PendingInput",
    "ResolvedSession",
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
    "create_agent",
    "is_finished",
    "is_runtime_note",
]
