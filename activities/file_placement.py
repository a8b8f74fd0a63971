"""Files handed to a session: placed in ``scratchpad/attachments/`` under names that never
overwrite, or seeded at chosen workspace paths.

Seeding writes at the paths a host (``sessions.seed``) or a case chooses, mounts and runtime
areas refused.

A host hands files inline (text or base64), by upload reference
(:func:`~archmax_temporal.activities.session_store.write_upload`) or as a copy of another session's
file; a store that takes no raw bytes refuses a non-text file by name and nothing is written."""

from __future__ import annotations

import base64
import binascii

from archmax_temporal.activities.effects import Change, Effect, write_file
from archmax_temporal.activities.session_store import SessionStore, is_text, read_upload
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    ReadOnlyPathError,
    StoreCapabilityError,
    WorkspaceError,
)
from archmax_temporal.activities.workspace_view import split_agent_path
from archmax_temporal.workflows.contracts.workspace import (
    FileContent,
    FilePlacementInput,
    FilePlacementResult,
    SeedFilesInput,
    SeedFilesResult,
)
from archmax_temporal.workflows.errors import InvalidSessionIdError
from archmax_temporal.workflows.identity import check_session_id
from archmax_temporal.workflows.placement import placed_name, sanitize_name
from archmax_temporal.workflows.zones import (
    ATTACHMENTS,
    MOUNTS,
    RUNTIME_AREAS,
    RUNTIME_INTERNAL,
    SCRATCHPAD,
)


def checked_session(session_id: str) -> str:
    """``session_id`` checked (:func:`~archmax_temporal.workflows.identity.check_session_id`), or
    the non-retryable ``ApplicationError`` an activity fails with when it is no session id."""
    try:
        return check_session_id(session_id)
    except InvalidSessionIdError as exc:
        raise exc.to_application_error() from exc


def _decode_content(file: FileContent, label: str) -> bytes:
    if file.encoding == "base64":
        try:
            return base64.b64decode(file.content, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise WorkspaceError(f"{label}: content is not valid base64", label) from exc
    try:
        return file.content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkspaceError(f"{label}: content is not valid Unicode", label) from exc


def _placeable(store: SessionStore, var: str, name: str, data: bytes) -> bytes:
    """``data``, refused when ``store`` takes no raw bytes and it is not text."""
    if not store.supports_bytes and not is_text(data):
        raise StoreCapabilityError(
            f"cannot place file '{var}' at '{ATTACHMENTS}/{name}': it is not text and "
            "this session store takes no raw bytes; nothing was written",
            f"{ATTACHMENTS}/{name}",
        )
    return data


def plan_placement(store: SessionStore, session_id: str, placement: FilePlacementInput) -> Effect:
    """The files of ``placement`` in ``scratchpad/attachments/``, each under :func:`placed_name`
    (never over a file there), as the effect the journal applies: read and checked first,
    refused whole (nothing written) when a store without bytes is handed a non-text file."""
    decoded: list[tuple[str, str, bytes]] = []
    for var, file in placement.files.items():
        name = sanitize_name(file.name)
        data = (
            read_upload(store, file.ref)
            if file.ref is not None
            else _decode_content(file, f"file '{var}' ({file.name})")
        )
        decoded.append((var, name, _placeable(store, var, name, data)))
    for var, ref in placement.copies.items():
        data = read_session_file(store, ref.session_id, ref.path, var)
        name = sanitize_name(ref.path)
        decoded.append((var, name, _placeable(store, var, name, data)))
    try:
        existing = {e.name for e in store.list_dir(session_id, ATTACHMENTS)}
    except FileNotFoundInWorkspaceError:
        existing = set()
    paths: dict[str, str] = {}
    writes: list[tuple[str, bytes]] = []
    for var, name, data in decoded:
        placed = placed_name(existing, name)
        while store.exists(session_id, f"{ATTACHMENTS}/{placed}"):
            existing.add(placed)  # written behind our back: still never overwrite
            placed = placed_name(existing, name)
        path = f"{ATTACHMENTS}/{placed}"
        writes.append((path, data))
        existing.add(placed)
        paths[var] = path
    return Effect(FilePlacementResult(paths=paths).model_dump_json(), Change(tuple(writes)))


def read_session_file(store: SessionStore, session_id: str, raw: str, var: str) -> bytes:
    """A file of a session's own workspace (never a mount or a runtime area)."""
    source = checked_session(session_id)
    segments = split_agent_path(raw)
    path = "/".join(segments)
    if not segments or segments[0] in MOUNTS or segments[0] in RUNTIME_INTERNAL:
        raise WorkspaceError(
            f"file '{var}': '{raw}' is not a file of the session's own workspace", raw
        )
    try:
        return store.read_bytes(source, path)
    except FileNotFoundInWorkspaceError as exc:
        raise FileNotFoundInWorkspaceError(f"file '{var}': {exc}", path) from exc


def seed_files(store: SessionStore, session_id: str, seed: SeedFilesInput) -> SeedFilesResult:
    """Write ``seed``'s files at their workspace paths, replacing what is there: every path and
    content is checked before anything is written (mounts and runtime areas refused)."""
    planned: list[tuple[str, bytes]] = []
    for raw, file in seed.files.items():
        segments = split_agent_path(raw)
        path = "/".join(segments)
        if not segments or segments == [SCRATCHPAD]:
            raise WorkspaceError(f"cannot seed '{raw}': not a file path", raw)
        if segments[0] in MOUNTS:
            raise ReadOnlyPathError(
                f"cannot seed '{path}': '{segments[0]}' is a read-only mount", path
            )
        if segments[0] in RUNTIME_INTERNAL:
            raise ReadOnlyPathError(
                f"cannot seed '{path}': '{segments[0]}/' is runtime-internal", path
            )
        if segments[0] in RUNTIME_AREAS:
            raise ReadOnlyPathError(
                f"cannot seed '{path}': '{segments[0]}/' is a runtime area", path
            )
        data = _decode_content(file, f"'{path}'")
        if not store.supports_bytes and not is_text(data):
            raise StoreCapabilityError(
                f"cannot seed '{path}': it is not text and this session store takes no raw "
                "bytes; nothing was written",
                path,
            )
        planned.append((path, data))
    for path, data in planned:
        write_file(store, session_id, path, data)
    return SeedFilesResult(paths=[path for path, _ in planned])
