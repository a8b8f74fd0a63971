"""What ``archmax test`` prints: one renderer of the suite's :class:`CaseResult` data.

The runner returns data and prints nothing; this module turns that data into the CLI's two
streams, following archmax's conventions:

* **stderr** narrates, in the visual language of ``archmax run``: a session header (workflow,
  directory, model or ``unset``), per case a dimmed header, its live state flow (``▸`` for a trigger
  arrival, ``→`` for a committed transition), a verdict line (``✔`` / ``✖`` / ``○``) with failure
  details, grade scores and the not-executed count indented beneath it, the case's tokens
  (:func:`archmax_temporal.client.usage.footer_line`), and a closing summary naming the passed,
  failed and skipped cases, then the suite's total tokens.
* **stdout** carries the result only: ``N passed, N failed, N skipped``, the
  ``suite skipped — disabled`` line, or with ``--json`` the document
  ``{workflow, results, exitCode, discovered, skipped?}`` (:func:`json_document`).

Colour is used only when the stream is a TTY and ``NO_COLOR`` is unset (or empty); otherwise
every line is plain text with its icons intact. Everything here is pure: the line builders
return strings, :class:`TestView` writes them to the streams it is given.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

from archmax_temporal.client.testing.results import CaseResult, RunTestsResult
from archmax_temporal.client.usage import Pricing, footer_line
from archmax_temporal.workflows.models import Usage

CHECK: Final = "✔"
CROSS: Final = "✖"
PENDING: Final = "○"
ARROW: Final = "→"
TRIGGER: Final = "▸"
DIAMOND: Final = "◆"
CLOCK: Final = "⏱"
"""An ``advance``: the case's clock moved on."""
KILL: Final = "⚡"
"""A ``crash``: the worker running the turn was killed."""
AGAIN: Final = "↻"
"""A ``redeliver``: the previous action sent again under its key."""

CHECK_ICONS: Final = {"crash": KILL, "redeliver": AGAIN}
"""This runtime's checks, whose passing records are shown under the verdict too."""

FLOW_INDENT: Final = "  "
"""State-flow lines sit under the case header, as under ``archmax run``'s session header."""

DETAIL_INDENT: Final = "    "
"""Failure details, grade scores and the not-executed count sit under their verdict line."""

LIST_INDENT: Final = "  "
"""The summary's named cases."""

_CODES: Final = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
    "gray": "90",
}


# --- style --------------------------------------------------------------------------------


def use_color(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Colour only for a TTY, and never when ``NO_COLOR`` holds a non-empty value."""
    env = os.environ if env is None else env
    if env.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass(frozen=True)
class Style:
    """ANSI helpers that pass text through unchanged when ``color`` is off."""

    color: bool = False

    def _wrap(self, name: str, text: str) -> str:
        return f"\x1b[{_CODES[name]}m{text}\x1b[0m" if self.color and text else text

    def bold(self, text: str) -> str:
        return self._wrap("bold", text)

    def dim(self, text: str) -> str:
        return self._wrap("dim", text)

    def red(self, text: str) -> str:
        return self._wrap("red", text)

    def green(self, text: str) -> str:
        return self._wrap("green", text)

    def yellow(self, text: str) -> str:
        return self._wrap("yellow", text)

    def cyan(self, text: str) -> str:
        return self._wrap("cyan", text)

    def gray(self, text: str) -> str:
        return self._wrap("gray", text)


PLAIN: Final = Style(color=False)


def style_for(stream: TextIO, env: Mapping[str, str] | None = None) -> Style:
    """The style a stream deserves (see :func:`use_color`)."""
    return Style(color=use_color(stream, env))


# --- stderr lines -------------------------------------------------------------------------


def session_header(
    workflow: str, directory: str | Path, model: str | None, style: Style = PLAIN
) -> str:
    """``workflow  <slug>  ·  root <dir>  ·  model <id or unset>``."""
    return f"workflow  {style.bold(workflow)}  ·  root {directory}  ·  model {model or 'unset'}"


def case_header(case_id: str, title: str, style: Style = PLAIN) -> str:
    """The dimmed line a case's state flow runs under: ``◆ case <id> — <title>``."""
    return style.dim(f"{DIAMOND} case {case_id} — {title}")


def flow_line(
    from_state: str | None,
    to_state: str,
    kind: str,
    style: Style = PLAIN,
    reason: str | None = None,
) -> str:
    """One state-flow line, as ``archmax run`` draws its trail.

    A trigger arrival is ``▸ <state>  (trigger <id>)``; any other committed step is
    ``<from> → <to>  (<kind>)``, with `` — <reason>`` when one is given (a reviewer's
    comment, an error route's cause).
    """
    if kind == "trigger":
        label = f"trigger {reason}" if reason else "trigger"
        return (
            f"{FLOW_INDENT}{style.cyan(TRIGGER)} {style.bold(to_state)}  {style.dim(f'({label})')}"
        )
    source = f"{style.dim(from_state)} " if from_state else ""
    why = style.dim(f" — {reason}") if reason else ""
    return (
        f"{FLOW_INDENT}{source}{style.dim(ARROW)} {style.bold(to_state)}  "
        f"{style.dim(f'({kind})')}{why}"
    )


def verdict_line(result: CaseResult, style: Style = PLAIN) -> str:
    """``✔ <title>``, ``✖ <title>`` or ``○ <title> (skipped: <reason>)``; a repeated case's
    adds its tally: ``(4/5 runs passed: 0.8 ≥ passRate 0.8)``."""
    status = result.verdict.status
    tally = ""
    if result.repeat is not None:
        summary = result.repeat
        sign = "≥" if summary.rate + 1e-9 >= summary.pass_rate else "<"
        tally = " " + style.dim(
            f"({summary.passed}/{summary.runs} runs passed: {summary.rate:g} {sign} "
            f"passRate {summary.pass_rate:g})"
        )
    if status == "passed":
        return f"{style.green(CHECK)} {result.title}{tally}"
    if status == "failed":
        return f"{style.red(CROSS)} {result.title}{tally}"
    why = f"skipped: {result.skip_reason}" if result.skip_reason else "skipped"
    return f"{style.yellow(PENDING)} {result.title} {style.dim(f'({why})')}"


def grade_line(score: float, threshold: float, passed: bool, style: Style = PLAIN) -> str:
    """``grade 0.82 ≥ 0.7`` for a grade at or over its bar, ``grade 0.4 < 0.7`` under it."""
    text = f"grade {score:g} {'≥' if passed else '<'} {threshold:g}"
    return style.green(text) if passed else style.red(text)


def verdict_lines(result: CaseResult, style: Style = PLAIN) -> list[str]:
    """A case's verdict line and, indented beneath it, what a reader needs to act on it.

    Every failure (the terminating error first, as the verdict lists them; a multi-line one
    keeps its lines together), the score of every grade that ran (a passing grade is
    otherwise invisible), and how many assertions never ran, so a halted case's remaining
    steps do not read as passed.
    """
    lines = [verdict_line(result, style)]
    for failure in result.verdict.failures:
        first, *rest = failure.split("\n")
        lines.append(f"{DETAIL_INDENT}{style.red(CROSS)} {first}")
        lines += [f"{DETAIL_INDENT}  {style.dim(line)}" for line in rest]
    for record in result.records:
        if record.status == "passed" and record.kind in CHECK_ICONS:
            icon = CHECK_ICONS[record.kind]
            lines.append(f"{DETAIL_INDENT}{style.green(icon)} {record.kind}: {record.detail}")
        if record.status == "not-executed" or record.threshold is None or record.score is None:
            continue
        passed = record.status == "passed"
        lines.append(DETAIL_INDENT + grade_line(record.score, record.threshold, passed, style))
    if result.runs is not None and result.verdict.status == "passed":
        for run in result.runs:  # a passing repeated case may have failing runs: say which
            if run.verdict.status == "failed" and run.verdict.failures:
                first = run.verdict.failures[0].split("\n")[0]
                lines.append(f"{DETAIL_INDENT}{style.yellow(CROSS)} run {run.run}: {first}")
    count = result.not_executed
    if count:
        noun = "assertion" if count == 1 else "assertions"
        lines.append(f"{DETAIL_INDENT}{style.yellow(PENDING)} {count} {noun} not executed")
    return lines


def summary_lines(results: Sequence[CaseResult], style: Style = PLAIN) -> list[str]:
    """The closing summary: the counts, then the failed, passed and skipped cases by name."""
    by_status = {
        status: [r for r in results if r.verdict.status == status]
        for status in ("failed", "passed", "skipped")
    }
    counts = counts_text(
        len(by_status["passed"]), len(by_status["failed"]), len(by_status["skipped"])
    )
    lines = [f"{style.bold(f'{DIAMOND} summary')}  {counts}"]
    icons = {
        "failed": style.red(CROSS),
        "passed": style.green(CHECK),
        "skipped": style.yellow(PENDING),
    }
    for status, cases in by_status.items():
        for case in cases:
            icon = icons[status]
            lines.append(f"{LIST_INDENT}{icon} {case.id} {style.dim(f'— {case.title}')}")
    return lines


def suite_skipped_line(workflow: str, style: Style = PLAIN) -> str:
    """The one stderr line of a disabled workflow's suite, in place of every case."""
    return f"{style.yellow(PENDING)} suite skipped — workflow '{workflow}' is disabled; no case ran"


def no_match_line(filter_text: str, discovered: int) -> str:
    """A filter that matched no case (an exit-1 failure)."""
    return f"{CROSS} no cases matched '{filter_text}' ({discovered} discovered)"


# --- stdout -------------------------------------------------------------------------------


def counts_text(passed: int, failed: int, skipped: int) -> str:
    return f"{passed} passed, {failed} failed, {skipped} skipped"


SUITE_SKIPPED: Final = "suite skipped — disabled"
"""stdout's one line for a disabled workflow's suite."""


def summary_line(run: RunTestsResult) -> str:
    """stdout's one line: ``N passed, N failed, N skipped`` or ``suite skipped — disabled``."""
    if run.skipped == "disabled":
        return SUITE_SKIPPED
    return counts_text(*run.counts())


def case_json(result: CaseResult) -> dict[str, Any]:
    """A case as the ``--json`` document carries it.

    Unset optional fields are left out (``sessionId``, ``skipReason``, ``error``, a record's
    ``score`` and ``detail``), as the reference's optional keys are absent rather than null.
    A record's ``threshold`` is the exception: the record shape always carries it, the
    ``atLeast`` of a grade and null for every other kind.
    """
    data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["records"] = [
        {
            key: value
            for key, value in record.model_dump(mode="json", by_alias=True).items()
            if value is not None or key == "threshold"
        }
        for record in result.records
    ]
    return data


def json_document(workflow: str, run: RunTestsResult) -> dict[str, Any]:
    """``{workflow, results, exitCode, discovered, skipped?}``; ``skipped`` only when set."""
    document: dict[str, Any] = {
        "workflow": workflow,
        "results": [case_json(result) for result in run.results],
        "exitCode": run.exit_code,
        "discovered": run.discovered,
    }
    if run.skipped is not None:
        document["skipped"] = run.skipped
    return document


def total_usage(results: Sequence[CaseResult]) -> Usage | None:
    """The suite's spend: every case's session summed (None when no case reported any)."""
    spent = [result.usage for result in results if result.usage is not None]
    if not spent:
        return None
    total = Usage()
    for usage in spent:
        total = total.plus(usage)
    return total


# --- the view -----------------------------------------------------------------------------


class TestView:
    """The ``archmax test`` view over two streams (normally stderr and stdout).

    The runner calls :meth:`case_started`, then :meth:`on_state` for each committed step of
    the case's session as it happens, then :meth:`case_finished`; the CLI calls
    :meth:`session_started` first and :meth:`suite_finished` last. A state event for a case
    other than the current one (a run still winding down after its case ended) is dropped:
    it must not paint under the next case's header.
    """

    __test__ = False  # not a pytest class

    def __init__(
        self,
        err: TextIO,
        out: TextIO,
        *,
        style: Style | None = None,
        env: Mapping[str, str] | None = None,
        pricing: Pricing | None = None,
    ) -> None:
        self._err = err
        self._out = out
        self._style = style if style is not None else style_for(err, env)
        self._pricing = pricing
        self._current: str | None = None

    def _narrate(self, *lines: str) -> None:
        for line in lines:
            self._err.write(line + "\n")
        self._err.flush()

    def session_started(self, workflow: str, directory: str | Path, model: str | None) -> None:
        self._narrate(session_header(workflow, directory, model, self._style))

    def case_started(self, case_id: str, title: str) -> None:
        self._current = case_id
        self._narrate("", case_header(case_id, title, self._style))

    def on_state(
        self,
        case_id: str,
        from_state: str | None,
        to_state: str,
        kind: str,
        reason: str | None = None,
    ) -> None:
        """The live state-flow hook: one line per committed step of the current case."""
        if case_id != self._current:
            return
        self._narrate(flow_line(from_state, to_state, kind, self._style, reason))

    def on_output(self, case_id: str, data: Mapping[str, Any]) -> None:
        """A hook's or script's console line (a ``hook-output`` event's data), under the
        current case: ``· hooks/check.js: Allowed: …``."""
        if case_id != self._current:
            return
        who = data.get("hook") or data.get("script") or "script"
        self._narrate("  " + self._style.dim(f"· {who}: {data.get('text', '')}"))

    def on_run(self, case_id: str, run: int, runs: int) -> None:
        """A repeated case's next run begins (on a fresh session)."""
        if case_id == self._current:
            self._narrate(FLOW_INDENT + self._style.dim(f"run {run}/{runs}"))

    def on_clock(self, case_id: str, by: str) -> None:
        """An ``advance`` is done: the clock moved on and the turns it woke ended."""
        if case_id == self._current:
            line = f"{self._style.cyan(CLOCK)} +{by}  {self._style.dim('(time-skipping clock)')}"
            self._narrate(FLOW_INDENT + line)

    def on_kill(self, case_id: str, text: str) -> None:
        """A ``crash`` struck; a fresh worker finished the action."""
        if case_id == self._current:
            self._narrate(f"{FLOW_INDENT}{self._style.yellow(KILL)} {text}")

    def case_finished(self, result: CaseResult) -> None:
        self._narrate(*verdict_lines(result, self._style))
        tokens = footer_line(result.usage, self._pricing)
        if tokens is not None:
            self._narrate("  " + self._style.dim(tokens))
        if result.id == self._current:
            self._current = None

    def no_match(self, filter_text: str, discovered: int) -> None:
        self._narrate(no_match_line(filter_text, discovered))

    def suite_finished(self, workflow: str, run: RunTestsResult, *, as_json: bool = False) -> None:
        """The closing summary on stderr (or the one skipped line), the result on stdout."""
        if run.skipped == "disabled":
            self._narrate(suite_skipped_line(workflow, self._style))
        else:
            self._narrate("", *summary_lines(run.results, self._style))
            total = footer_line(total_usage(run.results), self._pricing)
            if total is not None:
                self._narrate(self._style.dim(total))
        if as_json:
            self._out.write(json.dumps(json_document(workflow, run), indent=2, ensure_ascii=False))
            self._out.write("\n")
        else:
            self._out.write(summary_line(run) + "\n")
        self._out.flush()
