"""The agent's workspace: ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob`` and
``grep`` as activities, and the placement of files handed to a session.

What the agent sees (harness §4.3, seed "Files handed to a session")::

    scratchpad/**          the session's folder in the store: read and write
    skills/<slug>/**       <authoring root>/skills/<slug>, for slugs in visible_skills: read only
    AGENTS.md              <authoring root>/AGENTS.md: read only
    <other session files>  e.g. trigger.json, offload areas: read only

``artifacts/``, ``checkpoints/`` and ``_specs/`` are runtime-internal: hidden from listings,
searches and reads. A skill not in ``visible_skills`` is hidden the same way. The zones are
defined in :mod:`workflows.zones`.

A refused call (a bad path, a write outside ``scratchpad/``, a binary read, a missing file, a
symlink, a name too long for the disk) is answered as a ``status="error"`` result the model
reads, in its own path vocabulary (``scratchpad/…``, never a host path); it never fails the
activity. Only infrastructure errors (:class:`StoreIOError`: the disk, the store backend) raise,
and Temporal retries them.

Symlinks inside the session are never followed (the store refuses any path through one;
listings, globs and greps skip them). The mounts (``skills/``, ``AGENTS.md``) are the author's
own tree: a symlink there is followed while it stays inside its mount.

Every call that changes files (``write_file``, ``edit_file``, ``copy_file``, ``move_file``,
``remove_file``, placements) goes through the effect journal (:mod:`activities.effects`):
its outcome is recorded before it is applied, so a retry after a crash applies the same change
and gives the same answer. Calls heartbeat while they run (:mod:`activities.heartbeat`).

``grep`` and ``glob`` run the model's patterns on RE2 (:mod:`activities.regex`), in linear
time, and ``grep`` reads at most :data:`GREP_MAX_BYTES` per call.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import mimetypes
import os
import re
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import ValidationError
from temporalio import activity

from archmax_temporal.activities.effects import (
    Change,
    Effect,
    EffectJournal,
    digest,
    idempotency_key,
    write_file,
)
from archmax_temporal.activities.heartbeat import heartbeating
from archmax_temporal.activities.regex import Matcher, compile_pattern, compile_re2
from archmax_temporal.activities.session_paths import os_errors
from archmax_temporal.activities.session_store import (
    Entry,
    SessionStore,
    check_deletable,
    check_storable,
    is_text,
    read_upload,
    sweep_temporaries,
)
from archmax_temporal.activities.store_errors import (
    BinaryFileError,
    FileNotFoundInWorkspaceError,
    PathEscapeError,
    ReadOnlyPathError,
    StoreCapabilityError,
    StoreIOError,
    WorkspaceError,
    unexpected,
)
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.workflows.contracts.workspace import (
    COPY_FILE_ACTIVITY,
    EDIT_FILE_ACTIVITY,
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    LS_ACTIVITY,
    MOVE_FILE_ACTIVITY,
    PLACE_FILES_ACTIVITY,
    READ_FILE_ACTIVITY,
    REMOVE_FILE_ACTIVITY,
    SEED_FILES_ACTIVITY,
    WRITE_FILE_ACTIVITY,
    FileContent,
    FilePlacementInput,
    FilePlacementResult,
    SeedFilesInput,
    SeedFilesResult,
    WorkspaceToolInput,
    WorkspaceToolResult,
)
from archmax_temporal.workflows.errors import InvalidSessionIdError
from archmax_temporal.workflows.identity import check_session_id
from archmax_temporal.workflows.placement import placed_name, sanitize_name
from archmax_temporal.workflows.tools import (
    COPY_FILE,
    EDIT_FILE,
    GLOB,
    GREP,
    LS,
    MOVE_FILE,
    READ_FILE,
    REMOVE_FILE,
    WRITE_FILE,
)
from archmax_temporal.workflows.workspace_tools import (
    DEFAULT_GREP_MAX_COUNT,
    DEFAULT_READ_LIMIT,
    TOOL_ARGUMENTS,
    EditFileArgs,
    GlobArgs,
    GrepArgs,
    LsArgs,
    ReadFileArgs,
    RemoveFileArgs,
    TransferArgs,
    WriteFileArgs,
)
from archmax_temporal.workflows.zones import (
    AGENTS_MD,
    ATTACHMENTS,
    MOUNTS,
    RUNTIME_AREAS,
    RUNTIME_INTERNAL,
    SCRATCHPAD,
    SKILLS,
)

_BINARY_MIME: Final = frozenset(
    {
        "application/pdf",
        "application/vnd.ms-powerpoint",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    }
)


def truncate(content: str, max_chars: int) -> tuple[str, bool]:
    """``content`` cut to ``max_chars`` with a visible ``…[truncated: N more chars]`` marker."""
    if len(content) <= max_chars:
        return content, False
    return f"{content[:max_chars]}…[truncated: {len(content) - max_chars} more chars]", True


def human_size(size: int) -> str:
    """``512 bytes``, ``1.5 KB``, ``3.2 MB``."""
    if size < 1024:
        return f"{size} bytes"
    value = float(size)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def binary_mime(path: str, data: bytes) -> str | None:
    """The file's MIME type when ``read_file`` must refuse it (media, PDF, PPT, non-text
    content), else ``None``."""
    mime, _ = mimetypes.guess_type(path, strict=False)
    media = mime is not None and mime.split("/")[0] in ("image", "audio", "video")
    if mime is not None and mime != "image/svg+xml" and (media or mime in _BINARY_MIME):
        return mime
    if not is_text(data):
        return mime or "application/octet-stream"
    return None


GREP_MAX_BYTES: Final = 8 * 1024 * 1024
"""The most text one ``grep`` call searches (8 MiB): past it the call stops and says so, and
the model narrows ``path`` or ``glob``. With RE2's linear time this bounds the call."""

GREP_MAX_SECONDS: Final = 20.0
"""The longest one ``grep`` call searches (checked between lines) before it stops and says so:
well inside the tool's start-to-close budget."""


def glob_regex(pattern: str) -> Matcher:
    """A glob as a regex over POSIX paths: ``*``/``?`` within a segment, ``**`` across
    segments, ``[...]`` (``[!...]`` negated) and ``{a,b}``. Leading dots match like any other
    character, so ``*`` matches ``.env``. Compiled for RE2: a model's glob (``a*a*a*…b``)
    never backtracks."""
    out: list[str] = []
    i, n, braces = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern.startswith("[!", i) else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                body = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
                out.append(f"[^/{body}]" if negate else f"[{body}]")
                i = end + 1
                continue
        elif c == "{":
            braces += 1
            out.append("(?:")
        elif c == "}" and braces:
            braces -= 1
            out.append(")")
        elif c == "," and braces:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    out.extend(")" * braces)
    return compile_re2(r"\A" + "".join(out) + r"\z", source=pattern, dot_all=True)


def split_agent_path(raw: str | None) -> list[str]:
    """The segments of an agent-visible path (``""`` or ``None`` is the workspace root).

    Refuses absolute paths and any ``..`` segment with :class:`PathEscapeError`.
    """
    path = (raw or "").strip()
    if "\x00" in path:
        raise WorkspaceError(f"path {path!r} contains a NUL character", path)
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", path):
        raise PathEscapeError(
            f"'{path}' is an absolute path; workspace paths have no leading slash "
            f"(e.g. '{path.lstrip('/').lstrip(chr(92)) or 'scratchpad'}')",
            path,
        )
    segments = [s for s in path.split("/") if s not in ("", ".")]
    if ".." in segments:
        raise PathEscapeError(f"'{path}' uses '..'; workspace paths cannot climb out", path)
    return segments


def _inside(path: Path, base: Path) -> bool:
    """Whether ``path`` resolves inside ``base`` (a symlink loop or a dangling link: no)."""
    try:
        return path.resolve().is_relative_to(base)
    except (OSError, RuntimeError):
        return False


@dataclass(frozen=True)
class _Loc:
    """Where an agent path lives."""

    kind: Literal["root", "store", "skills", "mount"]
    agent: str
    """The canonical agent-visible path (``""`` for the root)."""
    disk: Path | None = None
    """For a mount: the file or folder on disk (unresolved)."""
    base: Path | None = None
    """For a mount: the resolved folder it must stay inside."""

    @property
    def writable(self) -> bool:
        return self.kind == "store" and self.agent.split("/")[0] == SCRATCHPAD


class _Workspace:
    """One call's view of the workspace: a session, its store and its visible skills."""

    def __init__(
        self, store: SessionStore, authoring: Path, session_id: str, visible: Sequence[str]
    ) -> None:
        self.store = store
        self.sid = session_id
        self.authoring = authoring.resolve()
        skills = self.authoring / SKILLS
        self.visible = sorted(
            {
                slug
                for slug in visible
                if slug
                and "/" not in slug
                and "\\" not in slug
                and slug not in (".", "..")
                and (skills / slug).is_dir()
            }
        )

    # -- resolution --------------------------------------------------------------------------

    def locate(self, raw: str | None) -> _Loc:
        segments = split_agent_path(raw)
        agent = "/".join(segments)
        if not segments:
            return _Loc("root", "")
        head = segments[0]
        if head in RUNTIME_INTERNAL:
            raise FileNotFoundInWorkspaceError(
                f"'{agent}' is not in the workspace ('{head}/' is runtime-internal)", agent
            )
        if head == SKILLS:
            if len(segments) == 1:
                return _Loc("skills", SKILLS)
            slug = segments[1]
            if slug not in self.visible:
                raise FileNotFoundInWorkspaceError(
                    f"'{agent}' is not available: skill '{slug}' is not enabled in this state",
                    agent,
                )
            base = self.authoring / SKILLS / slug
            return _Loc("mount", agent, base.joinpath(*segments[2:]), base)
        if head == AGENTS_MD:
            if len(segments) > 1:
                raise FileNotFoundInWorkspaceError(f"'{agent}' does not exist", agent)
            return _Loc("mount", agent, self.authoring / AGENTS_MD, self.authoring)
        return _Loc("store", agent)

    def _mount_path(self, loc: _Loc) -> Path:
        assert loc.disk is not None and loc.base is not None
        try:
            with os_errors(loc.agent):
                real = loc.disk.resolve()
        except RuntimeError:  # a symlink loop (Python < 3.13)
            raise PathEscapeError(f"'{loc.agent}' is a symlink loop", loc.agent) from None
        if not real.is_relative_to(loc.base):
            raise PathEscapeError(f"'{loc.agent}' resolves outside its mount", loc.agent)
        return real

    def _visible_top(self, name: str) -> bool:
        return name not in RUNTIME_INTERNAL and name not in MOUNTS

    # -- reading -----------------------------------------------------------------------------

    def read_bytes(self, loc: _Loc) -> bytes:
        if loc.kind == "store":
            return self.store.read_bytes(self.sid, loc.agent)
        if loc.kind == "mount":
            real = self._mount_path(loc)
            with os_errors(loc.agent):
                if real.is_dir():
                    raise WorkspaceError(f"'{loc.agent}' is a folder, not a file", loc.agent)
                if not real.is_file():
                    raise FileNotFoundInWorkspaceError(f"'{loc.agent}' does not exist", loc.agent)
                return real.read_bytes()
        raise WorkspaceError(f"'{loc.agent or '.'}' is a folder, not a file", loc.agent)

    def is_file(self, loc: _Loc) -> bool:
        if loc.kind == "store":
            return self.store.exists(self.sid, loc.agent) and not self._store_is_dir(loc.agent)
        if loc.kind == "mount":
            try:
                real = self._mount_path(loc)
            except PathEscapeError:
                return False
            with os_errors(loc.agent):
                return real.is_file()
        return False

    def is_dir(self, loc: _Loc) -> bool:
        if loc.kind in ("root", "skills"):
            return True
        if loc.kind == "store":
            return loc.agent == SCRATCHPAD or self._store_is_dir(loc.agent)
        try:
            real = self._mount_path(loc)
        except PathEscapeError:
            return False
        with os_errors(loc.agent):
            return real.is_dir()

    def _store_is_dir(self, path: str) -> bool:
        try:
            self.store.list_dir(self.sid, path)
        except WorkspaceError:
            return False
        return True

    def entries(self, loc: _Loc) -> list[tuple[str, Entry]]:
        """``(agent path, entry)`` for each entry of the folder ``loc``."""
        if loc.kind == "root":
            entries = [e for e in self.store.list_dir(self.sid, "") if self._visible_top(e.name)]
            if not any(e.name == SCRATCHPAD for e in entries):
                entries.append(Entry(SCRATCHPAD, True, 0))
            if self.visible:
                entries.append(Entry(SKILLS, True, 0))
            agents_md = self.authoring / AGENTS_MD
            with os_errors(AGENTS_MD):
                if agents_md.is_file() and _inside(agents_md, self.authoring):
                    entries.append(Entry(AGENTS_MD, False, agents_md.stat().st_size))
            return [(e.name, e) for e in sorted(entries, key=lambda e: e.name)]
        if loc.kind == "skills":
            return [(f"{SKILLS}/{slug}", Entry(slug, True, 0)) for slug in self.visible]
        if loc.kind == "store":
            if loc.agent == SCRATCHPAD and not self.store.exists(self.sid, SCRATCHPAD):
                return []
            return [(f"{loc.agent}/{e.name}", e) for e in self.store.list_dir(self.sid, loc.agent)]
        real = self._mount_path(loc)
        with os_errors(loc.agent):
            if not real.exists():
                raise FileNotFoundInWorkspaceError(f"'{loc.agent}' does not exist", loc.agent)
            if not real.is_dir():
                raise WorkspaceError(f"'{loc.agent}' is a file, not a folder", loc.agent)
            assert loc.base is not None
            out: list[tuple[str, Entry]] = []
            for child in sorted(real.iterdir(), key=lambda p: p.name):
                if not _inside(child, loc.base):
                    continue
                is_dir = child.is_dir()
                entry = Entry(child.name, is_dir, 0 if is_dir else child.stat().st_size)
                out.append((f"{loc.agent}/{child.name}", entry))
            return out

    def files(self, loc: _Loc) -> list[str]:
        """Every visible file at or below ``loc``, as sorted agent paths."""
        if loc.kind == "root":
            found = [p for p in self.store.walk(self.sid, "") if self._visible_top(p.split("/")[0])]
            found += self.files(_Loc("skills", SKILLS))
            if self.is_file(self.locate(AGENTS_MD)):
                found.append(AGENTS_MD)
            return sorted(found)
        if loc.kind == "skills":
            out: list[str] = []
            for slug in self.visible:
                out += self.files(self.locate(f"{SKILLS}/{slug}"))
            return out
        if loc.kind == "store":
            if self.is_file(loc):
                return [loc.agent]
            return [f"{loc.agent}/{p}" for p in self.store.walk(self.sid, loc.agent)]
        try:
            real = self._mount_path(loc)
        except PathEscapeError:
            return []
        with os_errors(loc.agent):
            if real.is_file():
                return [loc.agent]
            assert loc.base is not None
            found = []
            for folder, _dirs, names in os.walk(real, followlinks=False):
                for name in names:
                    full = Path(folder) / name
                    if _inside(full, loc.base) and full.is_file():
                        rel = full.relative_to(real).as_posix()
                        found.append(f"{loc.agent}/{rel}")
            return sorted(found)

    def writable(self, raw: str) -> _Loc:
        loc = self.locate(raw)
        if not loc.writable:
            raise ReadOnlyPathError(
                f"'{loc.agent or '.'}' is read-only; only scratchpad/ is writable", loc.agent
            )
        if loc.agent == SCRATCHPAD:
            raise WorkspaceError("'scratchpad' is a folder, not a file", loc.agent)
        return loc

    def check_write(self, loc: _Loc, data: bytes) -> None:
        """Refuse, before anything is recorded or written, a write the store would refuse:
        bytes a text-only store does not take, a folder in the way, a parent that is a file."""
        check_storable(self.store, loc.agent, data)
        if self.is_dir(loc):
            raise WorkspaceError(f"'{loc.agent}' is a folder, not a file", loc.agent)
        parts = loc.agent.split("/")
        for end in range(2, len(parts)):
            parent = "/".join(parts[:end])
            if self.store.exists(self.sid, parent) and not self._store_is_dir(parent):
                raise WorkspaceError(
                    f"cannot write '{loc.agent}': '{parent}' is a file, not a folder", loc.agent
                )

    def read_text(self, loc: _Loc) -> str:
        data = self.read_bytes(loc)
        mime = binary_mime(loc.agent, data)
        if mime is not None:
            raise BinaryFileError(
                f"'{loc.agent}' is a binary file ({mime}, {human_size(len(data))}) and was not "
                "read; read_file returns text files only.",
                loc.agent,
            )
        return data.decode("utf-8")


# --- tools --------------------------------------------------------------------------------


def _ls(ws: _Workspace, args: LsArgs) -> str:
    loc = ws.locate(args.path)
    if loc.kind in ("store", "mount") and ws.is_file(loc):
        raise WorkspaceError(f"'{loc.agent}' is a file, not a folder", loc.agent)
    entries = ws.entries(loc)
    if not entries:
        return f"'{loc.agent or '.'}' is empty."
    return "\n".join(path + ("/" if e.is_dir else "") for path, e in entries)


def _read_file(ws: _Workspace, args: ReadFileArgs) -> str:
    loc = ws.locate(args.file_path)
    text = ws.read_text(loc)
    lines = text.splitlines()
    if not lines:
        return f"'{loc.agent}' exists but is empty."
    offset = args.offset or 0
    limit = args.limit or DEFAULT_READ_LIMIT
    if offset >= len(lines):
        raise WorkspaceError(
            f"offset {offset} is past the end of '{loc.agent}' ({len(lines)} lines)", loc.agent
        )
    shown = lines[offset : offset + limit]
    body = "\n".join(f"{offset + i + 1:6d}\t{line}" for i, line in enumerate(shown))
    rest = len(lines) - offset - len(shown)
    if rest > 0:
        body += f"\n… {rest} more lines; read on with offset={offset + len(shown)}."
    return body


def _encoded(text: str, path: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkspaceError(f"content for '{path}' is not valid Unicode", path) from exc


def _write_file(ws: _Workspace, args: WriteFileArgs) -> Effect:
    loc = ws.writable(args.file_path)
    data = _encoded(args.content, loc.agent)
    ws.check_write(loc, data)
    verb = "Updated" if ws.is_file(loc) else "Wrote"
    return Effect(
        f"{verb} '{loc.agent}' ({len(args.content)} chars).", Change(writes=((loc.agent, data),))
    )


def _edit_file(ws: _Workspace, args: EditFileArgs) -> Effect:
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
    data = _encoded(replaced, loc.agent)
    done = count if args.replace_all else 1
    return Effect(
        f"Replaced {done} occurrence{'s' if done != 1 else ''} in '{loc.agent}'.",
        Change(writes=((loc.agent, data),)),
    )


def _relative(path: str, base: str) -> str:
    return path[len(base) + 1 :] if base else path


def _glob(ws: _Workspace, args: GlobArgs) -> str:
    split_agent_path(args.pattern)  # refuses an absolute pattern or one with '..'
    regex = glob_regex(args.pattern.strip().removeprefix("./"))
    loc = ws.locate(args.path)
    matches = [p for p in ws.files(loc) if regex.match(_relative(p, loc.agent))]
    if not matches:
        return f"No files match '{args.pattern}' under '{loc.agent or '.'}'."
    return "\n".join(matches)


def _grep(ws: _Workspace, args: GrepArgs) -> str:
    regex = compile_pattern(args.pattern)
    file_filter = glob_regex(args.glob) if args.glob else None
    max_count = args.max_count or DEFAULT_GREP_MAX_COUNT
    loc = ws.locate(args.path)
    if not ws.is_file(loc) and not ws.is_dir(loc):
        raise FileNotFoundInWorkspaceError(f"'{loc.agent}' does not exist", loc.agent)
    out: list[str] = []
    budget = GREP_MAX_BYTES
    deadline = time.monotonic() + GREP_MAX_SECONDS
    stopped = ""
    for path in ws.files(loc):
        if file_filter is not None and args.glob is not None:
            rel = path.rsplit("/", 1)[-1] if path == loc.agent else _relative(path, loc.agent)
            subject = rel if "/" in args.glob else rel.rsplit("/", 1)[-1]
            if not file_filter.match(subject):
                continue
        try:
            data = ws.read_bytes(ws.locate(path))
        except WorkspaceError:
            continue
        if not is_text(data):
            continue
        if len(data) > budget:
            data = data[:budget]
            cut = data.rfind(b"\n")
            data = data[: cut + 1] if cut >= 0 else b""
            stopped = (
                f"(stopped after searching {human_size(GREP_MAX_BYTES)}, the most one grep "
                f"searches, in '{path}'; narrow path or glob to search the rest)"
            )
        budget -= len(data)
        for number, line in enumerate(data.decode("utf-8", "ignore").splitlines(), start=1):
            if regex.search(line) is not None:
                if len(out) == max_count:
                    out.append(f"(stopped at max_count={max_count} matches)")
                    return "\n".join(out)
                out.append(f"{path}:{number}:{line}")
            if number % 256 == 0 and time.monotonic() > deadline:
                stopped = (
                    f"(stopped after {GREP_MAX_SECONDS:.0f} s, in '{path}' at line {number}; "
                    "narrow path or glob, or simplify the pattern)"
                )
                break
        if stopped:
            break
    if not out:
        found = f"No matches for '{args.pattern}' under '{loc.agent or '.'}'."
        return f"{found}\n{stopped}" if stopped else found
    return "\n".join([*out, stopped] if stopped else out)


def _transfer_target(ws: _Workspace, source: _Loc, args: TransferArgs) -> _Loc:
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


def _copy_file(ws: _Workspace, args: TransferArgs) -> Effect:
    source = ws.locate(args.source)
    data = ws.read_bytes(source)
    dest = _transfer_target(ws, source, args)
    ws.check_write(dest, data)
    return Effect(
        f"Copied '{source.agent}' to '{dest.agent}' ({human_size(len(data))}).",
        Change(writes=((dest.agent, data),)),
    )


def _move_file(ws: _Workspace, args: TransferArgs) -> Effect:
    source = ws.writable(args.source)  # a move removes its source: only scratchpad/ allows it
    check_deletable(ws.store, source.agent)
    data = ws.read_bytes(source)
    dest = _transfer_target(ws, source, args)
    ws.check_write(dest, data)
    return Effect(
        f"Moved '{source.agent}' to '{dest.agent}' ({human_size(len(data))}).",
        Change(writes=((dest.agent, data),), removes=(source.agent,)),  # written, then removed
    )


def _remove_file(ws: _Workspace, args: RemoveFileArgs) -> Effect:
    loc = ws.writable(args.file_path)
    if ws.is_dir(loc):
        raise WorkspaceError(f"'{loc.agent}' is a folder; remove_file deletes files", loc.agent)
    check_deletable(ws.store, loc.agent)
    if not ws.is_file(loc):
        ws.read_bytes(loc)  # says why: missing, or reached through a symlink
        raise FileNotFoundInWorkspaceError(f"'{loc.agent}' does not exist", loc.agent)
    return Effect(f"Removed '{loc.agent}'.", Change(removes=(loc.agent,)))


_READERS: Final[dict[str, Callable[[_Workspace, Any], str]]] = {
    LS: _ls,
    READ_FILE: _read_file,
    GLOB: _glob,
    GREP: _grep,
}
"""The tools that only read."""

_WRITERS: Final[dict[str, Callable[[_Workspace, Any], Effect]]] = {
    WRITE_FILE: _write_file,
    EDIT_FILE: _edit_file,
    COPY_FILE: _copy_file,
    MOVE_FILE: _move_file,
    REMOVE_FILE: _remove_file,
}
"""The tools that change files: each plans an :class:`Effect`, applied through the journal."""

_TOOLS: Final = frozenset(_READERS) | frozenset(_WRITERS)


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


def _primary_path(arguments: dict[str, Any]) -> str:
    """The path a call is about, for an error raised outside any one path's handling."""
    for name in ("file_path", "path", "source"):
        value = arguments.get(name)
        if isinstance(value, str):
            return value
    return ""


# --- activities ---------------------------------------------------------------------------


class WorkspaceActivities:
    """The workspace tools and file placement over one session store and authoring root.

    Placements into one session run one at a time (a per-session lock held by this instance),
    so concurrent placements of the same name each take their own name.
    """

    def __init__(
        self, store: SessionStore, authoring_root: Path, logs: TranscriptLogs | None = None
    ) -> None:
        self._store = store
        self._authoring = Path(authoring_root)
        self._journal = EffectJournal(store)
        self._logs = logs
        """Where a tool activity keeps a long result by digest (the next model call names it
        instead of carrying it); None: results are never kept."""
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @property
    def store(self) -> SessionStore:
        """The session store, for the runtime's own files (the sandbox's journals)."""
        return self._store

    @property
    def journal(self) -> EffectJournal:
        """The effect journal over this store (the sandbox's ``tools.*`` calls use it too)."""
        return self._journal

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity of this instance, for ``Worker(activities=...)``."""
        return [
            self.ls,
            self.read_file,
            self.write_file,
            self.edit_file,
            self.glob,
            self.grep,
            self.copy_file,
            self.move_file,
            self.remove_file,
            self.place_files,
            self.seed_files,
        ]

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[session_id] = lock
        return lock

    @staticmethod
    def _session(session_id: str) -> str:
        try:
            return check_session_id(session_id)
        except InvalidSessionIdError as exc:
            raise exc.to_application_error() from exc

    async def _run(self, tool: str, call: WorkspaceToolInput) -> WorkspaceToolResult:
        self._session(call.session_id)
        if call.tool != tool:
            return WorkspaceToolResult(
                content=f"Error: call for '{call.tool}' was sent to the '{tool}' activity",
                status="error",
            )
        key = idempotency_key()
        try:
            if tool in _WRITERS:
                await asyncio.to_thread(self.sweep_after_crash, call.session_id)
            return await heartbeating(asyncio.to_thread(self._run_kept, tool, call, key))
        except WorkspaceError as exc:  # only StoreIOError gets here: retried
            raise exc.to_application_error() from None
        except Exception as exc:
            raise unexpected(exc, self._hidden) from None

    @property
    def _hidden(self) -> list[Path]:
        """The host folders an unexpected error's message must not name."""
        root = getattr(self._store, "root", None)
        return [self._authoring, *([Path(root)] if root is not None else [])]

    def sweep_after_crash(self, session_id: str) -> None:
        """Remove the session's stale temporary files before a call writes: on a retry, every
        one older than this attempt (the crashed attempt's); otherwise those past
        ``TEMPORARY_MAX_AGE``."""
        before: float | None = None
        if activity.in_activity() and activity.info().attempt > 1:
            before = activity.info().current_attempt_scheduled_time.timestamp()
        with contextlib.suppress(WorkspaceError):  # a sweep never fails a call
            sweep_temporaries(self._store, session_id, before=before)

    def run_tool(self, call: WorkspaceToolInput, *, key: str | None = None) -> WorkspaceToolResult:
        """Run one workspace tool call synchronously (the sandbox's ``tools.*`` bridge calls
        it from its own thread): the very code path of the tool activities. ``key`` is the
        call's idempotency key (the sandbox run's, with the call's position). A
        :class:`StoreIOError` raises; every other refusal is an error result."""
        if call.tool not in _TOOLS:
            return WorkspaceToolResult(content=f"Error: unknown tool '{call.tool}'", status="error")
        return self._run_sync(call.tool, call, key)

    def read_text(self, session_id: str, path: str, visible_skills: Sequence[str]) -> str:
        """A text file's content at an agent-visible path, or a :class:`WorkspaceError`."""
        ws = _Workspace(self._store, self._authoring, session_id, visible_skills)
        with os_errors(path):
            return ws.read_text(ws.locate(path))

    def _run_kept(
        self, tool: str, call: WorkspaceToolInput, key: str | None
    ) -> WorkspaceToolResult:
        """The tool activity's work: the call, then its result kept in the store by digest
        when it is long (``kept``: the next model call names it, so the history holds the
        result once). The sandbox's ``tools.*`` bridge keeps nothing (no model reads it)."""
        result = self._run_sync(tool, call, key)
        if self._logs is not None and self._logs.keep_result(call.session_id, result.content):
            return result.model_copy(update={"kept": True})
        return result

    def _run_sync(
        self, tool: str, call: WorkspaceToolInput, key: str | None
    ) -> WorkspaceToolResult:
        status: Literal["ok", "error"] = "ok"
        try:
            with os_errors(_primary_path(call.arguments)):
                args = TOOL_ARGUMENTS[tool].model_validate(call.arguments)
                ws = _Workspace(self._store, self._authoring, call.session_id, call.visible_skills)
                if tool in _WRITERS:
                    plan = _WRITERS[tool]
                    content = self._journal.once(
                        call.session_id,
                        key,
                        tool,
                        digest(call.model_dump(mode="json")),
                        lambda: plan(ws, args),
                    )
                else:
                    content = _READERS[tool](ws, args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            content, status = f"Error: invalid arguments for {tool}: {problems}", "error"
        except StoreIOError:
            raise
        except WorkspaceError as exc:
            message = str(exc)
            content = message if message.startswith("Error:") else f"Error: {message}"
            status = "error"
        content, cut = truncate(content, call.max_result_chars)
        return WorkspaceToolResult(content=content, status=status, truncated=cut)

    @activity.defn(name=LS_ACTIVITY)
    async def ls(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``ls {path?}``: a folder's entries, folders ending in ``/``."""
        return await self._run(LS, call)

    @activity.defn(name=READ_FILE_ACTIVITY)
    async def read_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``read_file {file_path, offset?, limit?}``: text with ``cat -n`` line numbers."""
        return await self._run(READ_FILE, call)

    @activity.defn(name=WRITE_FILE_ACTIVITY)
    async def write_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``write_file {file_path, content}``: create or replace a file under scratchpad/."""
        return await self._run(WRITE_FILE, call)

    @activity.defn(name=EDIT_FILE_ACTIVITY)
    async def edit_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``edit_file {file_path, old_string, new_string, replace_all?}``."""
        return await self._run(EDIT_FILE, call)

    @activity.defn(name=GLOB_ACTIVITY)
    async def glob(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``glob {pattern, path?}``: matching files, dot files included."""
        return await self._run(GLOB, call)

    @activity.defn(name=GREP_ACTIVITY)
    async def grep(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``grep {pattern, path?, glob?, max_count?}``: ``path:line:text`` per match."""
        return await self._run(GREP, call)

    @activity.defn(name=COPY_FILE_ACTIVITY)
    async def copy_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``copy_file {source, destination, overwrite?}``: a byte-exact copy."""
        return await self._run(COPY_FILE, call)

    @activity.defn(name=MOVE_FILE_ACTIVITY)
    async def move_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``move_file {source, destination, overwrite?}``: written there, removed here."""
        return await self._run(MOVE_FILE, call)

    @activity.defn(name=REMOVE_FILE_ACTIVITY)
    async def remove_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``remove_file {file_path}``: delete one file under scratchpad/."""
        return await self._run(REMOVE_FILE, call)

    @activity.defn(name=PLACE_FILES_ACTIVITY)
    async def place_files(self, placement: FilePlacementInput) -> FilePlacementResult:
        """Place each file into ``scratchpad/attachments/`` under :func:`placed_name`.

        One placement per session at a time; never overwrites. Through a store without
        bytes, a non-text file is refused (a typed, non-retryable error naming it) and
        nothing at all is written. The names chosen are journaled before anything is
        written, so a retry places the same files under the same names.
        """
        session_id = self._session(placement.session_id)
        key = idempotency_key()
        async with self._lock(session_id):
            try:
                await asyncio.to_thread(self.sweep_after_crash, session_id)
                return await heartbeating(
                    asyncio.to_thread(self._place_sync, session_id, placement, key)
                )
            except WorkspaceError as exc:
                raise exc.to_application_error() from None
            except Exception as exc:
                raise unexpected(exc, self._hidden) from None

    def _place_sync(
        self, session_id: str, placement: FilePlacementInput, key: str | None
    ) -> FilePlacementResult:
        answer = self._journal.once(
            session_id,
            key,
            "place_files",
            digest(placement.model_dump(mode="json")),
            lambda: self._plan_placement(session_id, placement),
        )
        return FilePlacementResult.model_validate_json(answer)

    def _plan_placement(self, session_id: str, placement: FilePlacementInput) -> Effect:
        decoded: list[tuple[str, str, bytes]] = []
        for var, file in placement.files.items():
            name = sanitize_name(file.name)
            data = (
                read_upload(self._store, file.ref)
                if file.ref is not None
                else _decode_content(file, f"file '{var}' ({file.name})")
            )
            if not self._store.supports_bytes and not is_text(data):
                raise StoreCapabilityError(
                    f"cannot place file '{var}' at '{ATTACHMENTS}/{name}': it is not text and "
                    "this session store takes no raw bytes; nothing was written",
                    f"{ATTACHMENTS}/{name}",
                )
            decoded.append((var, name, data))
        for var, ref in placement.copies.items():
            data = self._read_session_file(ref.session_id, ref.path, var)
            name = sanitize_name(ref.path)
            if not self._store.supports_bytes and not is_text(data):
                raise StoreCapabilityError(
                    f"cannot place file '{var}' at '{ATTACHMENTS}/{name}': it is not text and "
                    "this session store takes no raw bytes; nothing was written",
                    f"{ATTACHMENTS}/{name}",
                )
            decoded.append((var, name, data))
        try:
            existing = {e.name for e in self._store.list_dir(session_id, ATTACHMENTS)}
        except FileNotFoundInWorkspaceError:
            existing = set()
        paths: dict[str, str] = {}
        writes: list[tuple[str, bytes]] = []
        for var, name, data in decoded:
            placed = placed_name(existing, name)
            while self._store.exists(session_id, f"{ATTACHMENTS}/{placed}"):
                existing.add(placed)  # written behind our back: still never overwrite
                placed = placed_name(existing, name)
            path = f"{ATTACHMENTS}/{placed}"
            writes.append((path, data))
            existing.add(placed)
            paths[var] = path
        return Effect(FilePlacementResult(paths=paths).model_dump_json(), Change(tuple(writes)))

    def _read_session_file(self, session_id: str, raw: str, var: str) -> bytes:
        """A file of a session's own workspace (never a mount or a runtime area)."""
        source = self._session(session_id)
        segments = split_agent_path(raw)
        path = "/".join(segments)
        if not segments or segments[0] in MOUNTS or segments[0] in RUNTIME_INTERNAL:
            raise WorkspaceError(
                f"file '{var}': '{raw}' is not a file of the session's own workspace", raw
            )
        try:
            return self._store.read_bytes(source, path)
        except FileNotFoundInWorkspaceError as exc:
            raise FileNotFoundInWorkspaceError(f"file '{var}': {exc}", path) from exc

    def _write(self, session_id: str, path: str, data: bytes) -> None:
        write_file(self._store, session_id, path, data)

    @activity.defn(name=SEED_FILES_ACTIVITY)
    async def seed_files(self, seed: SeedFilesInput) -> SeedFilesResult:
        """Write fixture files at the workspace paths given (``scratchpad/…`` or session
        files such as ``trigger.json``), replacing what is there.

        Mounts (``skills/…``, ``AGENTS.md``) and runtime areas (``artifacts/``,
        ``checkpoints/``, archmax's offload areas ...) are refused; every file is checked
        before anything is written.
        """
        session_id = self._session(seed.session_id)
        async with self._lock(session_id):
            try:
                return await heartbeating(asyncio.to_thread(self._seed_sync, session_id, seed))
            except WorkspaceError as exc:
                raise exc.to_application_error() from None
            except Exception as exc:
                raise unexpected(exc, self._hidden) from None

    def _seed_sync(self, session_id: str, seed: SeedFilesInput) -> SeedFilesResult:
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
            if not self._store.supports_bytes and not is_text(data):
                raise StoreCapabilityError(
                    f"cannot seed '{path}': it is not text and this session store takes no raw "
                    "bytes; nothing was written",
                    path,
                )
            planned.append((path, data))
        for path, data in planned:
            self._write(session_id, path, data)
        return SeedFilesResult(paths=[path for path, _ in planned])
