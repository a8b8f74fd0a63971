"""The typed errors of archmax-temporal, one class per node, with stable names.

The class name is the contract: it is the ``type`` of the Temporal ``ApplicationError`` an
error travels as (from an update validator, a workflow, an activity), and the client maps that
type back to the class (:func:`error_from_type`). Renaming a class is a breaking change.

::

    ArchmaxError
    ├── SpecValidationError            workflow.yaml (or its tree) does not load
    ├── UnknownWorkflowError           no workflows/<slug>/workflow.yaml under the root
    ├── UnknownTriggerError            a firing names a trigger no state declares
    ├── TriggerInputError              a firing misses or mistypes a trigger's requires
    ├── WorkflowDisabledError          a new turn on a workflow with disabled: true
    ├── ReservedToolNameError          a host tool takes a runtime or built-in tool's name
    ├── InvalidVariableNameError       a seeded or delivered variable name is illegal
    ├── InvalidSessionIdError          a session id cannot address a session
    ├── PayloadTooLargeError           a firing, variable, message or file over its limit
    ├── IdempotencyKeyReusedError      an idempotency key sent again with another request
    ├── SessionError
    │   ├── SessionNotFoundError       no session with that id
    │   ├── SessionNotAwaitingInputError   deliver to a session not parked by archmax_wait
    │   ├── MissingDeliveryTriggerError    deliver without a trigger id
    │   ├── SessionNotResumableError   a firing (or a repair) for a session that is mid-turn
    │   ├── SessionNotParkedError      decide / reply on a session not at a human state
    │   ├── InvalidDecisionTargetError a decision naming no edge of the parked state
    │   ├── EmptyMessageError          a reply (or send) with an empty message
    │   ├── SessionAwaitingSubWorkflowError  a firing for a session parked on its child
    │   ├── SessionUnavailableError    the session exists but no worker polls its queue
    │   ├── SessionTerminatedError     its run was terminated or timed out under a caller
    │   ├── SessionBusyError           too many firings in flight at once (retryable)
    │   ├── SpecNeededError            a new turn under a workflow revision the session lacks
    │   └── TranscriptLogUnrecoverableError  the history cannot vouch for a rebuilt log
    ├── ConfigurationError             an environment variable holds an unusable value
    │   └── StoreMismatchError         a worker of another store got a session's activity
    ├── StoreIdentityError             the store's identity (``_store.json``) is unreadable
    ├── TemporalUnavailableError       the Temporal server did not answer (retryable)
    ├── ModelCallError                 the model endpoint refused a call for good (a 4xx)
    ├── SandboxError                   a hook or script could not give a result
    │   ├── ForbiddenSandboxImportError    it imports a specifier outside @archmax-ai/harness
    │   ├── SandboxScriptError         it threw, failed to parse, or its file is missing
    │   ├── SandboxTimeoutError        it ran past settings.timeoutMs
    │   ├── SandboxMemoryError         it ran past settings.memoryLimitBytes
    │   ├── SandboxResultTooLargeError its result is longer than settings.maxResultChars
    │   └── SandboxCrashError          the sandbox process died without an answer
    └── SuiteError                     ``archmax test`` cannot run a suite as configured
        ├── UnsupportedConcurrencyError    tests.maxConcurrency above 1
        └── InvalidTargetError         create_target gave no governed agent of the workflow

The workspace's refusals (``WorkspaceError``: ``ReadOnlyPathError``, ``PathEscapeError``, …) derive
from ``ArchmaxError`` too; they live with the store in ``archmax_temporal.activities.store_errors``,
carry the refused path, and the client maps their wire type back there.

This module is pure (no I/O) so workflow code, activities and the client all import it.
"""

from __future__ import annotations

from typing import ClassVar

from temporalio.exceptions import ApplicationError


class ArchmaxError(Exception):
    """Base of every error archmax-temporal raises on purpose."""

    retryable: ClassVar[bool] = False
    """Whether Temporal may retry the operation that raised it (deterministic ones: never)."""

    def to_application_error(self) -> ApplicationError:
        """The error as it travels over the wire: an ApplicationError typed with the class name."""
        return ApplicationError(
            str(self), type=type(self).__name__, non_retryable=not self.retryable
        )


class SpecValidationError(ArchmaxError):
    """A workflow.yaml does not load: an unknown key, a dangling transition, no start state.

    ``issues`` holds every problem found, each ``"<dotted.path>: <message>"``, so an author
    fixes them all in one pass.
    """

    def __init__(self, source: str, issues: list[str]) -> None:
        self.source = source
        self.issues = list(issues)
        lines = "\n".join(f"  - {issue}" for issue in self.issues)
        super().__init__(f"{source}: invalid workflow spec\n{lines}")


class UnknownWorkflowError(ArchmaxError):
    """No ``workflows/<slug>/workflow.yaml`` exists under the authoring root."""


class UnknownTriggerError(ArchmaxError):
    """A firing names a trigger id that no state declares; the message lists the declared ids."""


class TriggerInputError(ArchmaxError):
    """A firing is missing, or mistypes, a variable its trigger ``requires``: refused before
    any model call, naming the trigger, the variable, the type and what arrived."""


class WorkflowDisabledError(ArchmaxError):
    """A new turn on a workflow declaring ``disabled: true``; parked sessions still drain."""


class ReservedToolNameError(ArchmaxError):
    """A host tool is named ``archmax_*`` or like a built-in tool."""


class InvalidVariableNameError(ArchmaxError):
    """A seeded or delivered variable name is not ``^[a-z][a-z0-9_]*$`` or is reserved."""


class InvalidSessionIdError(ArchmaxError):
    """A session id is empty, too long or contains characters that cannot name a folder."""


class PayloadTooLargeError(ArchmaxError):
    """A firing (or one of its variables, its message or a file) is over the configured
    limit: refused before anything is written; the message names the field, its size and
    the limit."""


class IdempotencyKeyReusedError(ArchmaxError):
    """An idempotency key arrived again with a different request (another body, under the
    same route and caller): the key names its first request, so the second is refused
    instead of being answered with the first one's outcome."""


class SessionError(ArchmaxError):
    """A session exists (or not) in a shape the request cannot be applied to."""


class SessionNotFoundError(SessionError):
    """No session with that id has ever run."""


class SessionNotAwaitingInputError(SessionError):
    """A delivery to a session that is not parked awaiting input (a second timer firing too)."""


class MissingDeliveryTriggerError(SessionError):
    """A delivery carries no trigger id; the id is recorded as the session's current trigger."""


class SessionNotResumableError(SessionError):
    """A firing (or ``archmax repair``) for a session whose turn is still running: one writer
    per session."""


class SessionNotParkedError(SessionError):
    """``decide`` or ``reply`` on a session that is not parked at a human state."""


class InvalidDecisionTargetError(SessionError):
    """A decision whose target is not an outgoing edge of the parked state; lists the valid."""


class EmptyMessageError(SessionError):
    """A reply to a parked session (or a send) whose message is empty."""


class SessionAwaitingSubWorkflowError(SessionError):
    """A firing for a session parked on a sub-workflow's park: deliver to, decide on or reply
    to the child session the message names; the caller resumes when the child finishes."""


class SessionUnavailableError(SessionError):
    """The session exists but cannot answer: no worker polls its task queue."""


class SessionTerminatedError(SessionError):
    """The session's workflow run was terminated, timed out or reset (by an operator or a
    server limit) while a caller waited on it: the waiting call ends at once with this."""


class SessionBusyError(SessionError):
    """The session has as many firings in flight as Temporal allows (its per-workflow update
    limit): nothing was applied; retry shortly."""

    retryable: ClassVar[bool] = True


class SpecNeededError(SessionError):
    """A firing that would open a turn named a workflow revision the session does not hold
    and did not carry it: nothing was applied. The host sends the firing again with the
    spec (:class:`~archmax_temporal.workflows.models.TurnSpec`); a user never sees this."""


class TranscriptLogUnrecoverableError(SessionError):
    """``archmax repair`` cannot rebuild the session's conversation log: the workflow history
    it would be rebuilt from does not vouch for it (runs gone past retention, a call whose
    recorded base the messages before it do not reach); nothing is written."""


class ConfigurationError(ArchmaxError):
    """An environment variable holds a value the runtime cannot use (it names the variable)."""


class StoreMismatchError(ConfigurationError):
    """A worker was handed an activity of a session created in another session store (its
    ``ARCHMAX_STORE`` names another store): it runs nothing and fails the attempt, naming
    both stores. Retryable: the session waits, losing nothing, until a worker of its own
    store takes the activity (:mod:`archmax_temporal.workflows.store_binding`)."""

    retryable: ClassVar[bool] = True


class StoreIdentityError(ArchmaxError):
    """The session store's identity (``_store.json``, written once when the store is first
    used) cannot be read: not JSON, or not the identity's fields. Nothing is rewritten: a
    store whose identity changed would disown every session created in it."""


class TemporalUnavailableError(ArchmaxError):
    """The Temporal server did not answer within the client's patience (a restart longer
    than it waits out): nothing is known to be lost; retry."""

    retryable: ClassVar[bool] = True


class ModelCallError(ArchmaxError):
    """The model endpoint answered with a non-retryable error (400, 401, 403, 404, 422...)."""


class SandboxError(ArchmaxError):
    """A hook or ``archmax_run`` script ended without a usable result; never retried."""


class ForbiddenSandboxImportError(SandboxError):
    """A hook or script imports a specifier other than ``@archmax-ai/harness`` (or a
    subpath of it): the sandbox has no module loader, so the import could never resolve."""


class SandboxScriptError(SandboxError):
    """The script threw, did not parse, or its file could not be found: a fail-closed veto."""


class SandboxTimeoutError(SandboxError):
    """The run went past ``settings.timeoutMs`` (an endless loop) and its process was killed."""


class SandboxMemoryError(SandboxError):
    """The run went past ``settings.memoryLimitBytes`` (a memory bomb)."""


class SandboxResultTooLargeError(SandboxError):
    """The result's JSON is longer than ``settings.maxResultChars``."""


class SandboxCrashError(SandboxError):
    """The sandbox process exited without answering (killed, or the engine crashed)."""


class SuiteError(ArchmaxError):
    """``archmax test`` refuses to run a suite as it is configured (before any case runs)."""


class UnsupportedConcurrencyError(SuiteError):
    """``tests.maxConcurrency`` above 1: cases run sequentially, so the suite refuses to run
    rather than pretend to honour it."""


class InvalidTargetError(SuiteError):
    """``create_target`` gave something that is not a governed agent of the workflow."""


def _tree(root: type[ArchmaxError]) -> tuple[type[ArchmaxError], ...]:
    """``root`` and every class below it, depth first in definition order: the tree above."""
    children = [child for child in root.__subclasses__() if child.__module__ == __name__]
    return (root, *(cls for child in children for cls in _tree(child)))


_ALL: tuple[type[ArchmaxError], ...] = _tree(ArchmaxError)
_BY_NAME: dict[str, type[ArchmaxError]] = {cls.__name__: cls for cls in _ALL}


def error_from_type(type_name: str | None, message: str) -> ArchmaxError | None:
    """Rebuild the typed error an ApplicationError of ``type_name`` stands for, if it is ours."""
    if type_name is None or type_name not in _BY_NAME:
        return None
    cls = _BY_NAME[type_name]
    if cls is SpecValidationError:
        return SpecValidationError("workflow", [message])
    return cls(message)


def application_error(error: ArchmaxError) -> ApplicationError:
    """Shorthand used by workflow code: the wire form of ``error``."""
    return error.to_application_error()
