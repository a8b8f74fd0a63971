"""Lifecycle hooks, decided deterministically: what a hook is, what it is told, and what its
answer means (harness §3).

- ``before`` gates entry, once per visit: ok or veto (a ``correct`` is a veto and consumes
  nothing); ``after`` gates leaving (and a terminal state's completion): ok, veto, or
  ``correct``, a retry the agent may take up to the hook's ``max_iterations`` per visit
  (default 0: the first correct is final).
- A hook's answer is read fail closed: a script returning nothing is ok; a verdict helper's
  object is that verdict; a throw, a missing file or any other value vetoes, with the reason.
- An *execution error* (the sandbox timed out or ran out of memory, the grader could not be
  reached) is no verdict at all: a turn failure, routed by ``on_error``.

Pure (no I/O): the session workflow runs the hooks as activities and reads them with this.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from archmax_temporal.workflows.models import Message, Variable
from archmax_temporal.workflows.spec import HookSpec
from archmax_temporal.workflows.variables import wire_values

Phase = Literal["before", "after"]
HookKind = Literal["script", "rubric", "custom"]
VerdictName = Literal["ok", "correct", "veto"]

HOOKS_DIR: Final = "hooks"
SCRIPT_SUFFIXES: Final = (".js", ".mjs")
MESSAGES_IN_ARGS: Final = 50
"""How many of the newest transcript messages a hook is shown."""
MESSAGE_TEXT_LIMIT: Final = 4000
SNIPPET: Final = 200

_VERDICTS: Final = frozenset({"ok", "correct", "veto"})


class HookVerdict(BaseModel):
    """One hook's answer: the verdict and why; ``error`` marks an execution error."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: VerdictName
    reason: str = ""
    error: bool = False
    unreadable: bool = False
    """A rubric's grader answered no ``{verdict, reason}`` JSON (:data:`UNREADABLE_VERDICT`):
    a veto that spends the rubric's ``max_iterations`` like a correct, so the agent's retries
    are bounded by what the rubric allows."""


OK: Final = HookVerdict(verdict="ok")


def veto(reason: str) -> HookVerdict:
    """A veto with ``reason``."""
    return HookVerdict(verdict="veto", reason=reason)


def execution_error(reason: str) -> HookVerdict:
    """No verdict could be had: a turn failure, not a refusal the agent can answer."""
    return HookVerdict(verdict="veto", reason=reason, error=True)


# --- what a hook is ---------------------------------------------------------------------------


def hook_kind(hook: HookSpec) -> tuple[HookKind, str | None]:
    """``("script", None)``, ``("rubric", None)`` or ``("custom", "<kind>")``."""
    if hook.script is not None:
        return "script", None
    if hook.rubric is not None:
        return "rubric", None
    extra = sorted((hook.model_extra or {}).keys())
    return "custom", (extra[0] if extra else None)


def custom_config(hook: HookSpec) -> Any:
    """A custom kind's declared value (``{webhook: https://…}`` → the URL)."""
    _, kind = hook_kind(hook)
    return (hook.model_extra or {}).get(kind) if kind else None


def hook_label(hook: HookSpec, index: int) -> str:
    """How a hook is named in notes, errors and the UI: its path, ``rubric#0``, its kind."""
    kind, custom = hook_kind(hook)
    if kind == "script":
        return str(hook.script)
    if kind == "rubric":
        return f"rubric#{index}"
    return custom or f"hook#{index}"


def hook_summary(phase: Phase, state: str, label: str) -> str:
    """``hook before · intake · hooks/check.js``: the activity summary in the Temporal UI."""
    return f"hook {phase} · {state} · {label}"


def correction_key(phase: Phase, index: int) -> str:
    """The per-visit correction counter of one hook (its identity is its position)."""
    return f"{phase}#{index}"


def correction_budget(hook: HookSpec) -> int:
    """How many ``correct`` verdicts a hook may return per visit (default 0)."""
    if hook.rubric is not None:
        return hook.rubric.max_iterations or 0
    return hook.max_iterations or 0


def script_path_problem(path: str) -> str | None:
    """Why a ``script:`` path is refused, or None: it is workflow-relative, under ``hooks/``,
    ends in ``.js`` or ``.mjs`` and has no ``..``."""
    if path.startswith("/") or "\\" in path or re.match(r"^[A-Za-z]:", path):
        return f"hook script {path!r} must be a workflow-relative path (hooks/<file>.js)"
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        return f"hook script {path!r} may not contain '..'"
    if len(parts) < 2 or parts[0] != HOOKS_DIR:
        return f"hook script {path!r} must sit under {HOOKS_DIR}/"
    if not path.endswith(SCRIPT_SUFFIXES):
        return f"hook script {path!r} must end in .js or .mjs"
    return None


def source_key(path: str) -> str:
    """The normal form a script path is snapshotted under (``./hooks//a.js`` → ``hooks/a.js``)."""
    return "/".join(p for p in path.split("/") if p not in ("", "."))


# --- what a hook is told ----------------------------------------------------------------------


def transcript_view(messages: list[Message], limit: int = MESSAGES_IN_ARGS) -> list[dict[str, Any]]:
    """The recent transcript as a hook reads it, newest last: ``{role, text, toolCalls?,
    tool?, note?}``, runtime notes as role ``runtime``."""
    view: list[dict[str, Any]] = []
    for message in messages[-limit:]:
        role = "runtime" if message.note is not None else message.role
        entry: dict[str, Any] = {"role": role, "text": (message.content or "")[:MESSAGE_TEXT_LIMIT]}
        if message.tool_calls and message.note is None:
            entry["toolCalls"] = [
                {"name": call.name, "arguments": _json_or_text(call.arguments)}
                for call in message.tool_calls
            ]
        if message.role == "tool" and message.name:
            entry["tool"] = message.name
        if message.note is not None:
            entry["note"] = message.note
        view.append(entry)
    return view


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def hook_args(
    *,
    state: str,
    phase: Phase,
    trigger: str | None,
    variables: dict[str, Variable],
    transcript: list[Message],
    from_state: str | None = None,
    to_state: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """The one object a hook receives (also its global ``args``), minus ``tools``."""
    args: dict[str, Any] = {
        "state": state,
        "phase": phase,
        "trigger": trigger,
        "variables": wire_values(variables),  # stored values: the activity fills them in
        "messages": transcript_view(transcript),
    }
    if from_state is not None:
        args["from"] = from_state
    if to_state is not None:
        args["to"] = to_state
    if reason is not None:
        args["reason"] = reason
    return args


# --- what its answer means --------------------------------------------------------------------


def _snippet(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SNIPPET else text[:SNIPPET] + "…"


def _verdict_object(value: Any) -> HookVerdict | None:
    if (
        isinstance(value, dict)
        and value.get("verdict") in _VERDICTS
        and set(value) <= {"verdict", "reason"}
    ):
        reason = value.get("reason")
        return HookVerdict(verdict=value["verdict"], reason=str(reason) if reason else "")
    return None


def script_verdict(value: Any, returned_nothing: bool) -> HookVerdict:
    """A script hook's value: nothing (or null) is ok, a helper's object its verdict, any
    other value a fail-closed veto naming what came back."""
    if returned_nothing or value is None:
        return OK
    verdict = _verdict_object(value)
    if verdict is not None:
        return verdict
    if isinstance(value, dict):
        keys = ", ".join(sorted(map(str, value))) or "none"
        return veto(f"the hook returned no verdict (an object with keys: {keys})")
    return veto(f"the hook returned no verdict ({_snippet(value)})")


def custom_verdict(value: Any) -> HookVerdict:
    """A custom executor's value (harness §3.5): ``{verdict, reason}`` is that verdict,
    ``false`` a veto, nothing or a non-object no opinion (ok), any other object a veto."""
    if value is False:
        return veto("precondition not met")
    if not isinstance(value, dict):
        return OK
    verdict = _verdict_object(value)
    if verdict is not None:
        return verdict
    keys = ", ".join(sorted(map(str, value))) or "none"
    return veto(f"the hook executor returned no verdict (an object with keys: {keys})")


_FENCE = re.compile(r"^```[A-Za-z]*\s*|\s*```$")

UNREADABLE_VERDICT: Final = "unreadable-verdict"
"""The name of a rubric's grader reply that holds no ``{"verdict", "reason"}`` JSON: it
opens the veto's reason and is the ``failure`` of its ``rubric-result`` event."""


def rubric_verdict(text: str | None) -> HookVerdict:
    """The grader's answer, ``{"verdict": ok|correct|veto, "reason"}``; anything else vetoes
    with a snippet of what it said, marked ``unreadable``."""
    raw = (text or "").strip()
    candidates = [_FENCE.sub("", raw).strip()]
    start, end = raw.find("{"), raw.rfind("}")
    if start != -1 and end > start:
        candidates.append(raw[start : end + 1])
    for candidate in candidates:
        try:
            parsed = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(parsed, dict) and parsed.get("verdict") in _VERDICTS:
            reason = parsed.get("reason")
            return HookVerdict(verdict=parsed["verdict"], reason=str(reason) if reason else "")
    return HookVerdict(
        verdict="veto",
        reason=f"{UNREADABLE_VERDICT}: the rubric's grader gave no verdict: "
        f"{_snippet(raw) or '(empty)'}",
        unreadable=True,
    )


def on_entry(verdict: HookVerdict) -> HookVerdict:
    """A ``before`` hook answers ok or veto: its ``correct`` is a veto (consuming nothing)."""
    if verdict.verdict == "correct":
        return veto(verdict.reason)
    return verdict


# --- the grader's prompt ----------------------------------------------------------------------

RUBRIC_SYSTEM: Final = (
    "You are a strict grader for one step of a governed agent workflow. Judge the JSON "
    "payload you are given (the user's request, the conversation so far, the state and the "
    "phase) against the criteria below, and nothing else.\n\n"
    'Answer with one JSON object and nothing else: {"verdict": "ok" | "correct" | "veto", '
    '"reason": "<one or two sentences>"}. "ok": the criteria are met. "correct": they are '
    'not met but the agent can fix it (say how). "veto": they are not met and must not pass.'
)


def rubric_messages(instructions: str, args: dict[str, Any]) -> list[Message]:
    """The grader's conversation: the grading prompt and criteria, then the payload."""
    messages = args.get("messages") or []
    first_user = next((m["text"] for m in messages if m.get("role") == "user"), None)
    payload: dict[str, Any] = {
        "userRequest": first_user,
        "history": messages,
        "state": args.get("state"),
        "phase": args.get("phase"),
        **{key: args[key] for key in ("from", "to", "reason") if key in args},
    }
    return [
        Message(role="system", content=f"{RUBRIC_SYSTEM}\n\n## Criteria\n{instructions.strip()}"),
        Message(role="user", content=json.dumps(payload, ensure_ascii=False, default=str)),
    ]
