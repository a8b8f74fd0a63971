"""The testing seed and the sessions seed where they need no server: a case that drives
nothing is still heard of, a runner error loses no case, a grade whose endpoint fails is a
record, ``archmax_wait``'s arguments, the CLI's session paths, listings and JSON."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import openai
import pytest

from archmax_temporal.activities.store_errors import PathEscapeError, ReadOnlyPathError
from archmax_temporal.client.cli.app import run_cli
from archmax_temporal.client.cli.render import camel_json, summary_detail, summary_line
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.host import Agent
from archmax_temporal.client.sessions_surface import SessionsSurface
from archmax_temporal.client.testing import runner
from archmax_temporal.client.testing.assertions import TurnView
from archmax_temporal.client.testing.cases import parse_case
from archmax_temporal.client.testing.discovery import DiscoveredCase
from archmax_temporal.client.testing.report import TestView
from archmax_temporal.client.testing.results import AssertionRecord, CaseResult
from archmax_temporal.client.testing.runner import run_case
from archmax_temporal.client.testing.steps import GradeStep
from archmax_temporal.client.testing.validate import validate_workflow
from archmax_temporal.workflows import runtime_calls
from archmax_temporal.workflows.context import SessionContext
from archmax_temporal.workflows.models import (
    DecisionEdge,
    Message,
    PendingDecision,
    SessionInput,
    SessionState,
    SessionSummary,
    SessionView,
    TrailStep,
)
from archmax_temporal.workflows.spec import parse_spec

NOW = datetime(2026, 12, 3, tzinfo=UTC)


class _Heard:
    """A listener that keeps what it heard, and renders it through the CLI's test view."""

    def __init__(self) -> None:
        self.err = io.StringIO()
        self.view = TestView(self.err, io.StringIO())
        self.started: list[tuple[str, str, str]] = []

    def case_started(self, case_id: str, title: str, session_id: str) -> None:
        self.started.append((case_id, title, session_id))
        self.view.case_started(case_id, title)

    def trail_step(self, case_id: str, from_state: str | None, step: TrailStep) -> None:
        self.view.on_state(case_id, from_state, step.to, step.kind, step.reason)

    def case_finished(self, result: CaseResult) -> None:
        self.view.case_finished(result)


def _case(tmp_path: Path, name: str, text: str) -> DiscoveredCase:
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    path = tests / f"{name}.test.yaml"
    path.write_text(text)
    return DiscoveredCase(id=name, path=path)


NO_AGENT = cast(Agent, None)  # a case that drives nothing never touches its agent


async def test_a_skipped_case_prints_its_header_and_verdict_with_the_reason(
    tmp_path: Path,
) -> None:
    """Seed: "Each case gets a styled verdict line (✔ passed / ✖ failed / ○ skipped)", under
    its dimmed case header; ``skip: <reason>`` yields a skipped verdict that drives nothing."""
    case = _case(
        tmp_path,
        "orders",
        "title: Orders API case\ndescription: d\nskip: waiting on the orders API\n"
        "steps:\n  - send: hi\n",
    )
    heard = _Heard()
    result = await run_case(
        case, NO_AGENT, tests_dir=tmp_path / "tests", session_id="s-1", listener=heard
    )
    assert result.verdict.status == "skipped"
    lines = heard.err.getvalue().splitlines()
    assert "◆ case orders — Orders API case" in lines
    assert "○ Orders API case (skipped: waiting on the orders API)" in lines


async def test_a_schema_invalid_case_prints_its_verdict_naming_the_unknown_key(
    tmp_path: Path,
) -> None:
    """Seed: "The schema fails closed. An unknown top-level key or step key is an error …
    so a typo'd reachedstate: cannot silently pass." It is reported as a failed case."""
    case = _case(
        tmp_path,
        "typo",
        "title: t\ndescription: d\nsteps:\n  - send: hi\n  - reachedstate: answer\n",
    )
    heard = _Heard()
    result = await run_case(
        case, NO_AGENT, tests_dir=tmp_path / "tests", session_id="s-2", listener=heard
    )
    assert result.verdict.status == "failed"
    text = heard.err.getvalue()
    assert "◆ case typo — typo" in text
    assert "✖ typo" in text
    assert "steps[1].reachedstate: unknown step key" in text
    assert '(did you mean "reachedState"?)' in text


async def test_a_runner_error_in_one_case_is_that_cases_error(tmp_path: Path) -> None:
    """A runner error in one case never loses the others: the case dies with the error."""
    case = _case(tmp_path, "ok", "title: t\ndescription: d\nsteps:\n  - send: hi\n")

    class Broken:
        @property
        def loaded(self) -> Any:
            raise RuntimeError("the machinery broke")

    heard = _Heard()
    result = await run_case(
        case,
        cast(Agent, Broken()),
        tests_dir=tmp_path / "tests",
        session_id="s-3",
        listener=heard,
    )
    assert result.verdict.status == "failed"
    assert result.error == "the case runner failed: RuntimeError: the machinery broke"
    assert "✖ t" in heard.err.getvalue()


def test_a_trail_reason_that_is_no_regex_validates(tmp_path: Path) -> None:
    """Seed: /pattern/flags is compiled in three places only; a trail reason is plain text,
    so ``reason: "/(/"`` validates (and matches as a substring)."""
    directory = tmp_path / "workflows" / "w"
    (directory / "tests").mkdir(parents=True)
    (directory / "workflow.yaml").write_text(
        "instructions: i\nstates:\n  a:\n    triggers: { manual: }\n"
    )
    (directory / "tests" / "t.test.yaml").write_text(
        'title: t\ndescription: d\nsteps:\n  - send: hi\n  - trail: { reason: "/(/", count: 0 }\n'
    )
    assert validate_workflow(tmp_path, "w").valid


async def test_a_grading_endpoint_error_is_a_failed_grade_record_and_the_case_goes_on() -> None:
    """Seed: grade is a content assertion ("the content assertions let the case carry on"):
    an endpoint that fails records the grade failed, score 0, the error as its detail."""
    document = parse_case(
        "g.test.yaml",
        "title: t\ndescription: d\nsteps:\n  - send: hi\n"
        "  - grade: { closedQA: names the order, atLeast: 0.7 }\n",
    )
    step = document.steps[1]
    assert isinstance(step, GradeStep)

    async def unreachable(_step: GradeStep, _turn: TurnView) -> AssertionRecord:
        raise openai.APIConnectionError(request=httpx.Request("POST", "http://judge/v1"))  # type: ignore[arg-type]

    summary = SessionSummary(
        session_id="s",
        workflow="w",
        status="completed",
        classification="finished",
        spec_hash="h",
    )
    turn = TurnView(view=SessionView(summary=summary, transcript=[], trail=[]), turn_start=0)
    [record] = await runner._assert(step, turn, unreachable)
    assert (record.kind, record.status, record.score, record.threshold) == (
        "grade.closedQA",
        "failed",
        0,
        0.7,
    )
    assert record.detail is not None
    assert record.detail.startswith("names the order: the grading model failed: Connection")


# --- archmax_wait's arguments ---------------------------------------------------------------

WAIT_SPEC = parse_spec(
    {"states": {"check": {"triggers": {"manual": None}, "budget": {"maxParks": 5}}}}
)


def _context() -> SessionContext:
    session = SessionInput(session_id="s", workflow="w", spec=WAIT_SPEC, spec_hash="h")
    ctx = SessionContext(session)
    ctx.session = SessionState(status="running", state="check")
    return ctx


@pytest.mark.parametrize("reason", ["", "   ", None, 7])
def test_an_empty_wait_reason_is_refused(reason: Any) -> None:
    """Seed: archmax_wait({ reason }): a park names what it waits for; without a reason the
    call is refused and nothing parks."""
    answer, park, failure = runtime_calls.wait(_context(), {"reason": reason}, NOW, parking=False)
    assert (answer.status, park, failure) == ("error", None, None)
    assert "`reason` must be a non-empty string" in answer.content


@pytest.mark.parametrize("until", ["", "  ", "soon", 5])
def test_an_until_that_does_not_parse_empty_included_is_a_tool_error(until: Any) -> None:
    """Seed: "An until the runtime cannot parse is a tool error, and the park is refused.
    Parking without the schedule the agent asked for would leave a session waiting on a
    wake-up that never comes." An empty until asks for a schedule it does not give."""
    answer, park, _ = runtime_calls.wait(
        _context(), {"reason": "the posting", "until": until}, NOW, parking=False
    )
    assert (answer.status, park) == ("error", None)
    assert "Not parked." in answer.content


def test_an_absent_until_parks_with_no_schedule_and_a_relative_one_is_made_absolute() -> None:
    _, absent, _ = runtime_calls.wait(_context(), {"reason": "r"}, NOW, parking=False)
    _, null, _ = runtime_calls.wait(_context(), {"reason": "r", "until": None}, NOW, parking=False)
    _, daily, _ = runtime_calls.wait(_context(), {"reason": "r", "until": "1d"}, NOW, parking=False)
    assert absent is not None and absent.resume_at is None
    assert null is not None and null.resume_at is None
    assert daily is not None and daily.resume_at == datetime(2026, 12, 4, tzinfo=UTC)


# --- the CLI --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "w", "hi", "--session", "chat-42", "--session-path", "a..b"],
        ["run", "w", "hi", "--session", "chat-42", "--session-path", ""],
        ["run", "w", "hi", "--session-path", ""],
        ["run", "w", "hi", "--session-path", "${{conversation_id}}"],
    ],
)
def test_a_malformed_session_path_is_rejected_wherever_it_is_written(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Seed: "A malformed path is rejected wherever it is written", beside --session too,
    and an empty one: a usage error, exit 2, before anything is touched."""
    assert run_cli(argv) == 2
    assert "invalid --session-path" in capsys.readouterr().err


def _awaiting_decision() -> SessionSummary:
    return SessionSummary(
        session_id="rev-1",
        workflow="review",
        status="awaiting_decision",
        classification="open",
        state="review",
        spec_hash="h",
        pending_decision=PendingDecision(
            state="review",
            seq=1,
            transitions=[
                DecisionEdge(to="done", description="Approved.", type="approve"),
                DecisionEdge(to="draft", description="Needs more.", type="refine"),
            ],
            created_at=NOW,
        ),
    )


def test_sessions_shows_the_decision_context_of_a_session_awaiting_a_decision() -> None:
    """``archmax sessions`` lists a session awaiting a decision with the state, its edges and
    the agent's handoff; ``archmax sessions <id>`` adds each edge's description."""
    handoff = "Please review the refund for ORD-1001.\nIt is within policy."
    line = summary_line(_awaiting_decision(), handoff)
    assert line.splitlines() == [
        "rev-1  awaiting_decision  open  state=review  awaiting=review  vars=",
        "    decision at review: done, draft",
        "    handoff: Please review the refund for ORD-1001.",
    ]
    detail = summary_detail(_awaiting_decision(), handoff).splitlines()
    assert "awaiting  decision at review: done, draft" in detail
    assert "  → done (approve): Approved." in detail
    assert "  → draft (refine): Needs more." in detail
    assert detail[detail.index("handoff") + 1 :][:2] == [
        "  Please review the refund for ORD-1001.",
        "  It is within policy.",
    ]


def test_every_json_the_cli_prints_is_camel_case() -> None:
    """One convention for every JSON document the CLI prints: archmax's camelCase
    (``sessionId``, ``pendingDecision``, ``createdAt``); variable names stay data."""
    data = camel_json(_awaiting_decision())
    assert data["sessionId"] == "rev-1"
    assert data["pendingDecision"]["createdAt"] == "2026-12-03T00:00:00Z"
    assert "session_id" not in data and "spec_hash" not in data
    assert camel_json({"order_id": Message(role="tool", tool_call_id="c")}) == {
        "order_id": {
            "role": "tool",
            "content": None,
            "toolCalls": [],
            "toolCallId": "c",
            "name": None,
            "note": None,
            "status": None,
            "rule": None,
            "state": None,
        }
    }


@pytest.mark.parametrize(
    ("path", "error"),
    [("skills/x/notes.md", ReadOnlyPathError), ("artifacts/trail.json", ReadOnlyPathError)],
)
async def test_a_refused_seed_is_a_typed_error_naming_the_path(
    tmp_path: Path, path: str, error: type[Exception]
) -> None:
    """``sessions.seed`` refuses mounts and runtime areas with the typed error (its class,
    its path), not the wire's ``ApplicationError``."""
    config = RuntimeConfig(root=tmp_path, store=tmp_path / "sessions")
    agent = SimpleNamespace(config=config)
    surface = SessionsSurface(cast(Agent, agent))
    with pytest.raises(error) as raised:
        await surface.seed("s-1", {path: "x"})
    assert isinstance(raised.value, (ReadOnlyPathError, PathEscapeError))
    assert getattr(raised.value, "path", None)
