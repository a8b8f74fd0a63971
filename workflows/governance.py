"""Tool governance: which tools a state discloses, and whether one call may run.

Closed by default, deny beats allow, and nothing narrower widens a denial (§2.4). The always-on
filesystem tools and ``archmax_run`` are on every state's surface; every other tool needs a
grant. A state's entry for a tool *narrows* it: when the state names the tool, only its entries
count. Every call is decided, disclosed or not, in the order of archmax's kernel pipeline
(§7): zones (path arguments), ``script.skill-only``, skills, the workflow-wide denial, the
state denial, the scratchpad, and finally the grants.

Guards are globs written by the workflow's author. They may name session variables
(``${{name.dotted.path}}``); those are resolved at every call and glob-escaped, so a variable's
value only ever matches itself literally and can never widen a guard. An unresolvable guard is
*terminal*: the author's guarantee broke, the session must be rejected or routed, not asked
to try again.

Pure (no I/O, clock or randomness): it runs inside the Temporal workflow, and replays must
decide every call the same way. The real symlink check lives on disk, in the workspace layer;
this module only sees the agent-visible path text.

:func:`govern` is the one decision on a tool call, wherever it comes from (the agent's turn, a
sub-workflow dispatch, a script's or hook's ``tools.*`` call through the sandbox bridge):
substitution, the pipeline of :func:`decide`, then the case's mocks. It answers with one of a
closed set of verdicts (:data:`CallVerdict`), and every path renders that verdict the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from archmax_temporal.workflows.matching import find_mock, mock_result_text
from archmax_temporal.workflows.models import ToolMock, Variable
from archmax_temporal.workflows.paths import MISSING, InvalidPathError, resolve_path
from archmax_temporal.workflows.spec import SLUG, WILDCARD, ToolEntry, ToolGrant, WorkflowSpec
from archmax_temporal.workflows.tools import ALWAYS_ON as ALWAYS_ON
from archmax_temporal.workflows.tools import (
    ARCHMAX_RUN,
    NOTE,
    RUNTIME_TOOLS,
    TASK,
    PathUse,
    workflow_target,
)
from archmax_temporal.workflows.tools import EVAL as EVAL
from archmax_temporal.workflows.tools import OPTIONAL_PATH_ARGS as OPTIONAL_PATH_ARGS
from archmax_temporal.workflows.tools import PATH_ARGS as PATH_ARGS
from archmax_temporal.workflows.zones import (
    AGENTS_MD,
    RUNTIME_INTERNAL,
    SCRATCHPAD,
    SKILL_SCRIPTS,
    SKILLS,
)

# --- tool surfaces ----------------------------------------------------------------------

# ALWAYS_ON, PATH_ARGS and OPTIONAL_PATH_ARGS are the registry's (workflows/tools.py): the
# always-on tools are disclosed and permitted in every state unless forbidden (a state entry
# narrows them); a path argument's use decides what governance refuses (a write or a removal
# in a read-only area whatever the grants say; ``execute`` only inside an enabled skill's
# ``scripts/``).

Authority = Literal["agent", "runtime"]
"""Whose call it is: the agent's, or a hook's (runtime authority: exempt from the state's
allow and forbid lists, still bound by zones, safety rules and workflow-wide denials)."""

WITHHELD: Final[frozenset[str]] = frozenset({TASK, NOTE})
"""Never grantable: ``task`` is the runtime's own dispatcher, ``archmax_note`` carries notes."""

# --- workspace areas (defined in workflows/zones.py) -----------------------------------

Zone = Literal["root", "scratchpad", "skills", "skill", "agents", "internal", "other"]

# --- references -------------------------------------------------------------------------

_REFERENCE = re.compile(r"(\$?)\$\{\{([^{}]*)\}\}")
"""``${{name.path}}``; a leading ``$`` (``$${{…}}``) makes it literal text."""

_GLOB_SPECIAL = frozenset("*?[]\\")


class Verdict(BaseModel):
    """The decision on one call: allowed or not, the rule that decided, and why.

    ``reason`` is a sentence the model reads when it is refused, so it can go on. ``terminal``
    marks a refusal the model cannot correct (an unresolved guard variable): the session must
    be rejected or routed through ``on_error``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed: bool
    rule: str
    reason: str
    terminal: bool = False


def _allow(rule: str, reason: str) -> Verdict:
    return Verdict(allowed=True, rule=rule, reason=reason)


def _refuse(rule: str, reason: str, *, terminal: bool = False) -> Verdict:
    return Verdict(allowed=False, rule=rule, reason=reason, terminal=terminal)


# --- variable references ----------------------------------------------------------------


class _Unresolved(Exception):
    """A reference that names nothing, or a non-scalar where text is needed."""

    def __init__(self, reference: str, why: str) -> None:
        super().__init__(f"${{{{{reference}}}}} {why}")
        self.reference = reference
        self.why = why


def _lookup(reference: str, variables: Mapping[str, Variable]) -> Any:
    """The value ``reference`` names, or raise :class:`_Unresolved`."""
    root = {name: variable.value for name, variable in variables.items()}
    try:
        value = resolve_path(reference, root)
    except InvalidPathError as exc:
        raise _Unresolved(reference, f"is not a valid reference ({exc})") from None
    if value is MISSING:
        known = ", ".join(sorted(variables)) or "none"
        raise _Unresolved(reference, f"does not resolve (set variables: {known})")
    return value


def _scalar_text(reference: str, value: Any) -> str:
    """The text a scalar value contributes to a string; objects, arrays and null have none."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    raise _Unresolved(reference, "is not a scalar (only strings, numbers and booleans embed)")


def _substitute_text(text: str, render: Callable[[str], str]) -> str:
    """One pass over ``text``: references rendered by ``render``, ``$${{`` made literal."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1):
            return "${{" + match.group(2) + "}}"
        return render(match.group(2).strip())

    return _REFERENCE.sub(replace, text)


def _substitute_value(value: Any, variables: Mapping[str, Variable]) -> Any:
    if isinstance(value, str):
        whole = _REFERENCE.fullmatch(value)
        if whole is not None and not whole.group(1):
            # Exactly one reference: the argument keeps the variable's type.
            return _lookup(whole.group(2).strip(), variables)
        return _substitute_text(value, lambda ref: _scalar_text(ref, _lookup(ref, variables)))
    if isinstance(value, list):
        return [_substitute_value(item, variables) for item in value]
    if isinstance(value, dict):
        return {key: _substitute_value(item, variables) for key, item in value.items()}
    return value


def substitute_references(
    args: dict[str, Any], variables: dict[str, Variable]
) -> tuple[dict[str, Any], str | None]:
    """The agent's call arguments with its ``${{…}}`` references substituted.

    This runs before the call is governed, so the guards judge the arguments the tool would
    really receive. An argument that is exactly one reference keeps the value's type; an
    embedded one contributes a scalar's text; ``$${{x}}`` is the literal ``${{x}}``. Single
    pass: substituted text is never re-read. On an unresolved reference the arguments come
    back unchanged with an error sentence: a correctable refusal, the model may retry.
    """
    try:
        return {key: _substitute_value(value, variables) for key, value in args.items()}, None
    except _Unresolved as exc:
        return args, (
            f"Unresolved variable reference: {exc}. Set the variable first, or write "
            "$${{…}} for the literal text."
        )


def glob_escape(text: str) -> str:
    """``text`` as a glob that matches exactly ``text`` (every glob operator escaped)."""
    return "".join("\\" + ch if ch in _GLOB_SPECIAL else ch for ch in text)


def resolve_guard(glob: str, variables: Mapping[str, Variable]) -> str | None:
    """``glob`` with its references replaced by their glob-escaped values; None if one fails.

    Escaping is what keeps a guard closed: a variable holding ``*`` or ``**`` matches only
    those literal characters, so no value the agent or a host writes can widen the guard.
    """
    try:
        return _substitute_text(
            glob, lambda ref: glob_escape(_scalar_text(ref, _lookup(ref, variables)))
        )
    except _Unresolved:
        return None


# --- globs and paths --------------------------------------------------------------------


def _class_regex(pattern: str, start: int) -> tuple[str, int] | None:
    """The regex of the ``[...]`` class opening at ``start`` and the index after it."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    if negate:
        i += 1
    members: list[str] = []
    first = True
    while i < len(pattern):
        ch = pattern[i]
        if ch == "]" and not first:
            body = "".join(members)
            regex = f"[^/{body}]" if negate else f"(?!/)[{body}]"
            return regex, i + 1
        if ch == "\\" and i + 1 < len(pattern):
            i += 1
            ch = pattern[i]
        members.append(ch if ch == "-" and not first else re.escape(ch))
        first = False
        i += 1
    return None


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "\\" and i + 1 < len(segment):
            out.append(re.escape(segment[i + 1]))
            i += 2
            continue
        if ch == "*":
            while i < len(segment) and segment[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if ch == "?":
            out.append("[^/]")
        elif ch == "[":
            parsed = _class_regex(segment, i)
            if parsed is not None:
                out.append(parsed[0])
                i = parsed[1]
                continue
            out.append(re.escape(ch))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _split_glob(pattern: str) -> list[str]:
    """Split on ``/``, but not on an escaped one (``\\/``): segments are matched one by one."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            current.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "/":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The compiled regex of a guard glob (see :func:`glob_match`)."""
    segments = _split_glob(pattern)
    out: list[str] = []
    need_sep = False
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            if last:
                out.append("(?:/.*)?" if need_sep else ".*")
            else:
                out.append("(?:/.*)?/" if need_sep else "(?:.*/)?")
                need_sep = False
            continue
        if need_sep:
            out.append("/")
        out.append(_segment_regex(segment))
        need_sep = True
    return re.compile("".join(out), re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    """Whether ``path`` matches the guard ``pattern``.

    ``**`` as a whole segment matches any depth, zero segments included (``a/**`` covers ``a``
    itself, ``a/**/b`` covers ``a/b``); ``*`` and ``?`` stay within one segment; ``[...]`` is a
    character class; ``\\x`` is a literal ``x``. Dot-prefixed names are ordinary names, so
    ``secrets/**`` covers ``secrets/.env``: a guard must not be evaded by a leading dot.
    """
    return glob_regex(pattern).fullmatch(path) is not None


def normalise_path(path: str) -> str | None:
    """The canonical agent-visible form of ``path``, or None when it is not one.

    Agent-visible paths are relative to the workspace root: ``.`` and empty segments drop,
    ``..`` applies, and the root itself is ``""``. Refused: an absolute path, a backslash, a NUL,
    and any ``..`` that climbs above the root. Guards are matched against this form, so
    ``scratchpad/./x`` cannot slip past a denial of ``scratchpad/x``.
    """
    if not isinstance(path, str) or "\x00" in path or "\\" in path or path.startswith("/"):
        return None
    stack: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not stack:
                return None
            stack.pop()
        else:
            stack.append(segment)
    return "/".join(stack)


@dataclass(frozen=True)
class _Place:
    """A normalised path argument: where it points and what the tool does there."""

    argument: str
    path: str
    use: str
    zone: Zone
    slug: str | None = None


def _zone(path: str) -> tuple[Zone, str | None]:
    head, _, rest = path.partition("/")
    if path == "":
        return "root", None
    if head == SCRATCHPAD:
        return "scratchpad", None
    if head == SKILLS:
        if not rest:
            return "skills", None
        return "skill", rest.partition("/")[0]
    if path == AGENTS_MD:
        return "agents", None
    if head in RUNTIME_INTERNAL:
        return "internal", None
    return "other", None


# --- skills -----------------------------------------------------------------------------


def _skill_slugs(entries: Iterable[str | dict[str, str]]) -> set[str]:
    slugs: set[str] = set()
    for entry in entries:
        if isinstance(entry, str):
            slugs.add(entry)
        else:
            slugs.update(entry)
    return slugs


def _skill_denial(spec: WorkflowSpec, state: str, slug: str) -> str | None:
    """Which list denies ``slug`` in ``state`` (``*`` included), or None."""
    if slug in spec.skills.forbid_always or WILDCARD in spec.skills.forbid_always:
        return "the workflow's skills.forbid_always"
    forbid = spec.state(state).skills.forbid
    if slug in forbid or WILDCARD in forbid:
        return f"state {state!r}'s skills.forbid"
    return None


def enabled_skills(spec: WorkflowSpec, state: str) -> set[str]:
    """The skills ``state`` enables: root allow_always + state allow − state forbid − root
    forbid_always (``*`` forbids every skill). Only these are readable, runnable and listed."""
    granted = _skill_slugs(spec.skills.allow_always) | _skill_slugs(spec.state(state).skills.allow)
    return {slug for slug in granted if _skill_denial(spec, state, slug) is None}


def listed(spec: WorkflowSpec, state: str, path: str) -> bool:
    """Whether ``path`` may appear in a listing, a search or the prompt in ``state``.

    The runtime's own areas and every skill the state does not enable are invisible: a model
    should not be shown what it may not touch.
    """
    normal = normalise_path(path)
    if normal is None:
        return False
    zone, slug = _zone(normal)
    if zone == "internal":
        return False
    return not (zone == "skill" and slug not in enabled_skills(spec, state))


# --- entries and guards -----------------------------------------------------------------


def _entry_tool(entry: ToolEntry) -> str:
    return entry if isinstance(entry, str) else entry.tool


def _is_bare(entry: ToolEntry) -> bool:
    return isinstance(entry, str) or (entry.args is None and entry.paths is None)


def _bare_denial(entries: Sequence[ToolEntry], tool: str) -> bool:
    return any(_is_bare(e) and _entry_tool(e) in (tool, WILDCARD) for e in entries)


def forbidden_outright(spec: WorkflowSpec, state: str, tool: str) -> str | None:
    """The rule that bans ``tool`` whole in ``state`` (a bare denial or ``*``), or None.

    A bare denial takes a tool off the surface, runtime tools included
    (``forbid_always: [archmax_wait]`` removes parking); an argument-scoped one does not.
    """
    if _bare_denial(spec.tools.forbid_always, tool):
        return "tool.forbidden"
    if _bare_denial(spec.state(state).tools.forbid, tool):
        return "tool.forbidden-here"
    return None


def disclosed_tools(spec: WorkflowSpec, state: str, available: Iterable[str]) -> list[str]:
    """The names among ``available`` the model is shown in ``state``, in the given order.

    Always-on and runtime tools unless a bare denial removes them; any other tool only when the
    state's ``allow`` or the root's ``allow_always`` names it and no bare denial removes it.
    An argument-scoped denial keeps the tool visible (it refuses only matching calls). Hiding
    ``archmax_advance`` in terminal states is the runtime tools' business. Disclosure is a
    courtesy to the model, not the enforcement: :func:`decide` judges every call.
    """
    granted = {_entry_tool(e) for e in spec.tools.allow_always}
    granted |= {_entry_tool(e) for e in spec.state(state).tools.allow}
    shown: list[str] = []
    for tool in dict.fromkeys(available):
        if tool in WITHHELD or tool == EVAL or forbidden_outright(spec, state, tool):
            continue
        if tool in ALWAYS_ON or tool in RUNTIME_TOOLS or tool in granted:
            shown.append(tool)
    return shown


def _text(value: Any) -> str:
    """The text a guard matches a non-string argument against (canonical JSON)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _argument(args: Mapping[str, Any], name: str) -> Any:
    """The argument ``name`` (dotted names reach into objects), or MISSING."""
    if name in args:
        return args[name]
    try:
        return resolve_path(name, dict(args))
    except InvalidPathError:
        return MISSING


@dataclass
class _Match:
    """How one guarded entry fared against a call."""

    matched: bool = True
    unresolved: str | None = None
    failures: list[str] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)
    """Path arguments the entry names explicitly (a grant for a path outside every area)."""


def _resolved(globs: str | list[str], variables: Mapping[str, Variable]) -> list[str] | None:
    out: list[str] = []
    for glob in [globs] if isinstance(globs, str) else globs:
        resolved = resolve_guard(glob, variables)
        if resolved is None:
            return None
        out.append(resolved)
    return out


def _guards(
    entry: ToolGrant,
    args: Mapping[str, Any],
    places: Sequence[_Place],
    variables: Mapping[str, Variable],
    *,
    deny: bool,
) -> _Match:
    """Match ``entry``'s guards: a grant needs every value to match, a denial any.

    Every guard of an entry must hold for the entry to apply (they narrow together). A path
    argument is matched in its normalised form.
    """
    result = _Match()
    path_of: dict[str, list[str]] = {}
    for place in places:
        path_of.setdefault(place.argument, []).append(place.path)
    for name, raw in (entry.args or {}).items():
        globs = _resolved(raw, variables)
        if globs is None:
            result.unresolved = f"args.{name}"
            return result
        raw_value = _argument(args, name)
        value: Any = path_of.get(name, raw_value)
        if value is MISSING:
            result.matched = False
            result.failures.append(f"argument `{name}` is absent (guard: {', '.join(globs)})")
            continue
        values = value if isinstance(value, list) else [value]
        texts = [_text(v) for v in values]
        hits = [any(glob_match(g, t) for g in globs) for t in texts]
        ok = any(hits) if deny else all(hits)
        if name in path_of:
            result.covered.add(name)
        if not ok:
            result.matched = False
            shown = values[0] if len(values) == 1 and not isinstance(raw_value, list) else value
            result.failures.append(
                f"argument `{name}` = {json.dumps(shown)} does not match {', '.join(globs)}"
            )
    if entry.paths is not None:
        globs = _resolved(entry.paths, variables)
        if globs is None:
            result.unresolved = "paths"
            return result
        hits = [any(glob_match(g, p.path) for g in globs) for p in places]
        ok = any(hits) if deny else (bool(places) and all(hits))
        result.covered.update(p.argument for p in places)
        if not ok:
            result.matched = False
            shown = ", ".join(repr(p.path) for p in places) or "no path argument"
            result.failures.append(f"path {shown} is outside paths {', '.join(globs)}")
    return result


# --- the pipeline -----------------------------------------------------------------------


def _places(tool: str, args: Mapping[str, Any]) -> list[_Place] | Verdict:
    """The tool's path arguments, normalised and placed in a zone, or the refusal."""
    places: list[_Place] = []
    for argument, use in PATH_ARGS.get(tool, ()):
        refused = _place(tool, argument, use, args, places)
        if refused is not None:
            return refused
    return places


def _place(
    tool: str, argument: str, use: PathUse, args: Mapping[str, Any], places: list[_Place]
) -> Verdict | None:
    """Append the places one path argument names (a list is governed path by path)."""
    raw = args.get(argument, MISSING)
    if raw is MISSING or raw is None:
        if tool not in OPTIONAL_PATH_ARGS:
            return _refuse("tool.path-argument", f"`{tool}` needs a `{argument}` path argument.")
        raw = ""
    values = raw if isinstance(raw, list) else [raw]
    for value in values:
        if not isinstance(value, str):
            return _refuse("tool.path-argument", f"`{tool}`'s `{argument}` must be a path string.")
        normal = normalise_path(value)
        if normal is None:
            return _refuse(
                "zone.outside-workspace",
                f"{value!r} is outside the workspace: paths are relative to the workspace "
                "root (no leading '/', no '..' above it, no backslashes).",
            )
        zone, slug = _zone(normal)
        places.append(_Place(argument, normal, use, zone, slug))
    return None


def _workflow_skill_denial(spec: WorkflowSpec, slug: str) -> str | None:
    if slug in spec.skills.forbid_always or WILDCARD in spec.skills.forbid_always:
        return "the workflow's skills.forbid_always"
    return None


def runtime_skills(spec: WorkflowSpec, catalog: Iterable[str]) -> set[str]:
    """The bundles of ``catalog`` a hook may read: every one no ``skills.forbid_always``
    denies (hooks are exempt from a state's skill set)."""
    return {slug for slug in catalog if _workflow_skill_denial(spec, slug) is None}


def _zone_verdict(
    spec: WorkflowSpec,
    state: str,
    tool: str,
    places: Sequence[_Place],
    authority: Authority = "agent",
) -> Verdict | None:
    """The zone refusals, in archmax's order: scripts, read-only, runtime-internal, skills."""
    if tool == ARCHMAX_RUN:
        for place in places:
            parts = place.path.split("/")
            if not (
                len(parts) >= 4
                and parts[0] == SKILLS
                and parts[2] == SKILL_SCRIPTS
                and SLUG.match(parts[1])
            ):
                return _refuse(
                    "script.skill-only",
                    f"archmax_run runs only scripts inside a skill bundle "
                    f"(skills/<slug>/scripts/…), not {place.path!r}.",
                )
    for place in places:
        if place.use in ("write", "remove") and place.zone in ("root", "skills", "skill", "agents"):
            return _refuse(
                "zone.read-only",
                f"{place.path or 'the workspace root'!r} is read-only; write under scratchpad/.",
            )
    for place in places:
        if place.zone == "internal":
            return _refuse(
                "zone.runtime-internal",
                f"{place.path!r} belongs to the runtime and is not accessible.",
            )
    if authority == "runtime":
        for place in places:
            denial = _workflow_skill_denial(spec, place.slug or "")
            if place.zone == "skill" and denial is not None:
                return _refuse("skill.forbidden", f"Skill {place.slug!r} is forbidden by {denial}.")
        return None
    enabled = enabled_skills(spec, state)
    for place in places:
        if place.zone == "skill" and place.slug not in enabled:
            slug = place.slug or ""
            denial = _skill_denial(spec, state, slug)
            if denial is not None:
                return _refuse("skill.forbidden", f"Skill {slug!r} is forbidden here by {denial}.")
            return _refuse(
                "skill.not-allowed", f"Skill {slug!r} is not enabled in state {state!r}."
            )
    return None


def _denial_verdict(
    entries: Sequence[ToolEntry],
    rule: str,
    where: str,
    tool: str,
    args: Mapping[str, Any],
    places: Sequence[_Place],
    variables: Mapping[str, Variable],
) -> Verdict | None:
    for entry in entries:
        if _entry_tool(entry) not in (tool, WILDCARD):
            continue
        if _is_bare(entry):
            return _refuse(rule, f"`{tool}` is forbidden {where}.")
        assert isinstance(entry, ToolGrant)
        match = _guards(entry, args, places, variables, deny=True)
        if match.unresolved is not None:
            return _unresolved(tool, match.unresolved)
        if match.matched:
            return _refuse(rule, f"This `{tool}` call is forbidden {where} ({_describe(entry)}).")
    return None


def _describe(entry: ToolGrant) -> str:
    parts = [f"{name}: {globs}" for name, globs in (entry.args or {}).items()]
    if entry.paths is not None:
        parts.append(f"paths: {entry.paths}")
    return "; ".join(parts)


UNRESOLVED_GUARD: Final = "tool.unresolved-variable"
"""The rule of a terminal block: a guard names a variable that is not set."""


def _unresolved(tool: str, guard: str) -> Verdict:
    return _refuse(
        UNRESOLVED_GUARD,
        f"The `{tool}` guard `{guard}` names a variable that is not set; the call cannot be "
        "governed and the session cannot go on.",
        terminal=True,
    )


def _grant_verdict(
    spec: WorkflowSpec,
    state: str,
    tool: str,
    args: Mapping[str, Any],
    places: Sequence[_Place],
    variables: Mapping[str, Variable],
) -> Verdict:
    """The allow step: the state's entries if it names the tool, else the root's grants.

    ``allow_always`` naming an always-on tool is inert (the tool is on anyway; only a state
    entry narrows it). A path outside every known area needs an entry that names it.
    """
    entries = [e for e in spec.state(state).tools.allow if _entry_tool(e) == tool]
    level = f"state {state!r}"
    if not entries and tool not in ALWAYS_ON:
        entries = [e for e in spec.tools.allow_always if _entry_tool(e) == tool]
        level = "the workflow"
    uncovered = {p.argument for p in places if p.zone == "other"}
    if not entries:
        if tool not in ALWAYS_ON:
            return _refuse(
                "tool.not-allowed",
                f"`{tool}` is not granted in state {state!r} (closed by default).",
            )
        if uncovered:
            return _refuse("tool.not-allowed", _outside(places))
        return _allow("tool.allowed", f"`{tool}` is always on.")
    matches: list[tuple[ToolEntry, _Match]] = []
    for entry in entries:
        if _is_bare(entry):
            matches.append((entry, _Match()))
            continue
        assert isinstance(entry, ToolGrant)
        match = _guards(entry, args, places, variables, deny=False)
        if match.unresolved is not None:
            return _unresolved(tool, match.unresolved)
        matches.append((entry, match))
    failures: list[str] = []
    for _entry, match in matches:
        if match.matched and uncovered <= match.covered:
            return _allow("tool.allowed", f"`{tool}` is granted by {level}.")
        failures.extend(match.failures if not match.matched else [_outside(places)])
    return _refuse(
        "tool.not-allowed",
        f"`{tool}` is granted by {level} only within its guards: {'; '.join(failures)}.",
    )


def _outside(places: Sequence[_Place]) -> str:
    paths = ", ".join(repr(p.path) for p in places if p.zone == "other")
    return (
        f"{paths} is in no workspace area (scratchpad/, skills/, AGENTS.md) and no grant names it"
    )


def decide(
    spec: WorkflowSpec,
    state: str,
    tool: str,
    args: dict[str, Any],
    variables: dict[str, Variable],
    *,
    authority: Authority = "agent",
) -> Verdict:
    """Whether ``tool`` may run with ``args`` in ``state``, and the rule that decided.

    On ``runtime`` authority (a hook's ``tools.*`` call) the pipeline stops after the
    workflow-wide denial: the state's ``forbid`` and grants do not bind it, and every bundle
    but the workflow-wide denied ones is readable.

    ``args`` are the already substituted arguments (:func:`substitute_references`). The
    order is archmax's kernel pipeline: non-overridable blocks, zones (outside the workspace,
    ``script.skill-only``, ``zone.read-only``, ``zone.runtime-internal``, ``skill.*``), the
    workflow-wide denial, the state denial, ``tool.scratchpad`` (always-on tools, every path in
    scratchpad/), then the grants. Runtime tools are allowed once past the denials: their own
    rules are the runtime's. Refusals are answers, never exceptions.
    """
    if tool == EVAL:
        return _refuse("tool.eval", "`eval` is blocked; use `archmax_eval` to run code.")
    if tool in WITHHELD:
        return _refuse("tool.not-allowed", f"`{tool}` is reserved for the runtime.")
    places = _places(tool, args)
    if isinstance(places, Verdict):
        return places
    zone = _zone_verdict(spec, state, tool, places, authority)
    if zone is not None:
        return zone
    workflow_denial = _denial_verdict(
        spec.tools.forbid_always,
        "tool.forbidden",
        "in this workflow",
        tool,
        args,
        places,
        variables,
    )
    if authority == "runtime":
        return workflow_denial or _allow("tool.runtime", f"`{tool}` runs on runtime authority.")
    denial = workflow_denial or _denial_verdict(
        spec.state(state).tools.forbid,
        "tool.forbidden-here",
        f"in state {state!r}",
        tool,
        args,
        places,
        variables,
    )
    if denial is not None:
        return denial
    if tool in RUNTIME_TOOLS:
        return _allow("tool.allowed", f"`{tool}` is a runtime tool.")
    if tool in ALWAYS_ON and places and all(p.zone == "scratchpad" for p in places):
        return _allow("tool.scratchpad", "scratchpad/ is always readable and writable.")
    return _grant_verdict(spec, state, tool, args, places, variables)


# --- the decision on one call -------------------------------------------------------------

Origin = Literal["agent", "script", "hook"]
"""Who wrote the call: the model (its own call, or a sub-workflow call it made), a script or
snippet the agent ran (``archmax_run``, ``archmax_eval``: the agent's authority), or a
lifecycle hook (runtime authority)."""

UNRESOLVED_REFERENCE: Final = "tool.unresolved-reference"
"""The rule of a call refused because a ``${{…}}`` reference in its arguments names nothing."""


class _CallVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str


class Run(_CallVerdict):
    """Run the tool with ``arguments`` (substituted where the call's origin substitutes)."""

    kind: Literal["run"] = "run"
    arguments: dict[str, Any]


class Mocked(_CallVerdict):
    """A declared mock answers the call with ``result``; the tool does not run.

    ``arguments`` are the governed ones (a sub-workflow mock is still held to its target)."""

    kind: Literal["mock"] = "mock"
    arguments: dict[str, Any]
    result: Any = None

    def answer(self) -> tuple[Literal["ok", "error"], str]:
        """The status and text a tool call answers with: a mapping with an ``error`` key
        fails the call, anything else is the result (a string verbatim, else JSON)."""
        if isinstance(self.result, dict) and "error" in self.result:
            return "error", mock_result_text(self.result["error"])
        return "ok", mock_result_text(self.result)


class Blocked(_CallVerdict):
    """Governance refused the call (``rule``, ``reason``). ``terminal``: the refusal cannot be
    corrected (an unresolvable guard); the turn fails, the session is rejected or routed."""

    kind: Literal["blocked"] = "blocked"
    rule: str
    reason: str
    terminal: bool = False

    @property
    def text(self) -> str:
        """What the caller reads."""
        return f"Blocked by governance ({self.rule}): {self.reason}"


class Unresolved(_CallVerdict):
    """A ``${{…}}`` reference in the arguments names nothing: a correctable refusal, answered
    as a blocked call (rule :data:`UNRESOLVED_REFERENCE`); the caller may set the variable or
    write ``$${{…}}`` and call again. Never terminal."""

    kind: Literal["unresolved"] = "unresolved"
    reason: str
    rule: Literal["tool.unresolved-reference"] = "tool.unresolved-reference"
    terminal: Literal[False] = False

    @property
    def text(self) -> str:
        """What the caller reads."""
        return f"{self.tool} refused: {self.reason}"


CallVerdict = Run | Mocked | Blocked | Unresolved
"""Every answer :func:`govern` gives: run, mocked, blocked (maybe terminal), unresolved."""


class TerminalBlock(Exception):
    """A call inside a script or snippet got a terminal :class:`Blocked` (an unresolvable
    guard): the run stopped there, and the turn fails with ``reason`` exactly as it does when
    the agent's own call gets one. Raised and caught in workflow code, never on the wire."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def substitutes(origin: Origin, tool: str) -> bool:
    """Whether a call's ``${{…}}`` references are substituted: the agent's calls, and every
    sub-workflow call (its arguments are the child's seeds). A script's or hook's own calls
    are taken as written (archmax: "Script and hook calls are not substituted"): their code
    reads the variables from ``args.variables``, and the text they move (a template, a copied
    file) must reach the tool unchanged."""
    return origin == "agent" or workflow_target(tool) is not None


def govern(
    spec: WorkflowSpec,
    state: str,
    tool: str,
    args: dict[str, Any],
    variables: dict[str, Variable],
    mocks: Sequence[ToolMock] = (),
    *,
    origin: Origin = "agent",
) -> CallVerdict:
    """The decision on one tool call, in order: substitute the arguments' references (see
    :func:`substitutes`; an unresolved one is :class:`Unresolved`), govern the substituted
    call (:func:`decide`, on runtime authority for a hook; a refusal is :class:`Blocked`), then
    the first declared mock that matches (:class:`Mocked`), else :class:`Run`.

    A mock never masks a refusal. Pure and deterministic: the turn engine, the sub-workflow
    dispatcher and the sandbox bridge all call it, in workflow code or in an activity.
    """
    arguments = args
    if substitutes(origin, tool):
        substituted, problem = substitute_references(args, variables)
        if problem is not None:
            return Unresolved(tool=tool, reason=problem)
        arguments = substituted
    verdict = decide(
        spec,
        state,
        tool,
        arguments,
        variables,
        authority="runtime" if origin == "hook" else "agent",
    )
    if not verdict.allowed:
        return Blocked(
            tool=tool, rule=verdict.rule, reason=verdict.reason, terminal=verdict.terminal
        )
    mock = find_mock(list(mocks), tool, arguments)
    if mock is not None:
        return Mocked(tool=tool, arguments=arguments, result=mock.result)
    return Run(tool=tool, arguments=arguments)
