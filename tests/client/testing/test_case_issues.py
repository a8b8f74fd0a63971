"""A case document's problems (``client/testing/case_issues.py``): each addressed by its path, all
reported at once, each once."""

from __future__ import annotations

from archmax_temporal.client.testing.case_issues import CaseIssues, CaseSchemaError
from tests.support.case_docs import issues


def test_every_problem_is_reported_at_once() -> None:
    found = issues("title: 1\nextra: x\nsteps:\n  - reachedstate: a\n  - send: ''\n")
    assert [i.split(":")[0] for i in found] == [
        "extra",
        "title",
        "description",
        "steps[0].reachedstate",
        "steps[1].send",
    ]


def test_the_parts_of_a_document_add_to_one_list_each_problem_once() -> None:
    """A step parser shares the document's list: the issues stay in the order found, and a
    problem found twice (a bad key the document and a step both see) is listed once."""
    document = CaseIssues()
    steps = CaseIssues(document.issues)
    document.fail("title", "required")
    steps.fail("steps[0].send", "must be the non-empty user message")
    steps.fail("title", "required")
    assert document.issues == [
        "title: required",
        "steps[0].send: must be the non-empty user message",
    ]


def test_the_error_names_the_file_and_lists_every_issue() -> None:
    error = CaseSchemaError(
        "refund/approved.test.yaml", ["title: required", "steps: must be a list"]
    )
    assert str(error) == (
        "refund/approved.test.yaml: invalid test case\n"
        "  - title: required\n"
        "  - steps: must be a list"
    )
    assert error.issues == ["title: required", "steps: must be a list"]
