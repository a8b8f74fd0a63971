"""Whatever ``validate`` accepts, ``run`` can start: the largest spec the limits allow starts a
session on the real dev server, and one a little larger is refused, typed, before any session.

The spec is built at the limits: 64-character slugs and trigger id, titles, descriptions and
instructions at their maximum lengths, a before hook whose source is large, a callee whose
spec rides along as a delegate, and as many full states as fit under the session budget.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from archmax_temporal.client.loader import (
    SESSION_START_MAX_BYTES,
    load_delegates,
    load_workflow,
    session_start_sizes,
)
from archmax_temporal.client.testing.validate import validate_workflow
from archmax_temporal.workflows.errors import SpecValidationError
from archmax_temporal.workflows.spec import (
    MAX_DESCRIPTION_LENGTH,
    MAX_INSTRUCTIONS_LENGTH,
    MAX_SLUG_LENGTH,
    MAX_STATES,
    MAX_TITLE_LENGTH,
)
from tests.support.agents import Scripted, running_agent, write_workflow

SLUG = "w" + "-x" * ((MAX_SLUG_LENGTH - 1) // 2)
"""The workflow: a 63-character slug (kebab-case cannot end in a dash)."""

ENTRY = "s" * MAX_SLUG_LENGTH
TRIGGER = "t" * MAX_SLUG_LENGTH
CALLEE = "c" * MAX_SLUG_LENGTH

HOOK = """\
import { ok, defineHook } from "@archmax-ai/harness/sandbox";

export default defineHook(async () => ok());
""" + "".join(f"// {'h' * 96}\n" for _ in range(200))  # some 20 KB of source

PLAYBOOK = json.dumps({"rules": [{"reply": {"content": "Answered at the limits."}}]})


def _text(length: int, word: str = "limit") -> str:
    """Prose of exactly ``length`` characters."""
    return ((word + " ") * (length // (len(word) + 1) + 1))[:length].strip().ljust(length, ".")


def _filler(index: int, budget: int | None = None) -> dict[str, object]:
    """A state at every field's limit; with ``budget``, its texts hold only that many
    characters in all (filled in order: instructions, summary, edge, title)."""
    limits = [MAX_INSTRUCTIONS_LENGTH, MAX_DESCRIPTION_LENGTH, MAX_DESCRIPTION_LENGTH]
    limits.append(MAX_TITLE_LENGTH)
    lengths = []
    for limit in limits:
        take = limit if budget is None else max(1, min(limit, budget))
        budget = None if budget is None else budget - take
        lengths.append(take)
    instructions, summary, edge, title = lengths
    return {
        "title": _text(title, "title"),
        "summary": _text(summary, "summary"),
        "instructions": _text(instructions, f"step{index}"),
        "transitions": [{"to": ENTRY, "description": _text(edge, "edge")}],
    }


def _spec(states: int, extra: int = 4) -> str:
    """The caller with ``states`` full filler states and one holding ``extra`` characters,
    so its size can be tuned to the byte."""
    spec: dict[str, object] = {
        "title": _text(MAX_TITLE_LENGTH, "workflow"),
        "instructions": _text(MAX_INSTRUCTIONS_LENGTH, "root"),
        "states": {
            ENTRY: {
                "title": _text(MAX_TITLE_LENGTH, "entry"),
                "triggers": {"manual": None, TRIGGER: {"description": _text(500, "fires")}},
                "instructions": "Answer in one sentence.",
                "before": [{"script": "hooks/check.js"}],
                "tools": {"allow": [f"archmax_workflow_{CALLEE}"]},
            },
            **{f"{'f' * (MAX_SLUG_LENGTH - 3)}{n:03d}": _filler(n) for n in range(states)},
            "p" * MAX_SLUG_LENGTH: _filler(states, extra),
        },
    }
    return json.dumps(spec)  # JSON is YAML


def _callee() -> str:
    return json.dumps(
        {
            "title": _text(MAX_TITLE_LENGTH, "callee"),
            "instructions": _text(MAX_INSTRUCTIONS_LENGTH, "callee"),
            "states": {"do": {"triggers": {"manual": None}, "instructions": "Do it."}},
        }
    )


def _root(tmp_path: Path, spec: str) -> Path:
    root = tmp_path / "root"
    directory = write_workflow(root, SLUG, spec)
    (directory / "hooks").mkdir(exist_ok=True)
    (directory / "hooks" / "check.js").write_text(HOOK)
    write_workflow(root, CALLEE, _callee())
    return root


def _total(root: Path) -> int:
    loaded = load_workflow(root, SLUG)
    return session_start_sizes(loaded, load_delegates(root, loaded, check_size=False))["total"]


def _largest(tmp_path: Path) -> tuple[Path, int]:
    """The root whose workflow starts with the most bytes the budget allows, and that size.

    Every character of the texts is one byte of the serialised input, so the partial state
    takes up exactly what the full ones leave.
    """
    empty = _total(_root(tmp_path, _spec(0)))
    per_state = _total(_root(tmp_path, _spec(1))) - empty
    states = min(MAX_STATES - 2, (SESSION_START_MAX_BYTES - empty) // per_state)
    base = _total(_root(tmp_path, _spec(states)))
    root = _root(tmp_path, _spec(states, 4 + SESSION_START_MAX_BYTES - base))
    return root, _total(root)


async def test_the_largest_spec_validate_accepts_starts_a_session(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    root, size = _largest(tmp_path)
    assert size == SESSION_START_MAX_BYTES
    report = validate_workflow(root, SLUG)
    assert report.valid, [d.message for d in report.errors]
    async with running_agent(client, task_queue, root, SLUG, scripted(PLAYBOOK)) as agent:
        assert set(agent.delegates) == {CALLEE}
        outcome = await agent.workflow.send(None, "Hello at the limits.")
        history = await agent.handle(outcome.session_id).fetch_history()
    assert (outcome.kind, outcome.state) == ("completed", ENTRY)
    assert outcome.reply == "Answered at the limits."
    started = history.events[0].workflow_execution_started_event_attributes
    assert sum(len(p.data) for p in started.input.payloads) > SESSION_START_MAX_BYTES - 1000


async def test_a_spec_just_past_the_budget_is_refused_by_validate_and_run(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    largest, _ = _largest(tmp_path / "largest")
    spec = (largest / "workflows" / SLUG / "workflow.yaml").read_text()
    root = _root(tmp_path, spec.replace("Answer in one sentence.", "Answer in one sentence!!", 1))
    [error] = validate_workflow(root, SLUG).errors
    assert f"the limit is {SESSION_START_MAX_BYTES:,} bytes" in error.message
    with pytest.raises(SpecValidationError) as caught:
        async with running_agent(client, task_queue, root, SLUG, scripted(PLAYBOOK)):
            pass
    assert caught.value.issues == [error.message]
