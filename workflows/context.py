"""``SessionContext``: what the turn engine, the hook runner and the sub-workflow dispatcher
may touch of a session.

The session workflow (:mod:`archmax_temporal.workflows.session`) owns one context per run and lends
it to its collaborators; none of them reaches into the workflow itself. The context holds the
durable session state (:attr:`SessionContext.session`, what continue-as-new carries), the run's
input and spec, and the record-keeping every collaborator shares: trail steps, runtime notes, tool
answers, new visits. Deterministic: the only clock is ``workflow.now()``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar, cast

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows import telemetry, transcript
    from archmax_temporal.workflows.models import (
        DecidedBy,
        Message,
        NoteKind,
        SessionInput,
        SessionState,
        ToolCall,
        ToolMock,
        TrailKind,
        TrailStep,
        TurnSpec,
    )
    from archmax_temporal.workflows.spec import WorkflowSpec
    from archmax_temporal.workflows.tools import NOTE

CLEANED_ARGUMENTS = (
    "[runtime] Your arguments held invalid Unicode (lone surrogates); each was replaced by "
    "U+FFFD before the call ran.\n"
)
"""What a tool answer starts with when the call's arguments had to be cleaned."""

ToolStatus = Literal["ok", "error", "blocked"]
"""How a tool call ended, as the model reads it."""


@dataclass(frozen=True)
class ToolAnswer:
    """The answer to one tool call: its text, its status, and for a blocked call the
    governance rule that refused it."""

    content: str
    status: ToolStatus = "ok"
    rule: str | None = None
    kept: bool = False
    """The tool's activity kept ``content`` in the store under its digest: the next model
    call names it instead of carrying it again."""


_SHARED: dict[tuple[str, str], Any] = {}
"""Parsed spec parts by kind and digest, one object for every session of a worker that runs
under them (the worker runs workflow code unsandboxed, so all cached sessions see one table)."""

SHARED_ENTRIES: Final = 512
"""Beyond this many distinct parts (a worker that served many revisions) the table starts
over; sessions keep whatever they already hold."""

_T = TypeVar("_T")


def shared(kind: str, digest: str | None, value: _T) -> _T:
    """The one held object equal to ``value`` under ``(kind, digest)``, or ``value`` itself
    (then held for the next session). Equal content only: a digest that leaves something out
    (the spec hash leaves ``metadata`` out) never hands one session another's part.
    Deterministic: what a session gets is always equal to what it brought."""
    if digest is None:
        return value
    key = (kind, digest)
    held = _SHARED.get(key)
    if held is not None and held == value:
        return cast(_T, held)
    if held is None:
        if len(_SHARED) >= SHARED_ENTRIES:
            _SHARED.clear()
        _SHARED[key] = value
    return value


class SessionContext:
    """One session run's state and input, and the records kept on them."""

    def __init__(self, input: SessionInput) -> None:
        # every cached session of one workflow holds the same parsed spec and prose
        input.spec = shared("spec", input.spec_hash, input.spec)
        input.prompt = shared("prompt", input.revision, input.prompt)
        input.hook_sources = shared("hooks", input.revision, input.hook_sources)
        input.delegates = shared("delegates", input.revision, input.delegates)
        self.input: SessionInput = input
        """The run's input: ids, the pinned spec and prompt, host tools, mocks, delegates."""
        self.spec: WorkflowSpec = input.spec
        """The spec the session runs under (a turn runs under the spec it began with)."""
        self.session: SessionState = input.carried or SessionState(status="new")
        """The durable session: status, position, variables, transcript, trail, parks."""
        self.cleaned_calls: set[str] = set()
        """Tool calls whose arguments held invalid Unicode (replaced before they ran): their
        answers say so, so the model knows what it sent is not what ran."""

    def adopt(self, turn_spec: TurnSpec) -> None:
        """Run from now on under ``turn_spec`` (a turn opening under the workflow as the host
        loaded it): the input's spec, prompt, hooks and callees are replaced, so
        continue-as-new carries them on."""
        revision = turn_spec.revision
        self.input = self.input.model_copy(
            update={
                "spec": shared("spec", turn_spec.spec_hash, turn_spec.spec),
                "spec_hash": turn_spec.spec_hash,
                "prompt": shared("prompt", revision, turn_spec.prompt),
                "hook_sources": shared("hooks", revision, turn_spec.hook_sources),
                "delegates": shared("delegates", revision, turn_spec.delegates),
                "revision": revision,
            }
        )
        self.spec = self.input.spec

    @property
    def mocks(self) -> list[ToolMock]:
        """The declared tool mocks of the turn under way: the ones its firing carried (kept
        in the session state), else the ones the session started with (``SessionInput``)."""
        carried = self.session.mocks
        return carried if carried is not None else self.input.mocks

    @property
    def session_id(self) -> str:
        """The session id (the workflow id)."""
        return self.input.session_id

    def state_slug(self) -> str:
        """The state the session stands in (set from the first turn on)."""
        assert self.session.state is not None
        return self.session.state

    def new_visit(self) -> None:
        """An entry into the current state: its before hooks are due, corrections reset."""
        self.session.before_done = False
        self.session.hook_corrections = {}

    def trail(
        self,
        to: str,
        kind: TrailKind,
        reason: str | None,
        *,
        spec_hash: str | None = None,
        by: DecidedBy | None = None,
    ) -> None:
        """Record a committed step of the audit trail, stamped with the workflow's clock (a
        turn's opening step names the spec the turn runs under; a decision no person took
        names who took it)."""
        self.session.trail.append(
            TrailStep(
                to=to, kind=kind, reason=reason, ts=workflow.now(), spec_hash=spec_hash, by=by
            )
        )

    def note(self, kind: NoteKind, text: str) -> None:
        """A runtime note: a synthetic ``archmax_note`` call and its result, both marked."""
        s = self.session
        call_id = f"note_{transcript.total(s)}"
        arguments = json.dumps({"kind": kind})
        transcript.append(
            s,
            Message(
                role="assistant",
                tool_calls=[ToolCall(id=call_id, name=NOTE, arguments=arguments)],
                note=kind,
                state=s.state,
            ),
        )
        transcript.append(
            s,
            Message(
                role="tool",
                tool_call_id=call_id,
                name=NOTE,
                content=text,
                note=kind,
                status="ok",
                state=s.state,
            ),
        )

    def answer(self, call: ToolCall, answer: ToolAnswer) -> None:
        """Append the answer to ``call`` to the transcript, in the current state."""
        content = answer.content
        telemetry.tool_answered(self, call.name, answer.status, answer.rule)
        if call.id in self.cleaned_calls:
            self.cleaned_calls.discard(call.id)
            content = CLEANED_ARGUMENTS + content
        message = Message(
            role="tool",
            tool_call_id=call.id,
            name=call.name,
            content=content,
            status=answer.status,
            rule=answer.rule,
            state=self.session.state,
        )
        if answer.kept and content == answer.content:  # the store holds exactly this text
            transcript.kept(self.session, message)
        else:
            transcript.append(self.session, message)
