"""The agent's workspace tools (``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob``,
``grep``, and archmax 0.4's ``copy_file``, ``move_file``, ``remove_file``) as the model sees
them, and the activity contracts that run them.

The workspace an agent sees (harness §4.3)::

    scratchpad/**          the session's own working area: read and write
    skills/<slug>/**       bundles enabled in the current state: read only
    AGENTS.md              the authoring root's AGENTS.md: read only
    <other session files>  e.g. trigger.json seeded by the host: read only

``artifacts/``, ``checkpoints/`` and ``_specs/`` are runtime-internal: never listed, never read.
Paths are workspace-relative (``scratchpad/notes.md``), never absolute, never with ``..``.

Activity names are a contract like those in :mod:`workflows.contracts`: renaming one breaks
every session in flight. Pure: no I/O, so the workflow imports it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio.common import RetryPolicy

from archmax_temporal.workflows.models import ToolSchema
from archmax_temporal.workflows.tools import COPY_FILE as COPY_FILE
from archmax_temporal.workflows.tools import EDIT_FILE as EDIT_FILE
from archmax_temporal.workflows.tools import GLOB as GLOB
from archmax_temporal.workflows.tools import GREP as GREP
from archmax_temporal.workflows.tools import LS as LS
from archmax_temporal.workflows.tools import MOVE_FILE as MOVE_FILE
from archmax_temporal.workflows.tools import READ_FILE as READ_FILE
from archmax_temporal.workflows.tools import REMOVE_FILE as REMOVE_FILE
from archmax_temporal.workflows.tools import WORKSPACE_TOOLS as WORKSPACE_TOOLS
from archmax_temporal.workflows.tools import WRITE_FILE as WRITE_FILE

# --- activity names -----------------------------------------------------------------------

LS_ACTIVITY: Final = "archmax.workspace.ls"
READ_FILE_ACTIVITY: Final = "archmax.workspace.read_file"
WRITE_FILE_ACTIVITY: Final = "archmax.workspace.write_file"
EDIT_FILE_ACTIVITY: Final = "archmax.workspace.edit_file"
GLOB_ACTIVITY: Final = "archmax.workspace.glob"
GREP_ACTIVITY: Final = "archmax.workspace.grep"
COPY_FILE_ACTIVITY: Final = "archmax.workspace.copy_file"
MOVE_FILE_ACTIVITY: Final = "archmax.workspace.move_file"
REMOVE_FILE_ACTIVITY: Final = "archmax.workspace.remove_file"
PLACE_FILES_ACTIVITY: Final = "archmax.workspace.place_files"
"""Places a host's (or a sub-workflow's) files into ``scratchpad/attachments/``."""
SEED_FILES_ACTIVITY: Final = "archmax.workspace.seed_files"
"""Writes fixture files at chosen paths (``agent.sessions.seed``)."""

TOOL_ACTIVITIES: Final[dict[str, str]] = {
    LS: LS_ACTIVITY,
    READ_FILE: READ_FILE_ACTIVITY,
    WRITE_FILE: WRITE_FILE_ACTIVITY,
    EDIT_FILE: EDIT_FILE_ACTIVITY,
    GLOB: GLOB_ACTIVITY,
    GREP: GREP_ACTIVITY,
    COPY_FILE: COPY_FILE_ACTIVITY,
    MOVE_FILE: MOVE_FILE_ACTIVITY,
    REMOVE_FILE: REMOVE_FILE_ACTIVITY,
}
"""Tool name → the activity that runs it (always ``archmax.workspace.<tool>``)."""

# --- timeouts -----------------------------------------------------------------------------

WORKSPACE_TOOL_TIMEOUT: Final = timedelta(seconds=60)
"""Per-attempt bound on one workspace tool call (a grep over a large scratchpad included)."""

PLACE_FILES_TIMEOUT: Final = timedelta(minutes=2)
"""Per-attempt bound on placing or seeding a turn's files."""

WORKSPACE_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
    non_retryable_error_types=[
        "WorkspaceError",
        "PathEscapeError",
        "ReadOnlyPathError",
        "BinaryFileError",
        "StoreCapabilityError",
        "FileNotFoundInWorkspaceError",
        "InvalidSessionIdError",
    ],
)
"""Only infrastructure errors retry: an agent's refused call is an ``error`` result, and a
refused placement (a typed workspace error) would be refused again."""

DEFAULT_MAX_RESULT_CHARS: Final = 20_000
"""A tool result longer than this is cut, with a visible ``…[truncated: N more chars]``."""

DEFAULT_READ_LIMIT: Final = 2000
"""Lines ``read_file`` returns when the call sets no ``limit``."""

DEFAULT_GREP_MAX_COUNT: Final = 1000
"""Matching lines ``grep`` returns when the call sets no ``max_count``."""

# --- schemas ------------------------------------------------------------------------------

_PATH_RULES = (
    "Paths are workspace-relative with no leading slash, e.g. 'scratchpad/notes.md'; '..' is "
    "not allowed."
)


def _transfer_parameters(verb: str) -> dict[str, Any]:
    """``copy_file`` / ``move_file``: ``{source, destination, overwrite?}``."""
    return {
        "type": "object",
        "properties": {
            "source": {"type": "string", "description": f"The file to {verb}."},
            "destination": {"type": "string", "description": "Where it goes, under scratchpad/."},
            "overwrite": {
                "type": "boolean",
                "description": "Replace an existing destination (default false).",
            },
        },
        "required": ["source", "destination"],
        "additionalProperties": False,
    }


def workspace_tool_schemas() -> list[ToolSchema]:
    """The workspace tools as the model is told about them."""
    return [
        ToolSchema(
            name=LS,
            description=(
                "List the entries of a workspace directory, one per line; directories end "
                "with '/'. The workspace holds scratchpad/ (your writable working area), "
                "skills/ (read-only skill bundles enabled in this state), AGENTS.md and other "
                f"read-only session files. {_PATH_RULES}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Directory to list; omit for the workspace root.",
                    }
                },
                "additionalProperties": False,
            },
        ),
        ToolSchema(
            name=READ_FILE,
            description=(
                "Read a text file, numbered like `cat -n` (line number, tab, line). Returns at "
                f"most `limit` lines (default {DEFAULT_READ_LIMIT}) starting after `offset` "
                "lines; page through long files with offset. Text files only: binary files "
                f"(images, PDFs, archives) are refused. {_PATH_RULES}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "The file to read."},
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "Lines to skip from the start (default 0).",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": f"Most lines to return (default {DEFAULT_READ_LIMIT}).",
                    },
                },
                "required": ["file_path"],
                "additionalProperties": False,
            },
        ),
        ToolSchema(
            name=WRITE_FILE,
            description=(
                "Write a text file, replacing it if it exists; missing folders are created. "
                "Only scratchpad/ is writable: everything else is read-only. "
                f"{_PATH_RULES}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "file_path": {
                        "type": "string",
                        "description": "Where to write, under scratchpad/.",
                    },
                    "content": {"type": "string", "description": "The file's full content."},
                },
                "required": ["file_path", "content"],
                "additionalProperties": False,
            },
        ),
        ToolSchema(
            name=EDIT_FILE,
            description=(
                "Replace text in a file under scratchpad/. `old_string` must occur exactly "
                "once (add surrounding context to make it unique) unless `replace_all` is "
                f"true, which replaces every occurrence. {_PATH_RULES}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "The file to edit."},
                    "old_string": {
                        "type": "string",
                        "description": "The exact text to replace (not empty).",
                    },
                    "new_string": {"type": "string", "description": "The replacement text."},
                    "replace_all": {
                        "type": "boolean",
                        "description": "Replace every occurrence (default false).",
                    },
                },
                "required": ["file_path", "old_string", "new_string"],
                "additionalProperties": False,
            },
        ),
        ToolSchema(
            name=GLOB,
            description=(
                "Find files whose path (relative to `path`) matches a glob pattern: `*` and "
                "`?` stay within one folder, `**` spans folders, `[abc]` and `{a,b}` choose. "
                "Dot files match too. Returns one workspace path per line. "
                f"{_PATH_RULES}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "Glob pattern, e.g. '**/*.md' or 'scratchpad/*.json'.",
                    },
                    "path": {
                        "type": "string",
                        "description": "Directory to search from; omit for the workspace root.",
                    },
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
        ),
        ToolSchema(
            name=GREP,
            description=(
                "Search text files for a regular expression (Python syntax). Returns matching "
                "lines as `path:line:text`, at most `max_count` of them "
                f"(default {DEFAULT_GREP_MAX_COUNT}). Binary files are skipped. "
                f"{_PATH_RULES}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {
                        "type": "string",
                        "description": "File or directory to search; omit for the whole workspace.",
                    },
                    "glob": {
                        "type": "string",
                        "description": "Only files matching this glob, e.g. '*.md' (a pattern "
                        "without '/' matches file names).",
                    },
                    "max_count": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Most matching lines to return "
                        f"(default {DEFAULT_GREP_MAX_COUNT}).",
                    },
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
        ),
        ToolSchema(
            name=COPY_FILE,
            description=(
                "Copy a file byte for byte (binaries too) to a path under scratchpad/; the "
                "destination's folders are created. An existing destination is refused "
                f"unless `overwrite` is true. {_PATH_RULES}"
            ),
            parameters=_transfer_parameters("copy"),
        ),
        ToolSchema(
            name=MOVE_FILE,
            description=(
                "Move a file under scratchpad/ to another path under scratchpad/: written "
                "there first, then removed here. An existing destination is refused unless "
                f"`overwrite` is true. {_PATH_RULES}"
            ),
            parameters=_transfer_parameters("move"),
        ),
        ToolSchema(
            name=REMOVE_FILE,
            description=(
                f"Delete one file under scratchpad/ (folders are not removed). {_PATH_RULES}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "The file to delete."}
                },
                "required": ["file_path"],
                "additionalProperties": False,
            },
        ),
    ]


# --- tool arguments (validated in the activity) -------------------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LsArgs(_Args):
    path: str | None = None


class ReadFileArgs(_Args):
    file_path: str
    offset: int | None = Field(default=None, ge=0)
    limit: int | None = Field(default=None, ge=1)


class WriteFileArgs(_Args):
    file_path: str
    content: str


class EditFileArgs(_Args):
    file_path: str
    old_string: str
    new_string: str
    replace_all: bool | None = None


class GlobArgs(_Args):
    pattern: str
    path: str | None = None


class GrepArgs(_Args):
    pattern: str
    path: str | None = None
    glob: str | None = None
    max_count: int | None = Field(default=None, ge=1)


class TransferArgs(_Args):
    """``copy_file`` / ``move_file``."""

    source: str
    destination: str
    overwrite: bool | None = None


class RemoveFileArgs(_Args):
    file_path: str


TOOL_ARGUMENTS: Final[dict[str, type[_Args]]] = {
    LS: LsArgs,
    READ_FILE: ReadFileArgs,
    WRITE_FILE: WriteFileArgs,
    EDIT_FILE: EditFileArgs,
    GLOB: GlobArgs,
    GREP: GrepArgs,
    COPY_FILE: TransferArgs,
    MOVE_FILE: TransferArgs,
    REMOVE_FILE: RemoveFileArgs,
}
"""Tool name → the model its arguments are validated against (``null`` means absent)."""


# --- activity inputs and results ----------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    status: Literal["ok", "error"] = "ok"
    truncated: bool = False
    """Whether ``content`` was cut at ``max_result_chars``."""


class FileContent(_Model):
    """A file's content as it crosses the wire: text, or base64 for bytes."""

    content: str
    encoding: Literal["utf-8", "base64"] = "utf-8"


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
