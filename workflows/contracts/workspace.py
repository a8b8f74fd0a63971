"""``archmax.workspace.*``: the workspace tools (one activity each), file placement and
seeding; their wire types, timeouts and retries, and the calls that schedule them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow
from temporalio.common import RetryPolicy

from archmax_temporal.workflows import patches
from archmax_temporal.workflows.contracts.base import (
    HEARTBEAT_TIMEOUT,
    LOCAL_PATCH,
    ActivityContract,
    local_first,
)
from archmax_temporal.workflows.tools import (
    COPY_FILE,
    EDIT_FILE,
    GLOB,
    GREP,
    LS,
    MOVE_FILE,
    READ_FILE,
    REMOVE_FILE,
    WORKSPACE_TOOLS,
    WRITE_FILE,
)

# --- names --------------------------------------------------------------------------------


def tool_activity(tool: str) -> str:
    """The activity that runs the workspace tool ``tool``: always ``archmax.workspace.<tool>``."""
    return f"archmax.workspace.{tool}"


TOOL_ACTIVITIES: Final[dict[str, str]] = {tool: tool_activity(tool) for tool in WORKSPACE_TOOLS}
"""Tool name → the activity that runs it, for every workspace tool of the registry."""

LS_ACTIVITY: Final = TOOL_ACTIVITIES[LS]
READ_FILE_ACTIVITY: Final = TOOL_ACTIVITIES[READ_FILE]
WRITE_FILE_ACTIVITY: Final = TOOL_ACTIVITIES[WRITE_FILE]
EDIT_FILE_ACTIVITY: Final = TOOL_ACTIVITIES[EDIT_FILE]
GLOB_ACTIVITY: Final = TOOL_ACTIVITIES[GLOB]
GREP_ACTIVITY: Final = TOOL_ACTIVITIES[GREP]
COPY_FILE_ACTIVITY: Final = TOOL_ACTIVITIES[COPY_FILE]
MOVE_FILE_ACTIVITY: Final = TOOL_ACTIVITIES[MOVE_FILE]
REMOVE_FILE_ACTIVITY: Final = TOOL_ACTIVITIES[REMOVE_FILE]

PLACE_FILES_ACTIVITY: Final = "archmax.workspace.place_files"
"""Places a host's (or a sub-workflow's) files into ``scratchpad/attachments/``."""

SEED_FILES_ACTIVITY: Final = "archmax.workspace.seed_files"
"""Writes fixture files at chosen paths (``agent.sessions.seed``; the host runs it in-process,
the worker registers it too)."""

# --- which calls run as local activities ---------------------------------------------------

LOCAL_TOOLS: Final = frozenset(
    {LS, READ_FILE, GLOB, WRITE_FILE, EDIT_FILE, COPY_FILE, MOVE_FILE, REMOVE_FILE}
)
"""The short tools: one file or one folder's listing, done in milliseconds. They run as local
activities (:func:`~.base.local_first`): no round trip through the server. ``grep`` reads
every file of a tree and stays a regular activity with heartbeats, as do placements, host
tools, hooks, the sandbox and model calls. A short tool that turns out slow (a large copy, a
slow store) outruns :data:`~.base.LOCAL_TIMEOUT` and goes on as its regular activity,
with the same idempotency key."""

WRITING_TOOLS: Final = frozenset({WRITE_FILE, EDIT_FILE, COPY_FILE, MOVE_FILE, REMOVE_FILE})
"""The tools that change files (through the effect journal: activities.effects)."""

LOCAL_MAX_ARGUMENT_CHARS: Final = 64 * 1024
"""A call whose string arguments are longer than this (a large ``write_file`` or edit) runs
as a regular activity, heartbeating: writing it may take a while on an object store, and next
to its bytes a round trip costs little."""


def runs_local(call: WorkspaceToolInput) -> bool:
    """Whether ``call`` runs as a local activity (given :data:`~.base.LOCAL_PATCH`): a short
    tool (:data:`LOCAL_TOOLS`) with small arguments."""
    return _short(call.tool, call.arguments)


def local_effect(tool: str, arguments: dict[str, Any]) -> bool:
    """Whether a call of ``tool`` with ``arguments`` may change files as a local activity."""
    return tool in WRITING_TOOLS and _short(tool, arguments)


def _short(tool: str, arguments: dict[str, Any]) -> bool:
    if tool not in LOCAL_TOOLS:
        return False
    size = sum(len(value) for value in arguments.values() if isinstance(value, str))
    return size <= LOCAL_MAX_ARGUMENT_CHARS


# --- timeouts and retries -----------------------------------------------------------------

WORKSPACE_TOOL_TIMEOUT: Final = timedelta(seconds=60)
"""Per-attempt bound on one workspace tool call (a grep over a large scratchpad included)."""

PLACE_FILES_TIMEOUT: Final = timedelta(minutes=2)
"""Per-attempt bound on placing or seeding a turn's files."""

WORKSPACE_HEARTBEAT_TIMEOUT: Final = HEARTBEAT_TIMEOUT
"""A workspace call or placement heartbeats while it runs (a long grep, a large copy): a
worker that died mid-call is noticed within this and the call retried on another, where the
effect journal (activities.effects) makes the retry apply the recorded change, not a new one."""

WORKSPACE_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=10,  # a call whose workers die again and again (tests/test_cluster.py)
    non_retryable_error_types=[
        "WorkspaceError",
        "PathEscapeError",
        "ReadOnlyPathError",
        "BinaryFileError",
        "StoreCapabilityError",
        "FileNotFoundInWorkspaceError",
        "SymlinkPathError",
        "NameTooLongError",
        "InvalidSessionIdError",
    ],
)
"""Only infrastructure errors retry (``StoreIOError``, a lost worker): an agent's refused call
is an ``error`` result, and a refused placement (a typed workspace error) would be refused
again."""

DEFAULT_MAX_RESULT_CHARS: Final = 20_000
"""A tool result longer than this is cut, with a visible ``…[truncated: N more chars]``."""

# --- wire types ---------------------------------------------------------------------------


class _Model(BaseModel):
    """A wire model: unknown fields (from a newer version) are ignored, never refused."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class WorkspaceToolInput(_Model):
    """One workspace tool call, as the workflow schedules it."""

    session_id: str
    tool: str
    """The tool's name (``read_file``); must match the activity it is sent to."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    max_result_chars: int = Field(default=DEFAULT_MAX_RESULT_CHARS, ge=1)
    visible_skills: list[str] = Field(default_factory=list)
    """The skill slugs enabled in the current state: only these are listed and readable
    under ``skills/``; every other bundle is invisible."""


class WorkspaceToolResult(_Model):
    """What the tool answers the model. A refusal is ``status="error"``, never a failure."""

    content: str
    status: Literal["ok", "error"] = Field(default="ok", exclude_if=lambda value: value == "ok")
    truncated: bool = Field(default=False, exclude_if=lambda value: not value)
    """Whether ``content`` was cut at ``max_result_chars``. (Like ``status`` and ``kept``, left
    out on the wire at its default: it reads back the same, by any version, and every tool
    step's result is that much shorter in the history.)"""
    kept: bool = Field(default=False, exclude_if=lambda value: not value)
    """Whether the activity kept ``content`` in the store under its digest (a long one,
    ``checkpoints/results/``): the next model call names it instead of carrying it."""


class FileContent(_Model):
    """A file's content as it crosses the wire: text, or base64 for bytes; or ``ref``, the
    SHA-256 of bytes a host uploaded to the session store (a large file)."""

    content: str = ""
    encoding: Literal["utf-8", "base64"] = "utf-8"
    ref: str | None = None


class PlacedFile(FileContent):
    """A file handed to a session under its own name (placed into ``scratchpad/attachments/``)."""

    name: str


class SessionFileRef(_Model):
    """A file already in some session's workspace (a sub-workflow's argument or return)."""

    session_id: str
    path: str
    """Its workspace path in that session, e.g. ``scratchpad/report.json``."""


class FilePlacementInput(_Model):
    """Files to place into a session's ``scratchpad/attachments/``, keyed by variable name:
    given by content (``files``), or copied from a session's workspace (``copies``)."""

    session_id: str
    files: dict[str, PlacedFile] = Field(default_factory=dict)
    copies: dict[str, SessionFileRef] = Field(default_factory=dict)


class FilePlacementResult(_Model):
    """Variable name → the workspace path its file was placed at."""

    paths: dict[str, str]


class SeedFilesInput(_Model):
    """Fixture files written at the workspace paths given (``scratchpad/…`` or root-level
    session files such as ``trigger.json``); seeds no variable."""

    session_id: str
    files: dict[str, FileContent]


class SeedFilesResult(_Model):
    """The workspace paths written, in input order."""

    paths: list[str]


# --- contracts ----------------------------------------------------------------------------

TOOL_CONTRACTS: Final[tuple[ActivityContract, ...]] = tuple(
    ActivityContract(name, WorkspaceToolInput, WorkspaceToolResult, f"the {tool} tool")
    for tool, name in TOOL_ACTIVITIES.items()
)
PLACE_FILES: Final = ActivityContract(
    PLACE_FILES_ACTIVITY,
    FilePlacementInput,
    FilePlacementResult,
    "place files into a session's scratchpad/attachments/",
)
SEED_FILES: Final = ActivityContract(
    SEED_FILES_ACTIVITY, SeedFilesInput, SeedFilesResult, "write fixture files into a session"
)
CONTRACTS: Final[tuple[ActivityContract, ...]] = (*TOOL_CONTRACTS, PLACE_FILES, SEED_FILES)

# --- calls --------------------------------------------------------------------------------


async def run_tool(call: WorkspaceToolInput, *, summary: str) -> WorkspaceToolResult:
    """Run the workspace tool ``call.tool`` on its own activity and wait for its answer (an
    ``ActivityError`` when it failed for good): a local one first when it is short
    (:func:`runs_local`), else a regular one."""
    if runs_local(call) and patches.patched(LOCAL_PATCH):
        answer: WorkspaceToolResult = await local_first(
            TOOL_ACTIVITIES[call.tool],
            call,
            result_type=WorkspaceToolResult,
            start_to_close_timeout=WORKSPACE_TOOL_TIMEOUT,
            heartbeat_timeout=WORKSPACE_HEARTBEAT_TIMEOUT,
            retry_policy=WORKSPACE_RETRY,
            summary=summary,
        )
        return answer
    result: WorkspaceToolResult = await workflow.execute_activity(
        TOOL_ACTIVITIES[call.tool],
        call,
        result_type=WorkspaceToolResult,
        start_to_close_timeout=WORKSPACE_TOOL_TIMEOUT,
        heartbeat_timeout=WORKSPACE_HEARTBEAT_TIMEOUT,
        retry_policy=WORKSPACE_RETRY,
        summary=summary,
    )
    return result


async def place_files(placement: FilePlacementInput, *, summary: str) -> FilePlacementResult:
    """Schedule a placement into ``scratchpad/attachments/`` and wait for the placed paths
    (an ``ActivityError`` carrying the typed refusal when it was refused)."""
    placed: FilePlacementResult = await workflow.execute_activity(
        PLACE_FILES_ACTIVITY,
        placement,
        result_type=FilePlacementResult,
        start_to_close_timeout=PLACE_FILES_TIMEOUT,
        heartbeat_timeout=WORKSPACE_HEARTBEAT_TIMEOUT,
        retry_policy=WORKSPACE_RETRY,
        summary=summary,
    )
    return placed
