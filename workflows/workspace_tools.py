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

The activities that run them (names, wire types, timeouts, retries) are contracts in
:mod:`archmax_temporal.workflows.contracts.workspace`, re-exported here. Pure: no I/O, so the
workflow imports it.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from archmax_temporal.workflows.contracts.workspace import (
    COPY_FILE_ACTIVITY,
    DEFAULT_MAX_RESULT_CHARS,
    EDIT_FILE_ACTIVITY,
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    LS_ACTIVITY,
    MOVE_FILE_ACTIVITY,
    PLACE_FILES_ACTIVITY,
    PLACE_FILES_TIMEOUT,
    READ_FILE_ACTIVITY,
    REMOVE_FILE_ACTIVITY,
    SEED_FILES_ACTIVITY,
    TOOL_ACTIVITIES,
    WORKSPACE_RETRY,
    WORKSPACE_TOOL_TIMEOUT,
    WRITE_FILE_ACTIVITY,
    FileContent,
    FilePlacementInput,
    FilePlacementResult,
    PlacedFile,
    SeedFilesInput,
    SeedFilesResult,
    SessionFileRef,
    WorkspaceToolInput,
    WorkspaceToolResult,
)
from archmax_temporal.workflows.models import ToolSchema
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

__all__ = [
    "COPY_FILE",
    "COPY_FILE_ACTIVITY",
    "DEFAULT_GREP_MAX_COUNT",
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_READ_LIMIT",
    "EDIT_FILE",
    "EDIT_FILE_ACTIVITY",
    "GLOB",
    "GLOB_ACTIVITY",
    "GREP",
    "GREP_ACTIVITY",
    "LS",
    "LS_ACTIVITY",
    "MOVE_FILE",
    "MOVE_FILE_ACTIVITY",
    "PLACE_FILES_ACTIVITY",
    "PLACE_FILES_TIMEOUT",
    "READ_FILE",
    "READ_FILE_ACTIVITY",
    "REMOVE_FILE",
    "REMOVE_FILE_ACTIVITY",
    "SEED_FILES_ACTIVITY",
    "TOOL_ACTIVITIES",
    "TOOL_ARGUMENTS",
    "WORKSPACE_RETRY",
    "WORKSPACE_TOOLS",
    "WORKSPACE_TOOL_TIMEOUT",
    "WRITE_FILE",
    "WRITE_FILE_ACTIVITY",
    "EditFileArgs",
    "FileContent",
    "FilePlacementInput",
    "FilePlacementResult",
    "GlobArgs",
    "GrepArgs",
    "LsArgs",
    "PlacedFile",
    "ReadFileArgs",
    "RemoveFileArgs",
    "SeedFilesInput",
    "SeedFilesResult",
    "SessionFileRef",
    "TransferArgs",
    "WorkspaceToolInput",
    "WorkspaceToolResult",
    "WriteFileArgs",
    "workspace_tool_schemas",
]

# --- defaults ----------------------------------------------------------------------------

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
