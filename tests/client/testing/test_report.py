"""The ``archmax test`` view: stderr narration and stdout results, rendered from CaseResults
into plain text streams (colour only for a TTY without NO_COLOR)."""

from __future__ import annotations

import io
import json
from typing import Any

from archmax_temporal.client.testing.report import (
    PLAIN,
    Style,
    TestView,
    case_json,
    flow_line,
    json_document,
    summary_line,
    use_color,
    verdict_lines,
)
from archmax_temporal.client.testing.results import (
    AssertionRecord,
    CaseResult,
    RunTestsResult,
    Verdict,
    exit_code_for,
    reduce_verdict,
)


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def record(kind: str, status: Any, step: int, **fields: Any) -> AssertionRecord:
    return AssertionRecord(kind=kind, status=status, step=step, **fields)


def case(
    case_id: str,
    title: str,
    records: list[AssertionRecord] | None = None,
    *,
    error: str | None = None,
    skip: str | None = None,
    session: str | None = "test-default-x",
) -> CaseResult:
    records = records or []
    verdict = Verdict(status="skipped") if skip is not None else reduce_verdict(records, error)
    return CaseResult(
        id=case_id,
        title=title,
        description=f"{title}.",
        session_id=None if skip is not None else session,
        verdict=verdict,
        records=records,
        skip_reason=skip,
        error=error,
    )


PASSED = case(
    "refund-approved",
    "Refund approved after human review",
    [
        record("parked", "passed", 1),
        record(
            "grade.closedQA",
            "passed",
            7,
            threshold=0.7,
            score=0.82,
            detail="tells the customer: it does",
        ),
    ],
)
FAILED = case(
    "refund-rejected",
    "Refund rejected then resubmitted",
    [
        record("parked", "passed", 1),
        record("reply", "failed", 2, detail='no assistant message matches "/approv/i"'),
        record(
            "grade.closedQA",
            "failed",
            3,
            threshold=0.7,
            score=0.4,
            detail="names the order: it does not",
        ),
        record("reachedState", "failed", 4, detail="no committed step entered refund-review"),
        record("succeeded", "not-executed", 6),
        record("trail", "not-executed", 7),
    ],
)
SKIPPED = case("later/wip", "Work in progress", skip="waiting on the API")


def run_of(*results: CaseResult, discovered: int | None = None) -> RunTestsResult:
    return RunTestsResult(
        results=list(results),
        exit_code=exit_code_for(list(results)),
        discovered=len(results) if discovered is None else discovered,
    )


class TestColour:
    def test_plain_when_the_stream_is_not_a_tty(self) -> None:
        """A pipe or file gets no escape codes."""
        assert use_color(io.StringIO(), env={}) is False

    def test_colour_on_a_tty(self) -> None:
        """A TTY with NO_COLOR unset gets colour."""
        assert use_color(TTY(), env={}) is True

    def test_no_color_wins_over_a_tty(self) -> None:
        """NO_COLOR with any non-empty value turns colour off; an empty one does not."""
        assert use_color(TTY(), env={"NO_COLOR": "1"}) is False
        assert use_color(TTY(), env={"NO_COLOR": ""}) is True

    def test_a_tty_view_writes_escape_codes_and_a_plain_one_none(self) -> None:
        """The view picks its style from its stderr stream."""
        coloured, plain = TTY(), io.StringIO()
        TestView(coloured, io.StringIO(), env={}).case_finished(PASSED)
        TestView(plain, io.StringIO(), env={}).case_finished(PASSED)
        assert coloured.getvalue().startswith("\x1b[32m✔\x1b[0m Refund approved")
        assert "\x1b[" not in plain.getvalue()


class TestStateFlow:
    def test_trigger_arrival_and_transitions_read_like_archmax_run(self) -> None:
        """▸ for a trigger arrival, → for committed steps, kind in parentheses."""
        assert flow_line(None, "refund-request", "trigger", reason="manual") == (
            "  ▸ refund-request  (trigger manual)"
        )
        assert flow_line("refund-request", "refund-review", "agent") == (
            "  refund-request → refund-review  (agent)"
        )
        assert flow_line("refund-review", "refund-closed", "human", reason="looks right") == (
            "  refund-review → refund-closed  (human) — looks right"
        )
        assert flow_line(None, "triage", "on_error") == "  → triage  (on_error)"

    def test_coloured_flow_line(self) -> None:
        """In colour the target state is bold and the arrow and kind dimmed."""
        line = flow_line("a", "b", "agent", Style(color=True))
        assert line == "  \x1b[2ma\x1b[0m \x1b[2m→\x1b[0m \x1b[1mb\x1b[0m  \x1b[2m(agent)\x1b[0m"

    def test_the_hook_draws_only_the_current_cases_flow(self) -> None:
        """A late state event of a case that already ended never paints under the next one."""
        err = io.StringIO()
        view = TestView(err, io.StringIO(), style=PLAIN)
        view.case_started("one", "First")
        view.on_state("one", None, "start", "trigger")
        view.case_finished(case("one", "First"))
        view.case_started("two", "Second")
        view.on_state("one", "start", "late", "agent")
        view.on_state("two", None, "start", "trigger", "manual")
        assert err.getvalue().split("\n") == [
            "",
            "◆ case one — First",
            "  ▸ start  (trigger)",
            "✔ First",
            "",
            "◆ case two — Second",
            "  ▸ start  (trigger manual)",
            "",
        ]


class TestVerdicts:
    def test_passed_case_shows_its_grade_score(self) -> None:
        """A passing grade is otherwise invisible: its score is printed under the verdict."""
        assert verdict_lines(PASSED) == [
            "✔ Refund approved after human review",
            "    grade 0.82 ≥ 0.7",
        ]

    def test_failed_case_lists_failures_grades_and_not_executed(self) -> None:
        """Failures in verdict order, then grade scores, then the not-executed count."""
        assert verdict_lines(FAILED) == [
            "✖ Refund rejected then resubmitted",
            '    ✖ reply: no assistant message matches "/approv/i"',
            "    ✖ grade.closedQA: names the order: it does not (score 0.4 < 0.7)",
            "    ✖ reachedState: no committed step entered refund-review",
            "    grade 0.4 < 0.7",
            "    ○ 2 assertions not executed",
        ]

    def test_skipped_case_names_its_reason(self) -> None:
        """○ <title> (skipped: reason)."""
        assert verdict_lines(SKIPPED) == ["○ Work in progress (skipped: waiting on the API)"]

    def test_a_died_case_leads_with_its_error_kept_on_its_lines(self) -> None:
        """The terminating error comes first; a multi-line one stays indented together."""
        died = case(
            "bad-trigger",
            "Unknown trigger",
            [record("succeeded", "not-executed", 1)],
            error="UnknownTriggerError: no trigger 'nope'\ndeclared: manual, email",
        )
        assert verdict_lines(died) == [
            "✖ Unknown trigger",
            "    ✖ UnknownTriggerError: no trigger 'nope'",
            "      declared: manual, email",
            "    ○ 1 assertion not executed",
        ]

    def test_an_unrun_grade_prints_no_score(self) -> None:
        """A not-executed grade has no score to show; only the count covers it."""
        halted = case(
            "halted",
            "Halted early",
            [
                record("parked", "failed", 1, detail="the turn completed"),
                record("grade.closedQA", "not-executed", 2, threshold=0.7),
            ],
        )
        assert verdict_lines(halted) == [
            "✖ Halted early",
            "    ✖ parked: the turn completed",
            "    ○ 1 assertion not executed",
        ]


class TestSuiteOutput:
    def test_a_whole_run_on_both_streams(self) -> None:
        """stderr: header, cases, summary naming each case; stdout: the one counts line."""
        err, out = io.StringIO(), io.StringIO()
        view = TestView(err, out, style=PLAIN)
        view.session_started("order-lookup", "/srv/support", None)
        for result in (PASSED, FAILED, SKIPPED):
            view.case_started(result.id, result.title)
            view.case_finished(result)
        view.suite_finished("order-lookup", run_of(PASSED, FAILED, SKIPPED))
        assert out.getvalue() == "1 passed, 1 failed, 1 skipped\n"
        assert err.getvalue().split("\n") == [
            "workflow  order-lookup  ·  root /srv/support  ·  model unset",
            "",
            "◆ case refund-approved — Refund approved after human review",
            *verdict_lines(PASSED),
            "",
            "◆ case refund-rejected — Refund rejected then resubmitted",
            *verdict_lines(FAILED),
            "",
            "◆ case later/wip — Work in progress",
            *verdict_lines(SKIPPED),
            "",
            "◆ summary  1 passed, 1 failed, 1 skipped",
            "  ✖ refund-rejected — Refund rejected then resubmitted",
            "  ✔ refund-approved — Refund approved after human review",
            "  ○ later/wip — Work in progress",
            "",
        ]

    def test_session_header_names_the_model(self) -> None:
        """The configured model is named; only its absence reads unset."""
        err = io.StringIO()
        TestView(err, io.StringIO(), style=PLAIN).session_started("wf", "/r", "gpt-x")
        assert err.getvalue() == "workflow  wf  ·  root /r  ·  model gpt-x\n"

    def test_disabled_suite_is_one_line_on_each_stream(self) -> None:
        """A disabled workflow: stdout says suite skipped — disabled, stderr one line."""
        err, out = io.StringIO(), io.StringIO()
        run = RunTestsResult(exit_code=0, discovered=3, skipped="disabled")
        TestView(err, out, style=PLAIN).suite_finished("retired", run)
        assert out.getvalue() == "suite skipped — disabled\n"
        assert err.getvalue() == "○ suite skipped — workflow 'retired' is disabled; no case ran\n"
        assert summary_line(run) == "suite skipped — disabled"

    def test_no_match_is_named_with_the_discovered_count(self) -> None:
        """A filter matching nothing says what it looked through."""
        err = io.StringIO()
        TestView(err, io.StringIO(), style=PLAIN).no_match("requester", 13)
        assert err.getvalue() == "✖ no cases matched 'requester' (13 discovered)\n"

    def test_empty_run_counts_zero(self) -> None:
        """An empty suite still prints its counts line."""
        assert summary_line(run_of()) == "0 passed, 0 failed, 0 skipped"


class TestJsonDocument:
    def test_document_shape(self) -> None:
        """{workflow, results, exitCode, discovered}; no skipped key when the suite ran."""
        out = io.StringIO()
        run = run_of(PASSED, FAILED, discovered=5)
        TestView(io.StringIO(), out, style=PLAIN).suite_finished("wf", run, as_json=True)
        document = json.loads(out.getvalue())
        assert document == json_document("wf", run)
        assert list(document) == ["workflow", "results", "exitCode", "discovered"]
        assert (document["workflow"], document["exitCode"], document["discovered"]) == (
            "wf",
            1,
            5,
        )
        assert [r["id"] for r in document["results"]] == ["refund-approved", "refund-rejected"]

    def test_skipped_is_present_only_for_a_disabled_suite(self) -> None:
        """skipped: "disabled" with no results."""
        run = RunTestsResult(exit_code=0, discovered=2, skipped="disabled")
        assert json_document("wf", run) == {
            "workflow": "wf",
            "results": [],
            "exitCode": 0,
            "discovered": 2,
            "skipped": "disabled",
        }

    def test_case_fields_are_camel_case_and_unset_ones_absent(self) -> None:
        """sessionId/skipReason/error appear only when set; threshold is always on a record."""
        assert case_json(PASSED) == {
            "id": "refund-approved",
            "title": "Refund approved after human review",
            "description": "Refund approved after human review.",
            "sessionId": "test-default-x",
            "verdict": {"status": "passed", "failures": []},
            "records": [
                {"kind": "parked", "status": "passed", "threshold": None, "step": 1},
                {
                    "kind": "grade.closedQA",
                    "status": "passed",
                    "threshold": 0.7,
                    "score": 0.82,
                    "detail": "tells the customer: it does",
                    "step": 7,
                },
            ],
        }
        skipped = case_json(SKIPPED)
        assert skipped["skipReason"] == "waiting on the API"
        assert "sessionId" not in skipped and "error" not in skipped
        assert skipped["verdict"] == {"status": "skipped", "failures": []}

    def test_record_keys_keep_the_record_shapes_order(self) -> None:
        """kind, status, threshold, score?, detail?, step: in the order the shape lists them."""
        dumped = case_json(FAILED)["records"]
        assert list(dumped[0]) == ["kind", "status", "threshold", "step"]
        assert list(dumped[2]) == ["kind", "status", "threshold", "score", "detail", "step"]
