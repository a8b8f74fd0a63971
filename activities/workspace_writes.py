"""The workspace tools that change files: ``write_file``, ``edit_file``, ``copy_file``,
``move_file`` and ``remove_file``, each planning an effect.

Each returns the :class:`~archmax_temporal.activities.effects.Effect` the effect journal applies.

A plan reads and checks everything first and writes nothing: the journal records its outcome
before applying it, so a retry after a crash applies the same change and gives the same
answer (:mod:`archmax_temporal.activities.effects`). Only ``scratchpad/`` is writable."""

from __future__ import annotations

from archmax_temporal.activities.effects import Change, Effect
from archmax_temporal.activities.session_store import check_deletable, encode_text
from archmax_temporal.activities.store_errors import FileNotFoundInWorkspaceError, WorkspaceError
from archmax_temporal.activities.tool_text import human_size
from archmax_temporal.activities.workspace_view import Location, WorkspaceView
from archmax_temporal.workflows.workspace_tools import (
    EditFileArgs,
    RemoveFileArgs,
    TransferArgs,
    WriteFileArgs,
)


def write_file(ws: WorkspaceView, args: WriteFileArgs) -> Effect:
    """``write_file {file_path, content}``: create or replace a file under ``scratchpad/``."""
    loc = ws.writable(args.file_path)
    data = encode_text(args.content, loc.agent)
    ws.check_write(loc, data)
    verb = "Updated" if ws.is_file(loc) else "Wrote"
    return Effect(
        f"{verb} '{loc.agent}' ({len(args.content)} chars).", Change(writes=((loc.agent, data),))
    )


def edit_file(ws: WorkspaceView, args: EditFileArgs) -> Effect:
    """``edit_file {file_path, old_string, new_string, replace_all?}``: one occurrence, or
    every one with ``replace_all``."""
    loc = ws.writable(args.file_path)
    if not args.old_string:
        raise WorkspaceError("old_string must not be empty", loc.agent)
    if args.old_string == args.new_string:
        raise WorkspaceError("old_string and new_string are identical", loc.agent)
    text = ws.read_text(loc)
    count = text.count(args.old_string)
    if count == 0:
        raise WorkspaceError(f"old_string was not found in '{loc.agent}'", loc.agent)
    if count > 1 and not args.replace_all:
        raise WorkspaceError(
            f"old_string occurs {count} times in '{loc.agent}'; include more surrounding "
            "context to make it unique, or pass replace_all: true",
            loc.agent,
        )
    replaced = text.replace(args.old_string, args.new_string, -1 if args.replace_all else 1)
    data = encode_text(replaced, loc.agent)
    done = count if args.replace_all else 1
    return Effect(
        f"Replaced {done} occurrence{'s' if done != 1 else ''} in '{loc.agent}'.",
        Change(writes=((loc.agent, data),)),
    )


def _transfer_target(ws: WorkspaceView, source: Location, args: TransferArgs) -> Location:
    """The destination of a copy or move, refused when it is the source or a folder, or an
    existing file without ``overwrite``."""
    dest = ws.writable(args.destination)
    if dest.agent == source.agent:
        raise WorkspaceError(f"'{source.agent}' is both source and destination", dest.agent)
    if ws.is_dir(dest):
        raise WorkspaceError(f"'{dest.agent}' is a folder, not a file", dest.agent)
    if ws.is_file(dest) and not args.overwrite:
        raise WorkspaceError(
            f"'{dest.agent}' exists; pass overwrite: true to replace it", dest.agent
        )
    return dest


def copy_file(ws: WorkspaceView, args: TransferArgs) -> Effect:
    """``copy_file {source, destination, overwrite?}``: a byte-exact copy."""
    source = ws.locate(args.source)
    data = ws.read_bytes(source)
    dest = _transfer_target(ws, source, args)
    ws.check_write(dest, data)
    return Effect(
        f"Copied '{source.agent}' to '{dest.agent}' ({human_size(len(data))}).",
        Change(writes=((dest.agent, data),)),
    )


def move_file(ws: WorkspaceView, args: TransferArgs) -> Effect:
    """``move_file {source, destination, overwrite?}``: written there, then removed here."""
    source = ws.writable(args.source)  # a move removes its source: only scratchpad/ allows it
    check_deletable(ws.store, source.agent)
    data = ws.read_bytes(source)
    dest = _transfer_target(ws, source, args)
    ws.check_write(dest, data)
    return Effect(
        f"Moved '{source.agent}' to '{dest.agent}' ({human_size(len(data))}).",
        Change(writes=((dest.agent, data),), removes=(source.agent,)),  # written, then removed
    )


def remove_file(ws: WorkspaceView, args: RemoveFileArgs) -> Effect:
    """``remove_file {file_path}``: one file under ``scratchpad/``."""
    loc = ws.writable(args.file_path)
    if ws.is_dir(loc):
        raise WorkspaceError(f"'{loc.agent}' is a folder; remove_file deletes files", loc.agent)
    check_deletable(ws.store, loc.agent)
    if not ws.is_file(loc):
        ws.read_bytes(loc)  # says why: missing, or reached through a symlink
        raise FileNotFoundInWorkspaceError(f"'{loc.agent}' does not exist", loc.agent)
    return Effect(f"Removed '{loc.agent}'.", Change(removes=(loc.agent,)))
