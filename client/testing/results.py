"""What ``archmax test`` reports: one :class:`AssertionRecord` per assertion, one
:class:`CaseResult` per case, one :class:`RunTestsResult` per suite.

These are data, not output: ``run_tests`` returns them and prints nothing; the CLI's test view
is one renderer of them and a host's reporter is another. Field names serialise in archmax's
camelCase (``model_dump(by_alias=True)``), so the ``--json`` document reads like the
reference implementation's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from archmax_temporal.workflows.models import Usage

RecordStatus = Literal["passed", "failed", "not-executed"]
VerdictStatus = Literal["passed", "failed", "skipped"]


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class AssertionRecord(_Result):
    """One assertion's outcome; ``step`` is its zero-based index into the case's ``steps``."""

    kind: str
    status: RecordStatus
    threshold: float | None = None
    """A grade's ``atLeast`` bar; None for every other kind."""
    score: float | None = None
    detail: str | None = None
    step: int


class Verdict(_Result):
    status: VerdictStatus
    failures: list[str] = Field(default_factory=list)


class RepeatSummary(_Result):
    """A repeated case's tally (this runtime's ``repeat`` / ``passRate``): ``runs`` run on
    fresh sessions, ``passed`` of them passed, ``rate`` = passed ÷ runs; the case passes when
    ``rate`` is at least ``passRate``."""

    runs: int
    passed: int
    rate: float
    pass_rate: float = Field(alias="passRate")


class CaseRun(_Result):
    """One run of a repeated case: its session, its verdict, and why it died, if it did."""

    run: int
    session_id: str = Field(alias="sessionId")
    verdict: Verdict
    error: str | None = None


class CaseResult(_Result):
    """A case's verdict and every record it produced. ``error`` is set only when the case died
    (a thrown action, a refused start, a timeout); a halt is a verdict, not an error.

    This runtime's extension adds, only to a case that uses it: ``environment``
    (``time-skipping`` for a case that advances the clock), and for a repeated case
    ``repeat`` (the tally) and ``runs`` (each run's verdict); then ``records``, ``sessionId``
    and ``error`` are those of the first run whose verdict is the case's."""

    id: str
    title: str
    description: str
    session_id: str | None = Field(default=None, alias="sessionId")
    verdict: Verdict
    records: list[AssertionRecord] = Field(default_factory=list)
    skip_reason: str | None = Field(default=None, alias="skipReason")
    error: str | None = None
    environment: Literal["time-skipping"] | None = None
    repeat: RepeatSummary | None = None
    runs: list[CaseRun] | None = None
    usage: Usage | None = Field(default=None, exclude=True)
    """What the case's session spent (every run's, for a repeated case), for the view's
    per-case tokens line; not part of the reference ``CaseResult`` document, so never
    serialised."""

    @property
    def not_executed(self) -> int:
        return sum(1 for record in self.records if record.status == "not-executed")


class RunTestsResult(_Result):
    """A whole suite: its results in discovery order, the exit code, how many cases were
    discovered before filtering, and ``skipped="disabled"`` for a disabled workflow."""

    results: list[CaseResult] = Field(default_factory=list)
    exit_code: int = Field(alias="exitCode")
    discovered: int
    skipped: Literal["disabled"] | None = None

    def counts(self) -> tuple[int, int, int]:
        """(passed, failed, skipped) over the results."""
        statuses = [result.verdict.status for result in self.results]
        return statuses.count("passed"), statuses.count("failed"), statuses.count("skipped")


def record_failure(record: AssertionRecord) -> str:
    """A failed record as a verdict failure line: ``kind: detail``, a grade miss adding
    ``(score s < atLeast)``."""
    text = f"{record.kind}: {record.detail}" if record.detail else record.kind
    if record.score is not None and record.threshold is not None:
        text += f" (score {record.score:g} < {record.threshold:g})"
    return text


def reduce_verdict(records: list[AssertionRecord], error: str | None = None) -> Verdict:
    """The verdict of a case's records: the terminating error first, then each failed record;
    passed when there is neither. Not-executed records contribute nothing."""
    failures = [error] if error else []
    failures += [record_failure(r) for r in records if r.status == "failed"]
    return Verdict(status="failed" if failures else "passed", failures=failures)


def exit_code_for(results: list[CaseResult]) -> int:
    return 1 if any(result.verdict.status == "failed" for result in results) else 0
