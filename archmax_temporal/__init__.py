"""archmax-temporal: run archmax agent workflows as durable Temporal workflows.

The package root is the host face::

    from archmax_temporal import create_agent

    async with create_agent("support-inbox", root="examples/support-inbox") as agent:
        outcome = await agent.workflow.send(None, "About my order", trigger="email_received")

Names are loaded on first use, so importing the package costs only what a host touches:
``create_agent`` never imports the case runner, and the Temporal workflow sandbox, which
imports this package before every ``archmax_temporal.workflows`` module, loads nothing here.

Layout (one import name; each folder of the repository is a sub-package):

- ``archmax_temporal.workflows``: the ``ArchmaxSession`` workflow and the pure machine
- ``archmax_temporal.activities``: every side effect (model calls, tools, sandbox, store)
- ``archmax_temporal.client``: the host API, its ``cli`` and ``testing`` wings
- ``archmax_temporal.worker``: builds and runs the Temporal worker
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    # the host API
    "Agent": "archmax_temporal.client.host",
    "ResolvedSession": "archmax_temporal.client.session_ids",
    "create_agent": "archmax_temporal.client.agent",
    "ToolContext": "archmax_temporal.activities.host_tools",
    # what a host reads back
    "Outcome": "archmax_temporal.workflows.models",
    "PendingDecision": "archmax_temporal.workflows.models",
    "PendingInput": "archmax_temporal.workflows.models",
    "RepairReport": "archmax_temporal.client.repair",
    "SessionEvent": "archmax_temporal.client.events",
    "SessionExit": "archmax_temporal.workflows.models",
    "SessionSummary": "archmax_temporal.workflows.models",
    "SessionView": "archmax_temporal.workflows.models",
    "TrailStep": "archmax_temporal.workflows.models",
    "Variable": "archmax_temporal.workflows.models",
    "is_finished": "archmax_temporal.workflows.models",
    "is_runtime_note": "archmax_temporal.workflows.models",
    # typed errors
    "ArchmaxError": "archmax_temporal.workflows.errors",
    "InvalidSessionIdError": "archmax_temporal.workflows.errors",
    "InvalidVariableNameError": "archmax_temporal.workflows.errors",
    "MissingDeliveryTriggerError": "archmax_temporal.workflows.errors",
    "SessionNotAwaitingInputError": "archmax_temporal.workflows.errors",
    "SessionNotFoundError": "archmax_temporal.workflows.errors",
    "SessionNotResumableError": "archmax_temporal.workflows.errors",
    "SpecValidationError": "archmax_temporal.workflows.errors",
    "UnknownTriggerError": "archmax_temporal.workflows.errors",
    "UnknownWorkflowError": "archmax_temporal.workflows.errors",
    # testing workflows
    "AssertionRecord": "archmax_temporal.client.testing.results",
    "CaseResult": "archmax_temporal.client.testing.results",
    "RunTestsResult": "archmax_temporal.client.testing.results",
    "Verdict": "archmax_temporal.client.testing.results",
    "discover_cases": "archmax_temporal.client.testing.runner",
    "run_case": "archmax_temporal.client.testing.runner",
    "run_tests": "archmax_temporal.client.testing.runner",
    "partial_match": "archmax_temporal.workflows.matching",
}

__all__ = [
    "Agent",
    "ArchmaxError",
    "AssertionRecord",
    "CaseResult",
    "InvalidSessionIdError",
    "InvalidVariableNameError",
    "MissingDeliveryTriggerError",
    "Outcome",
    "PendingDecision",
    "PendingInput",
    "RepairReport",
    "ResolvedSession",
    "RunTestsResult",
    "SessionEvent",
    "SessionExit",
    "SessionNotAwaitingInputError",
    "SessionNotFoundError",
    "SessionNotResumableError",
    "SessionSummary",
    "SessionView",
    "SpecValidationError",
    "ToolContext",
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


def _version() -> str:
    """The installed distribution's version (its metadata is the one source)."""
    from importlib import metadata

    try:
        return metadata.version("archmax-temporal")
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        version = globals()["__version__"] = _version()
        return version
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'archmax_temporal' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:
    __version__: str
    from archmax_temporal.activities.host_tools import ToolContext
    from archmax_temporal.client.agent import create_agent
    from archmax_temporal.client.events import SessionEvent
    from archmax_temporal.client.host import Agent
    from archmax_temporal.client.repair import RepairReport
    from archmax_temporal.client.session_ids import ResolvedSession
    from archmax_temporal.client.testing.results import (
        AssertionRecord,
        CaseResult,
        RunTestsResult,
        Verdict,
    )
    from archmax_temporal.client.testing.runner import discover_cases, run_case, run_tests
    from archmax_temporal.workflows.errors import (
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
    from archmax_temporal.workflows.matching import partial_match
    from archmax_temporal.workflows.models import (
        Outcome,
        PendingDecision,
        PendingInput,
        SessionExit,
        SessionSummary,
        SessionView,
        TrailStep,
        Variable,
        is_finished,
        is_runtime_note,
    )
