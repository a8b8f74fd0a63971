"""What the ``archmax`` commands print: outcomes and their token footer, session listings
and details, live event narration. stderr narrates, stdout carries results only."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from pydantic_core import to_jsonable_python

from archmax_temporal.client.times import span, when
from archmax_temporal.client.usage import configured_pricing, footer_line
from archmax_temporal.workflows.models import (
    Outcome,
    PendingDecision,
    PendingInput,
    SessionSummary,
    TrailStep,
    Usage,
    Variable,
)

if TYPE_CHECKING:
    from archmax_temporal.client.events import SessionEvent


def camel_json(value: Any) -> Any:
    """``value`` as JSON-ready data in archmax's camelCase: every model field name renamed
    (``session_id`` → ``sessionId``), a mapping's keys (variable names, values) left as data.
    The one convention of every JSON document the CLI prints."""
    if isinstance(value, Variable):  # a variable is the seeds' {value, locked} record
        return to_jsonable_python(value)
    if isinstance(value, BaseModel):
        return {
            to_camel(name): camel_json(getattr(value, name)) for name in type(value).model_fields
        }
    if isinstance(value, dict):
        return {key: camel_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [camel_json(item) for item in value]
    return to_jsonable_python(value)


def handoff_of(messages: Sequence[Any]) -> str | None:
    """The agent's last words in a transcript (its handoff to the person at a human state):
    the last assistant message with text, runtime notes excluded."""
    for message in reversed(messages):
        if message.role == "assistant" and message.note is None and (message.content or "").strip():
            return str(message.content).strip()
    return None


def due_text(due_at: datetime, now: datetime | None = None) -> str:
    """A decision's due time as a person reads it: ``2026-12-07T10:00Z (in 2 d)``, or
    ``… (3 h ago)`` once it passed (its deadline is taken as soon as a worker runs)."""
    now = now or datetime.now(UTC)
    left = (due_at - now).total_seconds()
    relative = f"in {span(left)}" if left >= 0 else f"{span(-left)} ago"
    return f"{due_at.astimezone(UTC).strftime('%Y-%m-%dT%H:%MZ')} ({relative})"


def err(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


def _flow(trail: Sequence[TrailStep]) -> None:
    for step in trail:
        if step.kind == "trigger":
            err(f"  ▸ {step.to}  (trigger {step.reason})")
        else:
            reason = f" — {step.reason}" if step.reason else ""
            err(f"  → {step.to}  ({step.kind}){reason}")


def report_outcome(
    outcome: Outcome,
    *,
    trail_from: int = 0,
    spent_before: Usage | None = None,
    shown: Collection[str] = (),
) -> int:
    """Narrate ``outcome`` on stderr, print the reply on stdout (unless it is one of the
    messages already ``shown`` whole as it was written); the exit code it deserves.

    The token footer closes the narration: what this command's turn spent (the session's
    usage less ``spent_before``), omitted when the endpoint reported nothing.
    """
    code = _narrate_outcome(outcome, max(trail_from - outcome.trail_offset, 0), shown)
    spent = outcome.usage.since(spent_before) if spent_before is not None else outcome.usage
    tokens = footer_line(spent, configured_pricing(err))
    if tokens is not None:
        err(tokens)
    return code


def _narrate_outcome(outcome: Outcome, trail_from: int, shown: Collection[str] = ()) -> int:
    _flow(outcome.trail[trail_from:])
    if outcome.reply and outcome.reply not in shown:
        print(outcome.reply, flush=True)
    if outcome.kind == "parked" and isinstance(outcome.pending, PendingDecision):
        decision = outcome.pending
        edges = ", ".join(edge.to for edge in decision.transitions)
        due = f" (due {due_text(decision.due_at)})" if decision.due_at else ""
        err(f"⏸ parked at {decision.state}, awaiting a decision: {edges}{due}")
        first = decision.transitions[0].to if decision.transitions else "<state>"
        err(f"  decide: archmax decide {outcome.session_id} --to {first} [--comment …]")
        return 0
    if outcome.kind == "parked" and isinstance(outcome.pending, PendingInput):
        pending = outcome.pending
        due = f" (wakes itself {when(pending.resume_at)})" if pending.resume_at else ""
        err(f"⏸ parked in {pending.state}, awaiting input: {pending.reason}{due}")
        err(f"  resume: archmax deliver {outcome.session_id} --trigger <id> --variables '{{…}}'")
        return 0
    if outcome.kind == "completed":
        err(f"✔ completed in {outcome.state}")
        return 0
    if outcome.kind == "failed" and outcome.exit is not None:
        err(f"✖ failed {outcome.exit.code}: {outcome.exit.reason}")
        return 1
    err(f"✖ rejected: {outcome.rejected}")
    return 1


def summary_line(s: SessionSummary, handoff: str | None = None) -> str:
    """One ``archmax sessions`` line; a session awaiting a decision adds its decision
    context beneath it: the state, its edges and the agent's handoff (first line)."""
    parts = [s.session_id, s.status, s.classification, f"state={s.state}"]
    if s.pending_input is not None:
        parts.append(f"awaiting={s.pending_input.state}")
    if s.pending_decision is not None:
        parts.append(f"awaiting={s.pending_decision.state}")
    if s.exit is not None and not s.exit.success:
        parts.append(f"exit={s.exit.code}")
    names = [n for n in s.variables if n != "trigger"]
    parts.append(f"vars={','.join(sorted(names))}")
    line = "  ".join(parts)
    if s.waiting_on:
        line += f"\n    {s.waiting_on}"
    if s.wait_reason:
        due = f" (wakes {when(s.resume_at)})" if s.resume_at else ""
        line += f"\n    waiting for: {s.wait_reason}{due}"
    if s.pending_decision is not None:
        edges = ", ".join(edge.to for edge in s.pending_decision.transitions)
        line += f"\n    decision at {s.pending_decision.state}: {edges or '(no edges)'}"
        if s.pending_decision.due_at is not None:
            line += f" · due {due_text(s.pending_decision.due_at)}"
        if handoff:
            first = handoff.splitlines()[0]
            line += f"\n    handoff: {first[:160]}{'…' if len(first) > 160 else ''}"
    return line


def summary_detail(s: SessionSummary, handoff: str | None = None) -> str:
    """``archmax sessions <id>``: the session, its park (a decision's edges with their
    descriptions and the agent's handoff), its exit and its variables."""
    lines = [
        f"session   {s.session_id}",
        f"workflow  {s.workflow}",
        f"status    {s.status} ({s.classification})",
        f"state     {s.state}",
        f"spec      {s.spec_hash}",
    ]
    if s.waiting_on:
        lines.append(f"waiting   {s.waiting_on.removeprefix('waiting ')}")
    if s.pending_decision is not None:
        edges = ", ".join(e.to for e in s.pending_decision.transitions)
        lines.append(f"awaiting  decision at {s.pending_decision.state}: {edges}")
        for edge in s.pending_decision.transitions:
            kind = f" ({edge.type})" if edge.type and edge.type != "none" else ""
            about = f": {edge.description}" if edge.description else ""
            lines.append(f"  → {edge.to}{kind}{about}")
        if s.pending_decision.due_at is not None:
            lines.append(f"due       {due_text(s.pending_decision.due_at)}")
        if handoff:
            lines.append("handoff")
            lines += [f"  {line}" for line in handoff.splitlines()]
    if s.pending_input is not None:
        lines.append(f"awaiting  input in {s.pending_input.state}: {s.pending_input.reason}")
    elif s.source == "visibility" and s.wait_reason:
        lines.append(f"awaiting  {s.wait_reason}")
    if s.resume_at and s.status == "awaiting_input":
        lines.append(f"due       {when(s.resume_at)}  ({s.resume_at.isoformat()})")
    if s.exit is not None:
        lines.append(
            "exit      success" if s.exit.success else f"exit      {s.exit.code}: {s.exit.reason}"
        )
    if s.rejected:
        lines.append(f"rejected  {s.rejected}")
    if s.source == "visibility":  # no worker answered: names only, from the memo
        lines.append(f"variables {', '.join(sorted(s.variables)) or '(none)'}")
        return "\n".join(lines)
    lines.append("variables")
    for name, variable in sorted(s.variables.items()):
        lock = " (locked)" if variable.locked else ""
        lines.append(f"  {name}{lock} = {json.dumps(variable.value, ensure_ascii=False)}")
    return "\n".join(lines)


def narrate_event(event: SessionEvent) -> None:
    data = event.data
    if event.type == "tool-called":
        shown = json.dumps(data.get("args"), ensure_ascii=False, default=str)
        err(f"  · {data['tool']} {shown[:120]}")
    elif event.type == "tool-result" and data.get("status") != "ok":
        err(f"  · {data['tool']} → {data['status']}: {str(data.get('preview'))[:120]}")
    elif event.type == "tool-blocked":
        err(f"  · {data['tool']} → blocked ({data.get('rule')})")
    elif event.type in ("hook-verdict", "rubric-result"):
        reason = f": {data['reason']}" if data.get("reason") else ""
        err(f"  · {data['phase']} hook {data['hook']} → {data.get('verdict')}{reason}")
    elif event.type == "hook-output":
        err(f"  · {data.get('hook') or data.get('script')}: {data.get('text')}")
    elif event.type == "model-usage":
        err(f"  · model {data['model']}: in {data['inputTokens']} · out {data['outputTokens']}")
    elif event.type == "sub-workflow-start":
        err(f"  · sub-workflow {data['childSessionId']} started")


class StatusLine:
    """While a turn runs on a terminal: one line on stderr, redrawn in place, with the
    elapsed time and what is in flight (``model call in state clarify``, ``tool
    read_file``), read off the session's events; :meth:`clear` removes it when the turn
    ends. Only for a terminal: piped output never sees it."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self._clock = clock
        self._started = clock()
        self._state: str | None = None
        self.doing = "waiting for the session"
        self._shown = False

    def saw(self, event: SessionEvent) -> None:
        """Follow the turn: what the event says is in flight now."""
        data = event.data
        if event.type == "state-enter":
            self._state = str(data.get("state"))
        model = f"model call in state {self._state}" if self._state else "model call"
        if event.type == "tool-called":
            self.doing = f"tool {data.get('tool')}"
        elif event.type in ("hook-start", "rubric-start"):
            self.doing = f"{data.get('phase')} hook {data.get('hook')}"
        elif event.type == "sub-workflow-start":
            self.doing = f"sub-workflow {data.get('childSessionId')}"
        elif event.type in (
            "turn-start", "delivered", "decided", "state-enter", "tool-result",
            "tool-blocked", "hook-verdict", "rubric-result", "sub-workflow-result",
        ):  # fmt: skip
            self.doing = model
        elif event.type == "model-usage":
            self.doing = "the model's answer"
        self.draw()

    def text(self) -> str:
        return f"  ⋯ {span(self._clock() - self._started)} · {self.doing}"

    held = False
    """While true (the model's text is being written on the terminal), nothing is drawn."""

    def draw(self) -> None:
        if self.held:
            return
        self._stream.write("\r\x1b[2K" + self.text())
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[2K")
            self._stream.flush()
            self._shown = False

    async def tick(self, every: float = 0.5) -> None:
        """Redraw until cancelled (the elapsed time moves while nothing else does)."""
        while True:
            self.draw()
            await asyncio.sleep(every)


class TextPrinter:
    """On a terminal, the model's text as it is written (``agent-text-delta``), each message
    closed with a newline once its durable ``agent-text`` (or outbound ``park-message``)
    arrives; a message shown whole is remembered in :attr:`shown`, so the closing reply is
    not printed twice. A reset (a retried call) ends the line and says the text is void."""

    def __init__(self, out: TextIO, notes: TextIO) -> None:
        self._out = out
        self._notes = notes
        self._open: str | None = None
        """The ``messageId`` being written on the current line."""
        self._written = ""
        self._whole = True
        """Whether every delta of the open message arrived (none missed, none dropped)."""
        self.shown: set[str] = set()
        """The texts of the messages shown whole as they were written."""

    @property
    def writing(self) -> bool:
        """Whether a message's line is open (the status line must wait)."""
        return self._open is not None

    def saw(self, event: SessionEvent) -> None:
        data = event.data
        message = data.get("messageId")
        if event.type == "agent-text-delta":
            if message != self._open:
                self.end_line()
                self._open, self._written, self._whole = str(message), "", True
            text = str(data.get("text") or "")
            if data.get("offset", len(self._written)) != len(self._written):
                self._whole = False  # joined late, or a delta was lost
            self._write(text)
            self._written += text
        elif event.type == "agent-text-reset" and message == self._open:
            self.end_line()
            self._notes.write("  ↺ the model call is retried: the text above is void\n")
            self._notes.flush()
        elif message is not None and message == self._open:
            text = str(data.get("text") or "")
            if self._whole and text.startswith(self._written):
                self._write(text[len(self._written) :])
                self.shown.add(text)
            self.end_line()

    def end_line(self) -> None:
        """Close the open message's line (another event is narrated, the turn ended)."""
        if self._open is not None:
            self._write("\n")
            self._open, self._written = None, ""

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()
