"""workflows/hook_runner.py: the after gate, one ladder read by an advance and by a
completion, each hook's answer stubbed (the sessions that run real hooks are in
``tests/e2e/test_hooks.py``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from archmax_temporal.workflows import hooks
from archmax_temporal.workflows.context import SessionContext
from archmax_temporal.workflows.hook_runner import (
    PASS,
    Completion,
    Gate,
    HookRunner,
    Refusal,
)
from archmax_temporal.workflows.hooks import HookVerdict, Phase
from archmax_temporal.workflows.models import SessionState
from archmax_temporal.workflows.spec import HookSpec, parse_spec

SPEC = parse_spec(
    {
        "states": {
            "review": {
                "triggers": {"manual": None},
                "transitions": [{"to": "done", "description": "Reviewed."}],
                "after": [{"script": "hooks/a.js"}],
            },
            "done": {
                "after": [{"script": "hooks/a.js", "max_iterations": 1}, {"script": "hooks/b.js"}],
            },
        }
    }
)


class Stubbed(HookRunner):
    """A runner whose hooks answer from a script, recording each call."""

    def __init__(self, answers: list[HookVerdict]) -> None:
        session = SessionState(status="running", state="done")
        super().__init__(cast(SessionContext, SimpleNamespace(session=session, spec=SPEC)))
        self.session = session
        self.answers = list(answers)
        self.calls: list[tuple[Phase, str, int, str | None, str | None]] = []

    async def execute(
        self,
        phase: Phase,
        slug: str,
        index: int,
        hook: HookSpec,
        *,
        from_state: str | None = None,
        to_state: str | None = None,
        reason: str | None = None,
    ) -> HookVerdict:
        self.calls.append((phase, slug, index, to_state, reason))
        return self.answers.pop(0)


CORRECT = HookVerdict(verdict="correct", reason="cite it")
CASES: list[tuple[str, list[HookVerdict], Gate, Completion, int]] = [
    ("all pass", [hooks.OK, hooks.OK], PASS, Completion(), 2),
    (
        "a veto",
        [hooks.OK, hooks.veto("no")],
        Gate(refusal=Refusal("archmax_advance vetoed by after hook hooks/b.js: no", "hook.veto")),
        Completion(note="[after] hook hooks/b.js answered veto: no. Address it before you finish."),
        2,
    ),
    (
        "a correct within its budget",
        [CORRECT],
        Gate(
            refusal=Refusal(
                "archmax_advance rejected by after hook hooks/a.js (correct): cite it. "
                "Address it, then advance again.",
                "hook.correct",
            )
        ),
        Completion(
            note="[after] hook hooks/a.js answered correct: cite it. Address it before you finish."
        ),
        1,
    ),
    (
        "a hook that could not run",
        [hooks.execution_error("boom")],
        Gate(failure="after hook hooks/a.js of 'done' failed: boom"),
        Completion(failure="after hook hooks/a.js of 'done' failed: boom"),
        1,
    ),
]


@pytest.mark.parametrize(
    ("answers", "gate", "completion", "ran"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
async def test_an_advance_and_a_completion_read_the_same_ladder(
    answers: list[HookVerdict], gate: Gate, completion: Completion, ran: int
) -> None:
    advancing = Stubbed(answers)
    assert await advancing.gate_advance("done", "done", "finished") == gate
    assert advancing.calls == [("after", "done", i, "done", "finished") for i in range(ran)]
    finishing = Stubbed(answers)
    assert await finishing.at_completion("done") == completion
    assert finishing.calls == [("after", "done", i, None, None) for i in range(ran)]


async def test_corrections_are_spent_per_hook_and_exhausted_ones_fail_the_turn() -> None:
    exhausted = "corrections exhausted for after hook hooks/a.js of 'done' (max_iterations: 1)"
    advancing = Stubbed([CORRECT, CORRECT])
    assert (await advancing.gate_advance("done", "done", None)).refusal is not None
    assert advancing.session.hook_corrections == {"after#0": 1}
    assert await advancing.gate_advance("done", "done", None) == Gate(
        failure=f"{exhausted}: cite it"
    )
    finishing = Stubbed([CORRECT, CORRECT])
    assert (await finishing.at_completion("done")).note is not None
    assert await finishing.at_completion("done") == Completion(failure=f"{exhausted}: cite it")
    assert finishing.session.hook_corrections == {"after#0": 1}


async def test_a_completion_outside_a_terminal_state_runs_no_after_hook() -> None:
    runner = Stubbed([hooks.veto("never asked")])
    assert await runner.at_completion("review") == Completion()
    assert runner.calls == []
