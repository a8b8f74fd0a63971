"""This runtime's extension of the case format, statically (its schema is tested in
``test_step_parser.py`` and ``test_cases.py``): what ``archmax validate`` says of it, how the
verdict and ``--json`` show it, and the crash harness's pure parts (which activities a crash
counts, what counts as applied twice)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Literal

import pytest

from archmax_temporal.activities.effects import EffectEvent
from archmax_temporal.activities.host_tools import host_tool
from archmax_temporal.client.testing import durable
from archmax_temporal.client.testing.case_model import EXTENSION_TOP_LEVEL_KEYS
from archmax_temporal.client.testing.report import json_document, verdict_line, verdict_lines
from archmax_temporal.client.testing.results import (
    AssertionRecord,
    CaseResult,
    CaseRun,
    RepeatSummary,
    RunTestsResult,
    Verdict,
)
from archmax_temporal.client.testing.steps import EXTENSION_STEP_KINDS
from archmax_temporal.client.testing.validate import validate_workflow
from archmax_temporal.workflows import contracts
from archmax_temporal.workflows.contracts.sandbox import SANDBOX_ACTIVITY
from tests.support import crash_tools
from tests.support.agents import copy_example
from tests.support.case_docs import steps_doc
from tests.support.paths import EXAMPLES, REPO

# --- archmax validate -------------------------------------------------------------------------


def test_validate_reports_the_schema_and_a_crash_that_cannot_strike(tmp_path: Path) -> None:
    root = copy_example("refund-review", tmp_path)
    tests = root / "workflows" / "refund-review" / "tests"
    (tests / "bad.test.yaml").write_text(steps_doc("- send: hi\n- advance: soon\n"))
    (tests / "hookless.test.yaml").write_text(steps_doc("- crash: { during: hook }\n- send: hi\n"))
    (tests / "late.test.yaml").write_text(steps_doc("- send: hi\n- advance: 2h\n- redeliver: {}\n"))
    report = validate_workflow(root, "refund-review")
    found = [(d.level, d.location.rsplit("/", 1)[-1], d.message) for d in report.diagnostics]
    assert found == [
        (
            "error",
            "bad.test.yaml",
            "steps[1].advance: cannot read duration 'soon': use a relative duration such as "
            "90s, 30m, 1h, 1d",
        ),
        (
            "warning",
            "hookless.test.yaml",
            "steps[0].crash.during: the workflow declares no script or custom hook, so a crash "
            "during hook never strikes (and fails its record)",
        ),
        (
            "error",
            "late.test.yaml",
            "steps[2].redeliver: redeliver cannot follow an advance: once the clock moved on "
            "the session may have closed idle and reopened in a new run, which no longer knows "
            "the first delivery's idempotency key (Temporal answers an update id within its "
            "run only); put the redeliver right after the send, decide or deliver it repeats",
        ),
    ]


@pytest.mark.parametrize(
    ("example", "workflow"),
    [
        ("support-inbox", "support-inbox"),
        ("refund-review", "refund-review"),
        ("customer-support", "order-lookup"),
    ],
)
def test_the_examples_durable_cases_are_valid(example: str, workflow: str) -> None:
    report = validate_workflow(EXAMPLES / example, workflow)
    assert report.diagnostics == []


# --- the verdict and --json -------------------------------------------------------------------


def _repeated(status: Literal["passed", "failed"], passed: int) -> CaseResult:
    runs = [
        CaseRun(
            run=n,
            session_id=f"test-x-case-r{n}",
            verdict=Verdict(status="passed")
            if n > 5 - passed
            else Verdict(status="failed", failures=["parked: the turn completed"]),
        )
        for n in range(1, 6)
    ]
    return CaseResult(
        id="case",
        title="Sampled",
        description="d",
        session_id="test-x-case-r1",
        verdict=Verdict(status=status),
        repeat=RepeatSummary(runs=5, passed=passed, rate=passed / 5, pass_rate=0.8),
        runs=runs,
        records=[
            AssertionRecord(kind="crash", status="passed", detail="worker killed as x", step=0)
        ],
    )


def test_the_verdict_line_carries_the_rate_and_lists_failed_runs() -> None:
    passing = _repeated("passed", 4)
    assert verdict_line(passing) == "✔ Sampled (4/5 runs passed: 0.8 ≥ passRate 0.8)"
    assert verdict_lines(passing)[1:] == [
        "    ⚡ crash: worker killed as x",
        "    ✖ run 1: parked: the turn completed",
    ]
    assert verdict_line(_repeated("failed", 3)) == (
        "✖ Sampled (3/5 runs passed: 0.6 < passRate 0.8)"
    )


def test_json_carries_the_extension_fields_only_when_used() -> None:
    plain = CaseResult(id="a", title="A", description="d", verdict=Verdict(status="passed"))
    timed = plain.model_copy(update={"id": "b", "environment": "time-skipping"})
    run = RunTestsResult(results=[plain, timed, _repeated("passed", 4)], exit_code=0, discovered=3)
    first, second, third = json_document("w", run)["results"]
    assert list(first) == ["id", "title", "description", "verdict", "records"]
    assert second["environment"] == "time-skipping"
    assert third["repeat"] == {"runs": 5, "passed": 4, "rate": 0.8, "passRate": 0.8}
    assert [r["verdict"]["status"] for r in third["runs"]] == ["failed"] + ["passed"] * 4
    assert third["runs"][0] == {
        "run": 1,
        "sessionId": "test-x-case-r1",
        "verdict": {"status": "failed", "failures": ["parked: the turn completed"]},
    }


# --- the crash harness's pure parts -----------------------------------------------------------


def test_every_activity_a_turn_schedules_has_a_crash_kind_or_none_on_purpose() -> None:
    """One registry: a new activity contract must be classified (or named uncrashable)."""
    classified = set(durable.CRASH_KINDS) | durable.NEVER_CRASHED | {SANDBOX_ACTIVITY}
    assert classified == set(contracts.ACTIVITY_NAMES)
    assert not set(durable.CRASH_KINDS) & durable.NEVER_CRASHED


def test_a_sandbox_run_counts_as_what_it_runs() -> None:
    def run(kind: str) -> SimpleNamespace:
        return SimpleNamespace(kind=kind)  # what crash_kind reads of a SandboxRunInput

    assert durable.crash_kind(SANDBOX_ACTIVITY, [run("hook")]) == "hook"
    assert durable.crash_kind(SANDBOX_ACTIVITY, [run("script")]) == "tool"
    assert durable.crash_kind(SANDBOX_ACTIVITY, [run("eval")]) == "tool"
    assert durable.crash_kind("archmax.model.complete") == "model"
    assert durable.crash_kind(contracts.notify.NOTIFY_ACTIVITY) is None


def _event(
    key: str,
    *,
    source: Literal["journal", "callable"] = "journal",
    replayed: bool = False,
    keyed: bool = True,
) -> EffectEvent:
    tool = "edit_file" if source == "journal" else "host:charge"
    return EffectEvent("s", key, tool, source, replayed, keyed)


class TestAppliedTwice:
    def test_a_replay_is_not_a_second_application(self) -> None:
        events = [_event("r.1"), _event("r.1", replayed=True), _event("r.2")]
        assert durable.applied_twice(events) == ([], [])

    def test_a_journaled_change_computed_twice_is(self) -> None:
        (violation,), notes = durable.applied_twice([_event("r.1"), _event("r.1")])
        assert notes == [] and violation.key == "r.1"
        assert violation.detail == (
            "edit_file applied its change 2 times for one call (key r.1): the effect journal "
            "did not answer the retry"
        )

    def test_a_callable_run_twice_is_unless_it_was_told_its_key(self) -> None:
        blind = [_event("r.3", source="callable", keyed=False)] * 2
        (violation,), _ = durable.applied_twice(blind)
        assert "host tool 'charge' ran 2 times for one call (key r.3)" in violation.detail
        told = [_event("r.3", source="callable")] * 2
        assert durable.applied_twice(told) == (
            [],
            [
                "host tool 'charge' ran again with the same idempotency key (its ToolContext): "
                "harmless if it honours the key"
            ],
        )


TESTING_PAGE = REPO / "docs" / "authoring" / "testing.md"
"""The docs page on ``archmax test``, whose last section is this runtime's case steps."""


def _extension_section() -> str:
    page = TESTING_PAGE.read_text(encoding="utf-8")
    start = page.index("\n## Cases that wait, crash and retry")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else len(page)]


def test_the_docs_document_every_extension_key_and_crash_kind() -> None:
    """The docs' section on this runtime's case steps names each one the schema reads."""
    section = _extension_section()
    for key in (*EXTENSION_STEP_KINDS, *EXTENSION_TOP_LEVEL_KEYS):
        assert f"**`{key}" in section, key
    for kind in ("model", "tool", "hook", "store"):
        assert f"`{kind}`" in section, kind


def test_the_docs_case_excerpts_are_verbatim_from_the_examples() -> None:
    """Each yaml block of the section names an example file on its first line and quotes it
    word for word (so it is run by the examples' suites)."""
    repo = REPO
    section = _extension_section()
    blocks = section.split("```yaml\n")[1:]
    assert len(blocks) == 3
    for block in blocks:
        named, _, body = block.split("```")[0].partition("\n")
        source = (repo / named.removeprefix("# ")).read_text(encoding="utf-8")
        assert body in source, named


def test_a_crash_kills_a_process_only_with_callables_a_process_can_load() -> None:
    """Module-level host tools and hook executors travel to the crash's worker process by
    reference; one defined inside a function (or a lambda) keeps the crash in process, and
    the reason names it."""

    def local(order: crash_tools.Order) -> str:
        """Defined here: no process can import it."""
        return order.order_id

    def agent(tools: list[object], executors: dict[str, object] | None = None) -> object:
        recipe = SimpleNamespace(host_tools=tools, hook_executors=executors)
        return SimpleNamespace(runtime=SimpleNamespace(recipe=recipe))

    environment = durable.DurableEnvironment()
    shipped = [host_tool(crash_tools.charge), host_tool(crash_tools.charge_once, name="c2")]
    assert environment.in_process_reason(agent(shipped, {"audit": crash_tools.charge})) is None  # type: ignore[arg-type]
    assert environment.in_process_reason(agent([*shipped, host_tool(local)])) == (  # type: ignore[arg-type]
        "host tool 'local' is not importable by a worker process"
    )
    assert environment.in_process_reason(agent([], {"audit": lambda *_: None})) == (  # type: ignore[arg-type]
        "hook executor 'audit' is not importable by a worker process"
    )
