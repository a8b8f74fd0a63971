"""The workspace tools that read: ``ls``, ``read_file``, ``glob`` and ``grep``, each
answering one call with the text the model reads.

``grep`` and ``glob`` run the model's patterns on RE2 (:mod:`archmax_temporal.activities.regex`), in
linear time, and ``grep`` reads at most :data:`GREP_MAX_BYTES` per call."""

from __future__ import annotations

import re
import time
from typing import Final

from archmax_temporal.activities.regex import Matcher, compile_pattern, compile_re2
from archmax_temporal.activities.session_store import is_text
from archmax_temporal.activities.store_errors import FileNotFoundInWorkspaceError, WorkspaceError
from archmax_temporal.activities.tool_text import human_size
from archmax_temporal.activities.workspace_view import WorkspaceView, split_agent_path
from archmax_temporal.workflows.workspace_tools import (
    DEFAULT_GREP_MAX_COUNT,
    DEFAULT_READ_LIMIT,
    GlobArgs,
    GrepArgs,
    LsArgs,
    ReadFileArgs,
)

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


def ls(ws: WorkspaceView, args: LsArgs) -> str:
    """``ls {path?}``: a folder's entries, one a line, folders ending in ``/``."""
    loc = ws.locate(args.path)
    if loc.kind in ("store", "mount") and ws.is_file(loc):
        raise WorkspaceError(f"'{loc.agent}' is a file, not a folder", loc.agent)
    entries = ws.entries(loc)
    if not entries:
        return f"'{loc.agent or '.'}' is empty."
    return "\n".join(path + ("/" if e.is_dir else "") for path, e in entries)


def read_file(ws: WorkspaceView, args: ReadFileArgs) -> str:
    """``read_file {file_path, offset?, limit?}``: text with ``cat -n`` line numbers."""
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


def _relative(path: str, base: str) -> str:
    return path[len(base) + 1 :] if base else path


def glob(ws: WorkspaceView, args: GlobArgs) -> str:
    """``glob {pattern, path?}``: the matching files under ``path``, dot files included."""
    split_agent_path(args.pattern)  # refuses an absolute pattern or one with '..'
    regex = glob_regex(args.pattern.strip().removeprefix("./"))
    loc = ws.locate(args.path)
    matches = [p for p in ws.files(loc) if regex.match(_relative(p, loc.agent))]
    if not matches:
        return f"No files match '{args.pattern}' under '{loc.agent or '.'}'."
    return "\n".join(matches)


def grep(ws: WorkspaceView, args: GrepArgs) -> str:
    """``grep {pattern, path?, glob?, max_count?}``: ``path:line:text`` per match, within
    :data:`GREP_MAX_BYTES` and :data:`GREP_MAX_SECONDS`."""
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
