"""One call's view of a session's workspace: where an agent path lives (the store, a skill,
``AGENTS.md``) and what the call may list, read and write.

What the agent sees (harness §4.3, seed "Files handed to a session")::

    scratchpad/**          the session's folder in the store: read and write
    skills/<slug>/**       <authoring root>/skills/<slug>, for slugs in visible_skills: read only
    AGENTS.md              <authoring root>/AGENTS.md: read only
    <other session files>  e.g. trigger.json, offload areas: read only

``artifacts/``, ``checkpoints/`` and ``_specs/`` are runtime-internal: hidden from listings,
searches and reads. A skill not in ``visible_skills`` is hidden the same way. The zones are
defined in :mod:`archmax_temporal.workflows.zones`.

Symlinks inside the session are never followed (the store refuses any path through one;
listings, globs and greps skip them). The mounts (``skills/``, ``AGENTS.md``) are the author's
own tree: a symlink there is followed while it stays inside its mount.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from archmax_temporal.activities.session_paths import os_errors
from archmax_temporal.activities.session_store import Entry, SessionStore, check_storable
from archmax_temporal.activities.store_errors import (
    BinaryFileError,
    FileNotFoundInWorkspaceError,
    PathEscapeError,
    ReadOnlyPathError,
    WorkspaceError,
)
from archmax_temporal.activities.tool_text import binary_mime, human_size
from archmax_temporal.workflows.zones import AGENTS_MD, MOUNTS, RUNTIME_INTERNAL, SCRATCHPAD, SKILLS


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
class Location:
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


class WorkspaceView:
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

    def locate(self, raw: str | None) -> Location:
        segments = split_agent_path(raw)
        agent = "/".join(segments)
        if not segments:
            return Location("root", "")
        head = segments[0]
        if head in RUNTIME_INTERNAL:
            raise FileNotFoundInWorkspaceError(
                f"'{agent}' is not in the workspace ('{head}/' is runtime-internal)", agent
            )
        if head == SKILLS:
            if len(segments) == 1:
                return Location("skills", SKILLS)
            slug = segments[1]
            if slug not in self.visible:
                raise FileNotFoundInWorkspaceError(
                    f"'{agent}' is not available: skill '{slug}' is not enabled in this state",
                    agent,
                )
            base = self.authoring / SKILLS / slug
            return Location("mount", agent, base.joinpath(*segments[2:]), base)
        if head == AGENTS_MD:
            if len(segments) > 1:
                raise FileNotFoundInWorkspaceError(f"'{agent}' does not exist", agent)
            return Location("mount", agent, self.authoring / AGENTS_MD, self.authoring)
        return Location("store", agent)

    def _mount_path(self, loc: Location) -> Path:
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

    def read_bytes(self, loc: Location) -> bytes:
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

    def is_file(self, loc: Location) -> bool:
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

    def is_dir(self, loc: Location) -> bool:
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

    def entries(self, loc: Location) -> list[tuple[str, Entry]]:
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

    def files(self, loc: Location) -> list[str]:
        """Every visible file at or below ``loc``, as sorted agent paths."""
        if loc.kind == "root":
            found = [p for p in self.store.walk(self.sid, "") if self._visible_top(p.split("/")[0])]
            found += self.files(Location("skills", SKILLS))
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

    def writable(self, raw: str) -> Location:
        loc = self.locate(raw)
        if not loc.writable:
            raise ReadOnlyPathError(
                f"'{loc.agent or '.'}' is read-only; only scratchpad/ is writable", loc.agent
            )
        if loc.agent == SCRATCHPAD:
            raise WorkspaceError("'scratchpad' is a folder, not a file", loc.agent)
        return loc

    def check_write(self, loc: Location, data: bytes) -> None:
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

    def read_text(self, loc: Location) -> str:
        data = self.read_bytes(loc)
        mime = binary_mime(loc.agent, data)
        if mime is not None:
            raise BinaryFileError(
                f"'{loc.agent}' is a binary file ({mime}, {human_size(len(data))}) and was not "
                "read; read_file returns text files only.",
                loc.agent,
            )
        return data.decode("utf-8")
