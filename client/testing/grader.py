"""The judge behind a ``grade: { closedQA, atLeast }`` assertion.

Two halves of one job, kept in one module because the evidence exists only to be graded:

* the **evidence** a graded turn is shown (:func:`build_grader_evidence`): a chronological
  record of what the assistant did (its messages, its tool calls with input, output and
  status, the runtime's own notes) and, in a section of its own, the final reply. Building
  and rendering are separate, so composition (order, call/result pairing) is asserted on data
  and bounding on the rendered text. Every reduction is visible in the prompt: a value over
  :data:`MAX_VALUE_CHARS` names the characters it lost, a record over
  :data:`MAX_RECORD_CHARS` says how many of its oldest entries it dropped. The reply is
  never cut: it is what a criterion about the user is graded on.
* the **grading call** (:func:`grade`): one Chat Completions request through the real
  ``openai`` client, asking for ``{score, pass, reason}``. A verdict wrapped in prose or a
  code fence is still read; a reply with no readable verdict is asked once more, JSON only,
  before the turn scores 0.

A grade is a bar, not the model's opinion: :func:`grade_record` passes the record when
``score >= atLeast``, and the model's own ``pass`` boolean never overrides it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import openai

from archmax_temporal.activities.model import ModelConfig, openai_client
from archmax_temporal.client.testing.results import AssertionRecord
from archmax_temporal.client.testing.steps import GradeStep
from archmax_temporal.workflows.models import Message
from archmax_temporal.workflows.spec import JudgeSpec
from archmax_temporal.workflows.tools import handler_of

MAX_VALUE_CHARS: Final = 800
"""A rendered tool input, tool output or record message is cut here (the reply never is)."""

MAX_RECORD_CHARS: Final = 12_000
"""The budget of the rendered record section; the oldest entries go first."""

GRADE_KIND: Final = "grade.closedQA"
"""The ``kind`` of every grade record."""

NO_VERDICT_REASON: Final = "grader returned no readable JSON verdict"
"""The reason of a turn scored 0 because the grader never answered in JSON."""

NO_JUDGE_HINT: Final = "grade requires tests: { judge: … } in workflow.yaml"
"""The actionable detail of a grade in a suite that enables no judge."""

CLIENT_RETRIES: Final = 2
"""The openai client's own retries for a grading call: no Temporal retries it host-side."""

ToolStatus = Literal["completed", "failed", "rejected", "pending"]

_STATUS: Final[dict[str | None, ToolStatus]] = {
    "ok": "completed",
    None: "completed",
    "error": "failed",
    "blocked": "rejected",
}
"""A tool result's ``Message.status`` as the grader reads it; a call with no result is
``pending``. A runtime tool's error answer is a refusal (see :func:`_status_of`)."""


def _status_of(name: str, message: Message) -> ToolStatus:
    """The grader's status of one tool result.

    A runtime tool (``archmax_advance``, ``archmax_wait``, …) answered as an error was refused
    by the runtime (an undeclared edge, an unset ``requires``, a hook's veto or in-budget
    correct): a refusal the model reads, ``rejected``, not a tool that failed. Only an answer
    that failed the turn (``archmax_advance failed: …``) stays ``failed``.
    """
    status = _STATUS.get(message.status, "completed")
    if (
        status == "failed"
        and handler_of(name) == "runtime"
        and not (message.content or "").startswith(f"{name} failed")
    ):
        return "rejected"
    return status


# --- evidence -----------------------------------------------------------------------------


@dataclass
class MessageEntry:
    """Something the assistant said mid-turn."""

    text: str


@dataclass
class RuntimeEntry:
    """A runtime note: a person's decision, a delivered event, an error route."""

    note: str
    text: str


@dataclass
class ToolEntry:
    """A tool call as the agent experienced it; a mocked result is its output like any other."""

    name: str
    input: str
    output: str | None = None
    status: ToolStatus = "pending"


EvidenceEntry = MessageEntry | RuntimeEntry | ToolEntry


@dataclass
class GraderEvidence:
    """What a graded turn is shown: the ``record`` in order, and the ``reply`` apart."""

    record: list[EvidenceEntry] = field(default_factory=list)
    reply: str = ""

    def render(self) -> str:
        """The evidence as the grading prompt carries it (see :func:`render_evidence`)."""
        return render_evidence(self)


def build_grader_evidence(transcript: Sequence[Message]) -> GraderEvidence:
    """The evidence of the messages of one turn (the caller slices the turn out).

    User and system messages are not the assistant's doing and stay out. A runtime note (both
    halves marked ``note``) becomes one ``runtime`` entry from its result's text. Each tool
    result is paired with its call by id; a call never answered stays ``pending``. The final
    reply is the last non-empty assistant message; when it closed the turn it is not repeated
    in the record, since it has its own section.
    """
    record: list[EvidenceEntry] = []
    calls: dict[str, ToolEntry] = {}
    reply = ""
    for message in transcript:
        if message.note is not None:
            if message.role == "tool":
                record.append(RuntimeEntry(note=message.note, text=_note_text(message)))
            continue
        if message.role == "assistant":
            if message.content and message.content.strip():
                record.append(MessageEntry(text=message.content))
                reply = message.content
            for call in message.tool_calls:
                entry = ToolEntry(name=call.name, input=call.arguments)
                calls[call.id] = entry
                record.append(entry)
        elif message.role == "tool":
            entry_or_none = calls.get(message.tool_call_id or "")
            if entry_or_none is None:
                record.append(
                    ToolEntry(
                        name=message.name or "?",
                        input="",
                        output=message.content or "",
                        status=_status_of(message.name or "?", message),
                    )
                )
            else:
                entry_or_none.output = message.content or ""
                entry_or_none.status = _status_of(entry_or_none.name, message)
    if record and isinstance(record[-1], MessageEntry) and record[-1].text == reply:
        record.pop()
    return GraderEvidence(record=record, reply=reply)


def _note_text(message: Message) -> str:
    """A note's text without its own ``[kind]`` prefix: the entry is labelled already."""
    text = message.content or ""
    prefix = f"[{message.note}]"
    return text[len(prefix) :].lstrip() if text.startswith(prefix) else text


def cap(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """``text`` cut at ``limit`` characters and marked ``…(+N chars)``; shorter text as is."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…(+{len(text) - limit} chars)"


def render_entry(entry: EvidenceEntry) -> str:
    """One record entry, each of its values capped."""
    if isinstance(entry, MessageEntry):
        return f"[message] {cap(entry.text)}"
    if isinstance(entry, RuntimeEntry):
        return f"[runtime:{entry.note}] {cap(entry.text)}"
    output = "(no output recorded)" if entry.output is None else f"output={cap(entry.output)}"
    return f"[tool] {entry.name} input={cap(entry.input)} → {entry.status} {output}"


RECORD_HEADING: Final = "What the assistant did, in order:"
REPLY_HEADING: Final = "Final reply to the user:"


def render_record(record: Sequence[EvidenceEntry], budget: int = MAX_RECORD_CHARS) -> str:
    """The record section's body: numbered entries, the oldest dropped beyond ``budget``.

    Entries keep their original numbers, so the numbering stays coherent with the
    ``… N earlier entries omitted`` marker. The newest entry is always kept (it is bounded by
    its capped values); the budget counts each kept line and its newline, not the marker.
    """
    if not record:
        return "(no messages or tool calls recorded)"
    lines = [f"{number}. {render_entry(entry)}" for number, entry in enumerate(record, 1)]
    kept = 0
    total = 0
    for line in reversed(lines):
        if kept and total + len(line) + 1 > budget:
            break
        total += len(line) + 1
        kept += 1
    dropped = len(lines) - kept
    body = lines[dropped:]
    if dropped:
        noun = "entry" if dropped == 1 else "entries"
        body.insert(0, f"… {dropped} earlier {noun} omitted")
    return "\n".join(body)


def render_evidence(evidence: GraderEvidence) -> str:
    """The two labelled sections: the bounded record, then the whole final reply."""
    return "\n".join(
        [
            RECORD_HEADING,
            render_record(evidence.record),
            "",
            REPLY_HEADING,
            evidence.reply or "(empty)",
        ]
    )


# --- the grading call ---------------------------------------------------------------------


@dataclass(frozen=True)
class GradeVerdict:
    """What the grader said. ``score`` is in [0, 1]. ``passed`` is the model's own ``pass``
    claim, kept for the record only: the case's ``atLeast`` decides (:func:`grade_record`)."""

    score: float
    passed: bool
    reason: str


SYSTEM_PROMPT: Final = " ".join(
    [
        "You grade whether an assistant's turn meets a yes/no criterion.",
        "You are shown a chronological record of the turn: the assistant's messages, the tool",
        "calls it made with their input, output and status (completed, failed, rejected,",
        "pending), and the runtime's own notes, marked [runtime:<kind>] (a person's decision,",
        "a delivered event, an error route). After it comes the assistant's final reply to the",
        "user. Weigh the two differently: a criterion about what the user was told is met only",
        "by the final reply, while a criterion about what the assistant did, or what happened",
        "in the turn, may be met by the record. Values marked …(+N chars) were shortened, and",
        "a record opening with '… N earlier entries omitted' lost its oldest entries.",
        'Reply with JSON only: {"score": number between 0 and 1, "pass": boolean,',
        '"reason": string}. Score 1 means the criterion is fully met, 0 not met at all.',
        "Keep the reason to one to three sentences: the judgment and the evidence for it.",
    ]
)

REASK_PROMPT: Final = (
    "Your previous reply held no readable JSON verdict. Reply with JSON only, no prose and no "
    'code fence: {"score": number, "pass": boolean, "reason": string}'
)


def grading_messages(criterion: str, evidence: GraderEvidence | str) -> list[dict[str, str]]:
    """The first request's messages: the instructions, then the criterion and the evidence."""
    rendered = evidence if isinstance(evidence, str) else evidence.render()
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Criterion: {criterion}\n\n{rendered}"},
    ]


def request_options(judge: JudgeSpec, model_config: ModelConfig) -> dict[str, Any]:
    """The model and sampling options of a grading request: ``tests.judge.model`` over the
    environment's default, ``modelOptions.temperature`` / ``maxTokens`` when given."""
    model = judge.model or model_config.default_model
    options: dict[str, Any] = {"model": model}
    given = judge.model_options or {}
    if given.get("temperature") is not None:
        options["temperature"] = given["temperature"]
    if given.get("maxTokens") is not None:
        options["max_tokens"] = given["maxTokens"]
    return options


async def grade(
    criterion: str,
    evidence: GraderEvidence | str,
    *,
    model_config: ModelConfig,
    judge: JudgeSpec,
    client: openai.AsyncOpenAI | None = None,
) -> GradeVerdict:
    """Score ``evidence`` against ``criterion`` with the grading model.

    A reply with no readable verdict gets one more request that carries it and asks for JSON
    only; a second miss scores 0 with :data:`NO_VERDICT_REASON`. With no model configured
    anywhere the verdict is 0 with a reason naming both settings, without a request. An
    endpoint error propagates as the ``openai`` exception (the caller decides whether the case
    dies). ``client`` lets a suite share one; without it one is built and closed here.
    """
    options = request_options(judge, model_config)
    if not options["model"]:
        return GradeVerdict(0.0, False, "no grading model: set tests.judge.model or ARCHMAX_MODEL")
    own = client is None
    api = client or openai_client(model_config, max_retries=CLIENT_RETRIES)
    try:
        messages: list[dict[str, str]] = grading_messages(criterion, evidence)
        first = await _complete(api, messages, options)
        verdict = parse_verdict(first)
        if verdict is not None:
            return verdict
        messages += [
            {"role": "assistant", "content": first},
            {"role": "user", "content": REASK_PROMPT},
        ]
        verdict = parse_verdict(await _complete(api, messages, options))
        return verdict or GradeVerdict(0.0, False, NO_VERDICT_REASON)
    finally:
        if own:
            await api.close()


async def _complete(
    api: openai.AsyncOpenAI, messages: list[dict[str, str]], options: dict[str, Any]
) -> str:
    request: dict[str, Any] = {**options, "messages": messages}
    response = await api.chat.completions.create(**request)
    if not response.choices:
        return ""
    return response.choices[0].message.content or ""


def parse_verdict(raw: str) -> GradeVerdict | None:
    """The first JSON object in ``raw`` that carries a numeric ``score``, or None.

    Prose around it, a code fence, or braces inside the prose are tolerated: every balanced
    ``{…}`` block is tried in order of its opening brace. The score is clamped to [0, 1].
    """
    for block in _balanced_objects(raw):
        try:
            parsed = json.loads(block)
        except ValueError:
            continue
        if not isinstance(parsed, dict) or "score" not in parsed:
            continue
        score = _number(parsed["score"])
        if score is None:
            continue
        reason = parsed.get("reason")
        return GradeVerdict(
            score=min(1.0, max(0.0, score)),
            passed=parsed.get("pass") is True,
            reason=reason if isinstance(reason, str) else "",
        )
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _balanced_objects(raw: str) -> Iterator[str]:
    """Every balanced ``{…}`` block of ``raw`` (string-aware), by its opening brace."""
    start = raw.find("{")
    while start != -1:
        depth = 0
        in_string = escaped = False
        for position in range(start, len(raw)):
            char = raw[position]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    yield raw[start : position + 1]
                    break
        start = raw.find("{", start + 1)


# --- records ------------------------------------------------------------------------------


def grade_record(step_index: int, step: GradeStep, verdict: GradeVerdict) -> AssertionRecord:
    """The grade's record: passed when ``score >= atLeast``, whatever the model claimed."""
    return AssertionRecord(
        kind=GRADE_KIND,
        status="passed" if verdict.score >= step.at_least else "failed",
        threshold=step.at_least,
        score=verdict.score,
        detail=f"{step.closed_qa}: {verdict.reason}",
        step=step_index,
    )


def no_judge_record(step_index: int, step: GradeStep) -> AssertionRecord:
    """A grade in a suite without ``tests: { judge }``: failed, score 0, saying how to fix it."""
    return AssertionRecord(
        kind=GRADE_KIND,
        status="failed",
        threshold=step.at_least,
        score=0.0,
        detail=f"{step.closed_qa}: {NO_JUDGE_HINT}",
        step=step_index,
    )


async def grade_step(
    step: GradeStep,
    transcript: Sequence[Message],
    *,
    judge: JudgeSpec | None,
    model_config: ModelConfig,
    client: openai.AsyncOpenAI | None = None,
) -> AssertionRecord:
    """One grade step end to end: the evidence of ``transcript`` (the turn's messages), the
    grading call, the record; the no-judge record when the suite enables no judge."""
    if judge is None:
        return no_judge_record(step.index, step)
    verdict = await grade(
        step.closed_qa,
        build_grader_evidence(transcript),
        model_config=model_config,
        judge=judge,
        client=client,
    )
    return grade_record(step.index, step, verdict)
