"""``archmax validate`` (``client/validate.py``): realistic good trees and bad ones."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from archmax_temporal.client.testing.validate import (
    Diagnostic,
    ValidationReport,
    render_text,
    validate_workflow,
)
from tests.support import paths
from tests.support.agents import copy_example as whole_example
from tests.support.paths import REPO

EXAMPLES = REPO / "examples"
FIXTURES = paths.FIXTURES / "cases"

SPEC = """\
title: Orders
instructions: Answer questions about orders.
states:
  intake:
    triggers:
      manual:
      report_requested:
    instructions: Decide where the request goes.
    transitions:
      - { to: review, description: It needs a person. }
      - { to: done, description: It is answered. }
  review:
    type: human
    instructions: Check the answer.
    transitions:
      - { to: done, type: approve, description: Approved. }
      - { to: intake, type: refine, description: Needs more. }
  done:
    instructions: Close.
"""

CASE_HEAD = "title: A case\ndescription: What it drives and asserts.\n"


def make_workflow(
    root: Path, spec: str = SPEC, cases: dict[str, str] | None = None, slug: str = "orders"
) -> Path:
    directory = root / "workflows" / slug
    directory.mkdir(parents=True)
    (directory / "workflow.yaml").write_text(textwrap.dedent(spec))
    for name, text in (cases or {}).items():
        path = directory / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return directory


def copy_example(tmp_path: Path, example: str) -> Path:
    """The example's workflow tree (no session store) under a fresh root, with its cases."""
    shutil.copytree(EXAMPLES / example / "workflows", tmp_path / "workflows")
    shutil.copytree(
        FIXTURES / example, tmp_path / "workflows" / example / "tests", dirs_exist_ok=True
    )
    return tmp_path


def messages(report: ValidationReport, level: str = "error") -> list[str]:
    return [d.message for d in report.diagnostics if d.level == level]


# --- good trees ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("example", "workflow"),
    [
        ("refund-review", "refund-review"),
        ("support-inbox", "support-inbox"),
        ("customer-support", "order-lookup"),
        ("customer-support", "enrich-order"),
    ],
)
def test_the_examples_are_valid(example: str, workflow: str) -> None:
    report = validate_workflow(EXAMPLES / example, workflow)
    assert report == ValidationReport(workflow=workflow, valid=True, diagnostics=[])


@pytest.mark.parametrize("example", ["refund-review", "support-inbox"])
def test_the_examples_with_their_cases_are_valid(tmp_path: Path, example: str) -> None:
    root = copy_example(tmp_path, example)
    report = validate_workflow(root, example)
    assert report.valid and report.diagnostics == []
    assert render_text(report) == ([], "valid — 0 error(s), 0 warning(s)")
    assert report.exit_code == 0


def test_json_shape(tmp_path: Path) -> None:
    make_workflow(tmp_path, SPEC.replace("instructions: Answer questions about orders.\n", ""))
    document = json.loads(validate_workflow(tmp_path, "orders").model_dump_json())
    assert document == {
        "workflow": "orders",
        "valid": True,
        "diagnostics": [
            {
                "level": "warning",
                "location": "workflows/orders/workflow.yaml",
                "message": "instructions: the workflow has no root instructions (standing "
                "guidance for the whole session)",
            }
        ],
    }
    assert set(validate_workflow(tmp_path, "orders").model_dump()) == {
        "workflow",
        "valid",
        "diagnostics",
    }


# --- the spec ---------------------------------------------------------------------------------


def test_load_errors_become_error_diagnostics_at_the_spec(tmp_path: Path) -> None:
    make_workflow(
        tmp_path,
        SPEC.replace(
            "    transitions:\n      - { to: review", "    transtions:\n      - { to: review"
        ).replace("to: intake, type: refine", "to: nowhere, type: refine"),
    )
    report = validate_workflow(tmp_path, "orders")
    assert not report.valid and report.exit_code == 1
    assert {d.location for d in report.diagnostics} == {"workflows/orders/workflow.yaml"}
    assert messages(report) == ['states.intake: unknown key "transtions"']
    make_workflow(tmp_path, SPEC.replace("to: intake, type: refine", "to: nowhere"), slug="b")
    assert messages(validate_workflow(tmp_path, "b")) == [
        "states.review.transitions.1.to: transition to undeclared state 'nowhere'"
    ]


def test_yaml_that_does_not_parse_is_an_error(tmp_path: Path) -> None:
    make_workflow(tmp_path, "states: [unclosed\n")
    report = validate_workflow(tmp_path, "orders")
    assert not report.valid
    assert "YAML does not parse" in messages(report)[0]


def test_unknown_workflow_is_an_error(tmp_path: Path) -> None:
    make_workflow(tmp_path)
    report = validate_workflow(tmp_path, "missing")
    assert not report.valid
    assert report.diagnostics[0].location == "workflows/missing"
    assert "workflows: orders" in report.diagnostics[0].message


def test_lint_warnings_keep_the_workflow_valid(tmp_path: Path) -> None:
    spec = SPEC.replace(
        "instructions: Answer questions about orders.\n", "disabled: true\n"
    ).replace("    instructions: Decide where the request goes.\n", "")
    make_workflow(tmp_path, spec)
    report = validate_workflow(tmp_path, "orders")
    assert report.valid
    assert messages(report, "warning") == [
        "instructions: the workflow has no root instructions (standing guidance for the whole "
        "session)",
        "disabled: the workflow is disabled: it starts no new turns and archmax test skips its "
        "cases",
        "states.intake: 2 transitions and no instructions: the agent is told only the edges' "
        "descriptions when choosing between them",
    ]
    assert render_text(report)[1] == "valid — 0 error(s), 3 warning(s)"


def test_a_state_with_one_transition_needs_no_instructions(tmp_path: Path) -> None:
    spec = SPEC.replace("      - { to: done, description: It is answered. }\n", "").replace(
        "    instructions: Decide where the request goes.\n", ""
    )
    make_workflow(tmp_path, spec)
    assert validate_workflow(tmp_path, "orders").diagnostics == []


def test_human_state_rules_are_errors(tmp_path: Path) -> None:
    make_workflow(
        tmp_path,
        """\
        instructions: x
        states:
          intake:
            triggers: { manual: }
            instructions: x
            transitions:
              - { to: bare, description: a }
              - { to: loop, description: b }
          bare:
            type: human
          loop:
            type: human
            instructions: Decide.
            before: { script: hooks/check.js }
            transitions:
              - { to: loop, type: approve, description: again }
              - { to: intake, type: approve, description: back }
        """,
    )
    report = validate_workflow(tmp_path, "orders")
    assert not report.valid
    assert messages(report) == [
        "states.bare: a human state must declare instructions for the reviewer",
        "states.bare: a human state needs at least one transition to decide",
        "states.loop.transitions: 2 transitions of type 'approve'; a human state has at most "
        "one of each labelled type",
        "states.loop.transitions.0.to: a human state cannot transition to itself",
        "states.loop.before: a human state takes no lifecycle hooks",
    ]


def test_max_concurrency_above_one_is_an_error(tmp_path: Path) -> None:
    make_workflow(tmp_path, SPEC + "tests: { maxConcurrency: 2 }\n")
    report = validate_workflow(tmp_path, "orders")
    assert messages(report) == [
        "tests.maxConcurrency: 2 is not supported: case concurrency is unimplemented and "
        "cases run sequentially (use 1 or omit it)"
    ]
    make_workflow(tmp_path, SPEC + "tests: { maxConcurrency: 1 }\n", slug="one")
    assert validate_workflow(tmp_path, "one").valid


def test_a_disabled_workflow_is_still_fully_validated(tmp_path: Path) -> None:
    make_workflow(
        tmp_path,
        "disabled: true\n" + SPEC,
        cases={"bad.test.yaml": CASE_HEAD + "steps:\n  - send: hi\n  - reachedstate: done\n"},
    )
    report = validate_workflow(tmp_path, "orders")
    assert not report.valid
    assert [d.level for d in report.diagnostics] == ["warning", "error"]


# --- the cases --------------------------------------------------------------------------------


def test_case_schema_errors_are_located_at_the_case_file(tmp_path: Path) -> None:
    make_workflow(
        tmp_path,
        cases={
            "refund/typo.test.yaml": CASE_HEAD + "steps:\n  - send: hi\n  - reachedstate: done\n",
            "long.test.yml": f"title: {'x' * 61}\ndescription: d\nextra: 1\n",
            "ok.test.yaml": CASE_HEAD + "steps:\n  - send: hi\n  - reachedState: done\n",
            "tests.config.js": "module.exports = {}",
        },
    )
    report = validate_workflow(tmp_path, "orders")
    assert not report.valid
    by_location = [(d.location, d.message.split(":")[0]) for d in report.diagnostics]
    assert by_location == [
        ("workflows/orders/tests/long.test.yml", "extra"),
        ("workflows/orders/tests/long.test.yml", "title"),
        ("workflows/orders/tests/refund/typo.test.yaml", "steps[1].reachedstate"),
    ]


def test_workspace_from_problems_are_reported(tmp_path: Path) -> None:
    make_workflow(
        tmp_path,
        cases={
            "seed.test.yaml": CASE_HEAD
            + "workspace:\n  trigger.json: { from: ../workflow.yaml }\n"
            + "  orders.json: { from: shared/missing.json }\n"
            + "  skills/x/a.md: nope\n",
        },
    )
    assert messages(validate_workflow(tmp_path, "orders")) == [
        "workspace['trigger.json'].from: '../workflow.yaml' escapes the tests/ directory",
        "workspace['orders.json'].from: 'shared/missing.json' names no file under tests/",
        "workspace['skills/x/a.md']: skills/ is a mount, not a seedable session path",
    ]


def test_unknown_case_trigger_lists_the_declared_ones(tmp_path: Path) -> None:
    make_workflow(
        tmp_path,
        cases={
            "a.test.yaml": CASE_HEAD + "trigger: { id: report_requestd }\n",
            "b.test.yaml": CASE_HEAD + "trigger: { id: report_requested }\n",
            "c.test.yaml": CASE_HEAD + "trigger: { id: manual }\n",
        },
    )
    report = validate_workflow(tmp_path, "orders")
    assert report.diagnostics == [
        Diagnostic(
            level="error",
            location="workflows/orders/tests/a.test.yaml",
            message="trigger.id: unknown trigger 'report_requestd'; declared triggers: manual, "
            "report_requested",
        )
    ]


def test_manual_is_always_a_known_trigger(tmp_path: Path) -> None:
    spec = SPEC.replace("      manual:\n", "")
    make_workflow(tmp_path, spec, cases={"m.test.yaml": CASE_HEAD + "trigger: { id: manual }\n"})
    assert validate_workflow(tmp_path, "orders").valid


def test_undeclared_states_in_cases_are_errors(tmp_path: Path) -> None:
    make_workflow(
        tmp_path,
        cases={
            "states.test.yaml": CASE_HEAD
            + """\
steps:
  - send: hi
  - parked: { channel: decision, state: reviw }
  - reachedState: revew
  - reachedState: review
  - decide: { to: closed }
  - decide: { to: done }
  - trail: { to: finished, count: 1 }
""",
        },
    )
    report = validate_workflow(tmp_path, "orders")
    states = "states: intake, review, done"
    assert messages(report) == [
        f"steps[1].parked.state: undeclared state 'reviw'; {states}",
        f"steps[2].reachedState: undeclared state 'revew'; {states}",
        f"steps[4].decide.to: undeclared state 'closed'; {states}",
        f"steps[6].trail.to: undeclared state 'finished'; {states}",
    ]
    assert {d.location for d in report.diagnostics} == {"workflows/orders/tests/states.test.yaml"}


def test_a_delivered_trigger_is_left_alone(tmp_path: Path) -> None:
    make_workflow(
        tmp_path,
        cases={
            "d.test.yaml": CASE_HEAD
            + "steps:\n  - send: hi\n  - deliver: { trigger: anything_at_all }\n"
            + "  - triggerArrival: anything_at_all\n"
        },
    )
    assert validate_workflow(tmp_path, "orders").diagnostics == []


def test_grade_without_judge_and_the_judge_alias_warn(tmp_path: Path) -> None:
    grade = "{ closedQA: names the order, atLeast: 0.7 }"
    cases = {"g.test.yaml": CASE_HEAD + f"steps:\n  - send: hi\n  - judge: {grade}\n"}
    make_workflow(tmp_path, cases=cases)
    report = validate_workflow(tmp_path, "orders")
    assert report.valid
    assert messages(report, "warning") == [
        "steps[1].judge: judge: is a deprecated alias; write grade:",
        "steps[1].judge: a grade needs tests: { judge: {} } in workflow.yaml; without it the "
        "assertion fails",
    ]
    cases = {"g.test.yaml": CASE_HEAD + f"steps:\n  - send: hi\n  - grade: {grade}\n"}
    make_workflow(tmp_path, SPEC + "tests: { judge: {} }\n", cases=cases, slug="judged")
    assert validate_workflow(tmp_path, "judged").diagnostics == []


def test_case_schema_errors_are_reported_even_when_the_spec_fails(tmp_path: Path) -> None:
    make_workflow(
        tmp_path,
        SPEC.replace("title: Orders", "name: Orders"),
        cases={"c.test.yaml": CASE_HEAD + "trigger: { id: nope, args: {} }\n"},
    )
    report = validate_workflow(tmp_path, "orders")
    assert [(d.location, d.message.split(":")[0]) for d in report.diagnostics] == [
        ("workflows/orders/workflow.yaml", "<root>"),
        ("workflows/orders/tests/c.test.yaml", "trigger.args"),
    ]


# --- rendering ----------------------------------------------------------------------------------


def test_render_text() -> None:
    report = ValidationReport(
        workflow="orders",
        valid=False,
        diagnostics=[
            Diagnostic(level="error", location="workflows/orders/workflow.yaml", message="a: b"),
            Diagnostic(level="warning", location="workflows/orders/tests/x.test.yaml", message="c"),
            Diagnostic(level="error", location="f", message="d"),
        ],
    )
    assert render_text(report) == (
        [
            "✖ error [workflows/orders/workflow.yaml] a: b",
            "⚠ warn [workflows/orders/tests/x.test.yaml] c",
            "✖ error [f] d",
        ],
        "invalid — 2 error(s), 1 warning(s)",
    )


SCRIPT = "skills/order-enrichment/scripts/enrich-orders.js"
"""customer-support's fan-out script, run by order-lookup's enrich-order state."""


def test_a_script_calling_a_sub_workflow_its_state_does_not_allow_warns(tmp_path: Path) -> None:
    root = whole_example("customer-support", tmp_path)
    spec = root / "workflows" / "order-lookup" / "workflow.yaml"
    spec.write_text(spec.read_text().replace("        - archmax_workflow_enrich-order\n", ""))
    report = validate_workflow(root, "order-lookup")
    assert report.valid  # a warning: the call would be blocked at run time, answered to the script
    assert [(d.level, d.location) for d in report.diagnostics] == [("warning", SCRIPT)]
    assert report.diagnostics[0].message == (
        "tools.archmaxWorkflowEnrichOrder: state 'enrich-order' runs this script but does not "
        "allow archmax_workflow_enrich-order; the call would be blocked"
    )


def test_a_script_calling_a_workflow_nobody_is_called_warns(tmp_path: Path) -> None:
    root = whole_example("customer-support", tmp_path)
    script = root / SCRIPT
    script.write_text(
        script.read_text().replace("archmaxWorkflowEnrichOrder", "archmaxWorkflowEnrichx")
    )
    messages = [d.message for d in validate_workflow(root, "order-lookup").diagnostics]
    assert messages == ["tools.archmaxWorkflowEnrichx: no workflow under workflows/ is called so"]


GUARDED = """
instructions: Orders.
states:
  intake:
    triggers:
      manual:
      email_received: { requires: [conversation_id] }
    requires: [order_id]
    tools:
      allow:
        - tool: read_file
          paths:
            - "scratchpad/${{order_id}}/**"
            - "scratchpad/${{conversation_id}}/**"
            - "scratchpad/${{customer.id}}/**"
            - "scratchpad/${{trigger}}/**"
            - "scratchpad/$${{literal}}/**"
        - { tool: grep, args: { pattern: "${{seeded_by_a_case}}" } }
    transitions:
      - { to: done, description: Done. }
  done:
    instructions: Close.
"""


def test_a_guard_reference_nothing_guarantees_warns(tmp_path: Path) -> None:
    """Seed: the ${{…}} references in tools.allow are the variables the workflow depends on;
    "archmax validate warns about a reference nothing guarantees": no trigger requires it,
    no state requires it, no case seeds it (``trigger`` is always set)."""
    case = CASE_HEAD + "variables: { seeded_by_a_case: x }\nsteps:\n  - send: hi\n"
    make_workflow(tmp_path, GUARDED, cases={"c.test.yaml": case})
    report = validate_workflow(tmp_path, "orders")
    assert report.valid
    assert messages(report, "warning") == [
        "states.intake.tools.allow.0: ${{customer}} is guaranteed by nothing: no trigger or "
        "state requires it and no case seeds it; declare it in a requires: list (or make sure "
        "every host seeds it)"
    ]
