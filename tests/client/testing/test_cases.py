"""A case document read into its model (``client/testing/cases.py``): the top-level keys, one
test per rule with its negative case, the YAML, the budgets and loading a discovered case."""

from __future__ import annotations

from pathlib import Path

import pytest

from archmax_temporal.client.testing.case_issues import CaseSchemaError
from archmax_temporal.client.testing.case_model import (
    CASE_DESCRIPTION_MAX_LENGTH,
    CASE_TITLE_MAX_LENGTH,
    TOP_LEVEL_KEYS,
    Mock,
)
from archmax_temporal.client.testing.case_workspace import workspace_seeds
from archmax_temporal.client.testing.cases import load_case
from archmax_temporal.client.testing.discovery import discover_cases
from tests.support.case_docs import HEAD, copy_suite, issues, parse

# --- the eight top-level keys ---------------------------------------------------------------


def test_minimal_document_needs_only_title_and_description() -> None:
    document = parse(HEAD)
    assert document.title == "A case"
    assert document.description == "What it drives and asserts."
    assert document.skip is None and document.trigger is None
    assert document.variables == {} and document.workspace == {}
    assert document.mocks == [] and document.steps == []


@pytest.mark.parametrize("key", ["title", "description"])
def test_title_and_description_are_required(key: str) -> None:
    text = "\n".join(line for line in HEAD.splitlines() if not line.startswith(key))
    assert f"{key}: required" in issues(text)


@pytest.mark.parametrize("key", ["title", "description"])
def test_title_and_description_must_be_non_empty_strings(key: str) -> None:
    other = "description: D" if key == "title" else "title: T"
    assert f"{key}: must be a string" in issues(f"{key}: 3\n{other}\n")
    assert f"{key}: must be a non-empty string" in issues(f'{key}: "  \\n "\n{other}\n')


def test_skip_is_a_non_empty_reason() -> None:
    assert parse(HEAD + "skip: flaky upstream\n").skip == "flaky upstream"
    assert any(i.startswith("skip: must be a non-empty reason") for i in issues(HEAD + "skip: ''"))
    assert any(i.startswith("skip:") for i in issues(HEAD + "skip: true\n"))


def test_trigger_is_an_id() -> None:
    document = parse(HEAD + "trigger: { id: report_requested }\n")
    assert document.trigger is not None and document.trigger.id == "report_requested"
    assert "trigger: must be a mapping { id: <trigger-id> }" in issues(HEAD + "trigger: x\n")
    assert "trigger.id: required" in issues(HEAD + "trigger: {}\n")


def test_trigger_args_is_an_unknown_key() -> None:
    found = issues(HEAD + "trigger: { id: report_requested, args: { company: Acme } }\n")
    assert len(found) == 1
    assert found[0].startswith("trigger.args: unknown key; known keys: id")
    assert "variables:" in found[0]


def test_variables_are_seeds_with_valid_names_and_json_values() -> None:
    document = parse(HEAD + "variables: { company: Acme Corp, items: [{ sku: A }] }\n")
    assert document.variables == {"company": "Acme Corp", "items": [{"sku": "A"}]}
    found = issues(HEAD + "variables: { Company: 1, trigger: x, since: 2024-01-01 }\n")
    assert any(i.startswith("variables.Company: invalid variable name") for i in found)
    assert any(i.startswith("variables.trigger: 'trigger' is set by the runtime") for i in found)
    assert any(i.startswith("variables.since: a YAML date is not a JSON value") for i in found)
    assert "variables: must be a mapping of variable name to value" in issues(
        HEAD + "variables: [a]"
    )


def test_mocks_are_tool_when_input_result() -> None:
    document = parse(
        HEAD
        + """\
mocks:
  - tool: read_file
    whenInput: { file_path: skills/order-data/assets/orders.json }
    result: "[]"
  - tool: archmax_workflow_reconcile
    result: { returns: { report: scratchpad/fixtures/report.json } }
"""
    )
    assert document.mocks[0] == Mock(
        tool="read_file",
        when_input={"file_path": "skills/order-data/assets/orders.json"},
        result="[]",
    )
    assert document.mocks[1].when_input is None
    found = issues(HEAD + "mocks:\n  - { tool: read_file, input: {}, result: x }\n  - tool: x\n")
    assert found == [
        "mocks[0].input: unknown key; known keys: tool, whenInput, result",
        "mocks[1].result: required",
    ]
    assert "mocks: must be a list of { tool, whenInput?, result }" in issues(HEAD + "mocks: {}")


def test_malformed_regex_in_mock_when_input_is_an_error() -> None:
    found = issues(HEAD + 'mocks:\n  - { tool: x, whenInput: { p: ["/(/"] }, result: "" }\n')
    assert len(found) == 1
    assert found[0].startswith("mocks[0].whenInput.p[0]: malformed regex '/(/'")


# --- unknown keys ---------------------------------------------------------------------------


def test_unknown_top_level_key_names_the_known_ones() -> None:
    found = issues(HEAD + "timeout: 3\nStep: []\n")
    known = ", ".join(TOP_LEVEL_KEYS)
    assert found == [
        f"timeout: unknown key; known keys: {known}",
        f'Step: unknown key; known keys: {known} (did you mean "steps"?)',
    ]


# --- length budgets -------------------------------------------------------------------------


def test_title_budget_is_measured_on_collapsed_whitespace() -> None:
    exact = "x" * CASE_TITLE_MAX_LENGTH
    assert parse(f"title: {exact}\ndescription: d\n").title == exact
    spaced = "title: >-\n  " + "  \n  ".join(["word"] * 12) + "\ndescription: d\n"
    assert parse(spaced).title == " ".join(["word"] * 12)  # 59 collapsed, 70+ raw
    found = issues(f"title: {exact}y\ndescription: d\n")
    assert found == [
        "title: 61 characters (whitespace collapsed) is over the 60-character budget; keep "
        "longer rationale in a YAML comment above the document"
    ]


def test_description_budget_scores_folded_and_literal_blocks_alike() -> None:
    prose = ["A refund for delivered ORD-1001 travels to review,"] * 4  # 50 x 4 + 3 = 203
    folded = "title: t\ndescription: >-\n" + "".join(f"  {line}\n" for line in prose)
    literal = "title: t\ndescription: |\n" + "".join(f"    {line}\n\n" for line in prose)
    assert issues(folded) == issues(literal)
    assert issues(folded)[0].startswith("description: 203 characters (whitespace collapsed)")
    fitting = [*prose[:3], "and parks."]
    folded = "title: t\ndescription: >-\n" + "".join(f"  {line}\n" for line in fitting)
    literal = "title: t\ndescription: |\n" + "".join(f"  {line}\n" for line in fitting)
    assert parse(folded).description == parse(literal).description
    assert len(parse(folded).description) <= CASE_DESCRIPTION_MAX_LENGTH


class TestRepeat:
    def test_runs_and_a_rate(self) -> None:
        document = parse(HEAD + "repeat: 5\npassRate: 0.8\nsteps:\n  - send: hi\n")
        assert (document.repeat, document.pass_rate) == (5, 0.8)
        assert parse(HEAD + "repeat: 3\n").pass_rate == 1.0

    @pytest.mark.parametrize(
        ("fields", "problem"),
        [
            ("repeat: 0\n", "repeat: must be 1 to 100 runs (got 0)"),
            ("repeat: 101\n", "repeat: must be 1 to 100 runs (got 101)"),
            ("repeat: true\n", "repeat: must be a whole number of runs, 1 to 100"),
            ("repeat: 2.5\n", "repeat: must be a whole number of runs, 1 to 100"),
            ("repeat: 3\npassRate: 0\n", "passRate: must be above 0 and at most 1 (got 0)"),
            ("repeat: 3\npassRate: 1.5\n", "passRate: must be above 0 and at most 1 (got 1.5)"),
            ("repeat: 3\npassRate: high\n", "passRate: must be a number above 0 and at most 1"),
            ("passRate: 0.8\n", "passRate: needs repeat: N beside it"),
        ],
    )
    def test_bad_values_are_errors(self, fields: str, problem: str) -> None:
        (found,) = issues(HEAD + fields)
        assert found.startswith(problem)

    def test_an_unknown_key_lists_them(self) -> None:
        (found,) = issues(HEAD + "repeats: 3\n")
        assert found == (
            f"repeats: unknown key; known keys: {', '.join(TOP_LEVEL_KEYS)} "
            '(did you mean "repeat"?)'
        )


# --- YAML ------------------------------------------------------------------------------------


def test_yaml_problems_are_schema_errors() -> None:
    found = issues("title: a\ntitle: b\n")
    assert len(found) == 1 and "duplicate key 'title'" in found[0]
    assert "YAML does not parse" in issues("title: [unclosed\n")[0]
    assert issues("")[0].startswith("<root>: the document is empty")
    assert issues("- a\n- b\n") == ["<root>: a case document must be a mapping"]


# --- a discovered case ------------------------------------------------------------------------


def test_fixture_cases_load(tmp_path: Path) -> None:
    workflow_dir = copy_suite(tmp_path, "refund-review")
    tests_dir = workflow_dir / "tests"
    approved, rejected = (load_case(c, tests_dir) for c in discover_cases(workflow_dir))
    assert approved.trigger is not None and approved.trigger.id == "refund_requested"
    assert (
        workspace_seeds(approved, tests_dir)["trigger.json"]
        == (tests_dir / "shared" / "order.json").read_bytes()
    )
    assert rejected.description == (
        "The reviewer sends the request back once; the session resubmits it and review is "
        "entered exactly twice."
    )


def test_an_unreadable_case_is_a_schema_error(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "bad.test.yaml").write_bytes(b"title: \xff\n")
    (case,) = discover_cases(tmp_path)
    with pytest.raises(CaseSchemaError) as caught:
        load_case(case, tmp_path / "tests")
    assert caught.value.file == "bad.test.yaml"
