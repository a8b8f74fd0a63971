"""The grade judge: the evidence a graded turn is shown, how its verdict is read, and the
grading call through the real ``openai`` client against the scripted model server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.testing.grader import (
    NO_JUDGE_HINT,
    NO_VERDICT_REASON,
    REASK_PROMPT,
    GradeVerdict,
    MessageEntry,
    RuntimeEntry,
    ToolEntry,
    build_grader_evidence,
    cap,
    grade,
    grade_record,
    grade_step,
    no_judge_record,
    parse_verdict,
    render_evidence,
)
from archmax_temporal.client.testing.results import reduce_verdict
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.client.testing.steps import GradeStep
from archmax_temporal.workflows.models import Message, ToolCall
from archmax_temporal.workflows.spec import JudgeSpec

Scripted = Callable[[str], ScriptedModelServer]


def assistant(content: str | None = None, *calls: tuple[str, str, str]) -> Message:
    return Message(
        role="assistant",
        content=content,
        tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in calls],
    )


def result(call_id: str, content: str, status: Any = "ok", name: str = "read_file") -> Message:
    return Message(role="tool", tool_call_id=call_id, name=name, content=content, status=status)


def note(kind: Any, text: str, call_id: str = "note_1") -> list[Message]:
    """Both halves of a runtime note, as the session writes them."""
    call = ToolCall(id=call_id, name="archmax_note", arguments=json.dumps({"kind": kind}))
    return [
        Message(role="assistant", tool_calls=[call], note=kind),
        Message(
            role="tool",
            tool_call_id=call_id,
            name="archmax_note",
            content=text,
            note=kind,
            status="ok",
        ),
    ]


def step(criterion: str = "names the order", at_least: float = 0.7, index: int = 4) -> GradeStep:
    return GradeStep.model_validate({"closedQA": criterion, "atLeast": at_least, "index": index})


def record_section(rendered: str) -> list[str]:
    """The lines between the record heading and the blank line before the reply heading."""
    lines = rendered.split("\n")
    assert lines[0] == "What the assistant did, in order:"
    end = lines.index("Final reply to the user:")
    assert lines[end - 1] == ""
    return lines[1 : end - 1]


class TestEvidenceComposition:
    def test_record_interleaves_messages_notes_and_calls_in_order(self) -> None:
        """Messages, notes and calls appear as they happened; user messages stay out."""
        transcript = [
            Message(role="user", content="refund ORD-1001 please"),
            assistant("Let me look.", ("c1", "read_file", '{"file_path": "orders.json"}')),
            result("c1", '[{"id": "ORD-1001"}]'),
            *note("decision", "[decision] the reviewer chose 'refund-closed' at 'refund-review'."),
            assistant("Your refund for ORD-1001 is approved."),
        ]
        evidence = build_grader_evidence(transcript)
        assert evidence.record == [
            MessageEntry("Let me look."),
            ToolEntry(
                "read_file", '{"file_path": "orders.json"}', '[{"id": "ORD-1001"}]', "completed"
            ),
            RuntimeEntry("decision", "the reviewer chose 'refund-closed' at 'refund-review'."),
        ]
        assert evidence.reply == "Your refund for ORD-1001 is approved."

    def test_statuses_map_ok_error_blocked_and_unanswered(self) -> None:
        """ok → completed, error → failed, blocked → rejected, a call without result → pending."""
        transcript = [
            assistant(
                None,
                ("a", "read_file", "{}"),
                ("b", "write_file", "{}"),
                ("c", "delete_file", "{}"),
                ("d", "grep", "{}"),
            ),
            result("a", "data", "ok"),
            result("b", "disk full", "error"),
            result("c", "not allowed in review", "blocked"),
        ]
        rendered = render_evidence(build_grader_evidence(transcript))
        assert record_section(rendered) == [
            "1. [tool] read_file input={} → completed output=data",
            "2. [tool] write_file input={} → failed output=disk full",
            "3. [tool] delete_file input={} → rejected output=not allowed in review",
            "4. [tool] grep input={} → pending (no output recorded)",
        ]

    def test_a_refused_runtime_call_is_rejected_not_failed(self) -> None:
        """A refused ``archmax_advance`` (an undeclared edge, an unset ``requires``, a hook's
        veto) is a refusal the model read: the evidence calls it rejected. A tool that ran and
        errored stays failed, and so does an advance whose failure failed the turn."""
        transcript = [
            assistant(
                None,
                ("a", "archmax_advance", '{"to": "nowhere"}'),
                ("b", "archmax_wait", '{"reason": ""}'),
                ("c", "archmax_advance", '{"to": "done"}'),
            ),
            result("a", "archmax_advance rejected: 'nowhere' is not a transition", "error"),
            result("b", "archmax_wait refused: `reason` must be a non-empty string.", "error"),
            result("c", "archmax_advance failed: hook hooks/x.js timed out", "error"),
        ]
        statuses = [
            line.split(" → ")[1].split()[0]
            for line in record_section(render_evidence(build_grader_evidence(transcript)))
        ]
        assert statuses == ["rejected", "rejected", "failed"]

    def test_a_mocked_output_appears_as_the_agent_saw_it(self) -> None:
        """A mock's value is the call's output like any other result."""
        transcript = [
            assistant(None, ("m", "read_file", '{"file_path": "orders.json"}')),
            result("m", "[]"),
            assistant("No orders found."),
        ]
        rendered = render_evidence(build_grader_evidence(transcript))
        assert record_section(rendered) == [
            '1. [tool] read_file input={"file_path": "orders.json"} → completed output=[]'
        ]
        assert rendered.endswith("Final reply to the user:\nNo orders found.")

    def test_a_reply_followed_by_calls_stays_in_the_record(self) -> None:
        """Only a reply that closed the turn leaves the record: 'said, then did' is kept."""
        transcript = [
            assistant("Approved.", ("x", "archmax_advance", '{"to": "done"}')),
            result("x", "advanced"),
        ]
        evidence = build_grader_evidence(transcript)
        assert evidence.record[0] == MessageEntry("Approved.")
        assert evidence.reply == "Approved."

    def test_runtime_notes_render_with_their_kind(self) -> None:
        """A note renders as [runtime:<kind>] with its text, its own prefix not repeated."""
        transcript = [*note("event", "[event] trigger 'email_reply' delivered"), assistant("ok")]
        assert record_section(render_evidence(build_grader_evidence(transcript))) == [
            "1. [runtime:event] trigger 'email_reply' delivered"
        ]

    def test_empty_turn_renders_placeholders(self) -> None:
        """A turn with nothing said or done still renders both labelled sections."""
        assert render_evidence(build_grader_evidence([])) == (
            "What the assistant did, in order:\n"
            "(no messages or tool calls recorded)\n\n"
            "Final reply to the user:\n(empty)"
        )


class TestEvidenceBounds:
    def test_a_value_over_800_chars_is_cut_and_marked(self) -> None:
        """Input, output and message values are each cut at 800 with …(+N chars)."""
        big_input = json.dumps({"q": "i" * 1000})
        transcript = [
            assistant("m" * 900, ("c", "grep", big_input)),
            result("c", "o" * 1234),
            assistant("done"),
        ]
        lines = record_section(render_evidence(build_grader_evidence(transcript)))
        assert lines[0] == "1. [message] " + "m" * 800 + "…(+100 chars)"
        assert lines[1] == (
            "2. [tool] grep input="
            + big_input[:800]
            + f"…(+{len(big_input) - 800} chars)"
            + " → completed output="
            + "o" * 800
            + "…(+434 chars)"
        )

    def test_cap_leaves_short_text_alone(self) -> None:
        """Exactly 800 characters is not cut."""
        assert cap("x" * 800) == "x" * 800
        assert cap("x" * 801) == "x" * 800 + "…(+1 chars)"

    def test_record_over_budget_drops_its_oldest_entries_behind_a_marker(self) -> None:
        """30 lines of 714 chars: 16 fit the 12,000 budget (16 x 715 = 11,440), 14 go."""
        transcript = [assistant(f"{i:02d}" + "a" * 698) for i in range(1, 31)]
        transcript.append(assistant("Done."))
        lines = record_section(render_evidence(build_grader_evidence(transcript)))
        assert lines[0] == "… 14 earlier entries omitted"
        assert len(lines) == 17
        assert lines[1] == "15. [message] 15" + "a" * 698
        assert lines[-1] == "30. [message] 30" + "a" * 698
        assert sum(len(line) + 1 for line in lines[1:]) <= 12_000

    def test_one_dropped_entry_is_named_in_the_singular(self) -> None:
        """The marker counts what it dropped, grammatically."""
        transcript = [assistant(f"{i:02d}" + "a" * 698) for i in range(1, 18)]
        transcript.append(assistant("Done."))
        lines = record_section(render_evidence(build_grader_evidence(transcript)))
        assert lines[0] == "… 1 earlier entry omitted"
        assert lines[1].startswith("2. [message] 02")

    def test_the_final_reply_is_never_cut(self) -> None:
        """A 50,000-character reply is rendered whole, whatever the record's bounds."""
        reply = "r" * 50_000
        transcript = [assistant("x" * 5000) for _ in range(40)] + [assistant(reply)]
        rendered = render_evidence(build_grader_evidence(transcript))
        assert rendered.endswith("Final reply to the user:\n" + reply)
        assert "earlier entries omitted" in rendered


class TestVerdictExtraction:
    def test_plain_json(self) -> None:
        """A bare JSON verdict is read; the model's own pass is kept apart from the score."""
        assert parse_verdict('{"score": 0.82, "pass": true, "reason": "names it"}') == (
            GradeVerdict(0.82, True, "names it")
        )

    def test_json_wrapped_in_prose(self) -> None:
        """Prose around the object, even prose holding braces, does not hide it."""
        raw = 'The reply {mentions} it. Verdict: {"score": 0.6, "pass": false, "reason": "r"}.'
        assert parse_verdict(raw) == GradeVerdict(0.6, False, "r")

    def test_json_in_a_code_fence(self) -> None:
        """A ```json fence is tolerated."""
        raw = 'Here:\n```json\n{"score": 1, "pass": true, "reason": "met {fully}"}\n```'
        assert parse_verdict(raw) == GradeVerdict(1.0, True, "met {fully}")

    def test_no_json_reads_nothing(self) -> None:
        """Prose alone, broken JSON, or an object without a numeric score is no verdict."""
        assert parse_verdict("I think it passes.") is None
        assert parse_verdict('{"score": 0.5, "reason": ') is None
        assert parse_verdict('{"verdict": "yes"} {"score": "high"}') is None

    def test_the_first_object_with_a_score_wins(self) -> None:
        """An object without score before the verdict is skipped."""
        raw = '{"note": "aside"} then {"score": 0.3, "reason": "a"} and {"score": 0.9}'
        assert parse_verdict(raw) == GradeVerdict(0.3, False, "a")

    def test_score_is_clamped_to_unit_interval(self) -> None:
        """Scores outside [0, 1] are clamped; a numeric string is read as a number."""
        assert parse_verdict('{"score": 1.7}') == GradeVerdict(1.0, False, "")
        assert parse_verdict('{"score": -2}') == GradeVerdict(0.0, False, "")
        assert parse_verdict('{"score": "0.25"}') == GradeVerdict(0.25, False, "")


def config_for(server: ScriptedModelServer, model: str | None = "env-model") -> ModelConfig:
    return ModelConfig(base_url=server.url, api_key="sk-test-not-a-secret", default_model=model)


PROSE_ONLY = """
default:
  content: "Looks good to me, the assistant did well."
"""

PROSE_THEN_JSON = """
rules:
  - when: {last_user: "/JSON only/"}
    reply:
      content: '{"score": 0.9, "pass": true, "reason": "named ORD-1001"}'
default:
  content: "It is approved, I would say."
"""

FENCED = """
default:
  content: "Sure.\\n```json\\n{\\"score\\": 0.4, \\"pass\\": true, \\"reason\\": \\"vague\\"}\\n```"
"""


class TestGradingCall:
    async def test_no_json_is_asked_once_more_then_scores_zero(self, scripted: Scripted) -> None:
        """Two requests exactly; the second carries the first reply and asks for JSON only."""
        server = scripted(PROSE_ONLY)
        evidence = build_grader_evidence([assistant("Your refund is approved.")])
        verdict = await grade(
            "tells the customer the refund is approved",
            evidence,
            model_config=config_for(server),
            judge=JudgeSpec(),
        )
        assert verdict == GradeVerdict(0.0, False, NO_VERDICT_REASON)
        assert verdict.reason == "grader returned no readable JSON verdict"
        assert len(server.requests) == 2
        first, second = (request.messages for request in server.requests)
        assert second[: len(first)] == first
        assert second[-2] == {
            "role": "assistant",
            "content": "Looks good to me, the assistant did well.",
        }
        assert second[-1]["role"] == "user"
        assert "JSON only" in second[-1]["content"]
        assert second[-1]["content"] == REASK_PROMPT
        assert "JSON only" not in first[-1]["content"]

    async def test_the_reask_reads_a_verdict_given_the_second_time(
        self, scripted: Scripted
    ) -> None:
        """A grader that answers JSON when reminded is scored by that answer."""
        server = scripted(PROSE_THEN_JSON)
        verdict = await grade(
            "names the order",
            build_grader_evidence([assistant("ORD-1001 is approved.")]),
            model_config=config_for(server),
            judge=JudgeSpec(),
        )
        assert verdict == GradeVerdict(0.9, True, "named ORD-1001")
        assert len(server.requests) == 2

    async def test_a_fenced_verdict_needs_no_second_request(self, scripted: Scripted) -> None:
        """A verdict in a code fence is read from the first reply."""
        server = scripted(FENCED)
        verdict = await grade("x", "evidence", model_config=config_for(server), judge=JudgeSpec())
        assert verdict == GradeVerdict(0.4, True, "vague")
        assert len(server.requests) == 1

    async def test_the_prompt_carries_criterion_evidence_and_weighting(
        self, scripted: Scripted
    ) -> None:
        """System prompt weighs reply against record; the user message holds both sections."""
        server = scripted(FENCED)
        transcript = [
            assistant(None, ("c", "read_file", '{"file_path": "orders.json"}')),
            result("c", "[]"),
            assistant("No such order."),
        ]
        await grade(
            "looked the order up",
            build_grader_evidence(transcript),
            model_config=config_for(server),
            judge=JudgeSpec(),
        )
        system, user = server.requests[0].messages
        assert system["role"] == "system"
        assert "met only by the final reply" in system["content"]
        assert "may be met by the record" in system["content"]
        assert user["content"] == (
            "Criterion: looked the order up\n\n"
            "What the assistant did, in order:\n"
            '1. [tool] read_file input={"file_path": "orders.json"} → completed output=[]\n\n'
            "Final reply to the user:\nNo such order."
        )

    async def test_judge_model_and_options_are_applied(self, scripted: Scripted) -> None:
        """tests.judge.model overrides the env default; temperature and maxTokens are sent."""
        server = scripted(FENCED)
        judge = JudgeSpec.model_validate(
            {"model": "judge-model", "modelOptions": {"temperature": 0, "maxTokens": 256}}
        )
        await grade("x", "e", model_config=config_for(server), judge=judge)
        body = server.requests[0].body
        assert (body["model"], body["temperature"], body["max_tokens"]) == ("judge-model", 0, 256)

    async def test_the_env_default_model_serves_an_empty_judge(self, scripted: Scripted) -> None:
        """judge: {} grades with the environment's model and sends no sampling options."""
        server = scripted(FENCED)
        await grade("x", "e", model_config=config_for(server), judge=JudgeSpec())
        body = server.requests[0].body
        assert body["model"] == "env-model"
        assert "temperature" not in body and "max_tokens" not in body

    async def test_no_model_anywhere_scores_zero_without_a_request(
        self, scripted: Scripted
    ) -> None:
        """Neither tests.judge.model nor ARCHMAX_MODEL: an actionable 0, no call made."""
        server = scripted(FENCED)
        verdict = await grade("x", "e", model_config=config_for(server, None), judge=JudgeSpec())
        assert verdict.score == 0.0 and "ARCHMAX_MODEL" in verdict.reason
        assert server.requests == []

    async def test_grade_step_records_through_the_bar(self, scripted: Scripted) -> None:
        """The end-to-end helper: a 0.4 under a 0.7 bar fails although the model said pass."""
        server = scripted(FENCED)
        record = await grade_step(
            step("names the order", 0.7, index=2),
            [assistant("ok")],
            judge=JudgeSpec(),
            model_config=config_for(server),
        )
        assert (record.kind, record.status, record.score, record.threshold, record.step) == (
            "grade.closedQA",
            "failed",
            0.4,
            0.7,
            2,
        )
        assert record.detail == "names the order: vague"

    async def test_grade_step_without_a_judge_makes_no_request(self, scripted: Scripted) -> None:
        """A suite without tests.judge records the hint and never calls a model."""
        server = scripted(FENCED)
        record = await grade_step(
            step(), [assistant("ok")], judge=None, model_config=config_for(server)
        )
        assert record == no_judge_record(4, step())
        assert server.requests == []


class TestGradeRecords:
    @pytest.mark.parametrize(
        ("score", "claimed", "status"),
        [(0.82, False, "passed"), (0.7, False, "passed"), (0.69, True, "failed")],
    )
    def test_the_bar_decides_never_the_models_boolean(
        self, score: float, claimed: bool, status: str
    ) -> None:
        """score >= atLeast passes; the model's own pass claim is ignored either way."""
        record = grade_record(4, step(at_least=0.7), GradeVerdict(score, claimed, "why"))
        assert record.status == status
        assert (record.kind, record.threshold, record.score, record.step) == (
            "grade.closedQA",
            0.7,
            score,
            4,
        )
        assert record.detail == "names the order: why"

    def test_a_miss_reads_as_a_verdict_failure_with_its_score(self) -> None:
        """The record feeds reduce_verdict's `kind: detail (score s < atLeast)` line."""
        record = grade_record(1, step(at_least=0.7), GradeVerdict(0.5, True, "vague"))
        assert reduce_verdict([record]).failures == [
            "grade.closedQA: names the order: vague (score 0.5 < 0.7)"
        ]

    def test_no_judge_record_fails_with_score_zero_and_the_hint(self) -> None:
        """Without tests.judge the grade fails at 0 naming the fix."""
        record = no_judge_record(3, step(at_least=0.6))
        assert (record.status, record.score, record.threshold, record.step) == (
            "failed",
            0.0,
            0.6,
            3,
        )
        assert record.detail == f"names the order: {NO_JUDGE_HINT}"
        assert NO_JUDGE_HINT == "grade requires tests: { judge: … } in workflow.yaml"
