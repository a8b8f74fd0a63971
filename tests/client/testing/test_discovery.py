"""Finding a workflow's cases (``client/testing/discovery.py``): recursive, sorted, filtered by
path, and nothing but ``*.test.yaml`` / ``*.test.yml`` files."""

from __future__ import annotations

from pathlib import Path

from archmax_temporal.client.testing.discovery import discover_cases
from tests.support.case_docs import HEAD, copy_suite


def test_discovery_is_recursive_sorted_and_ignores_other_files(tmp_path: Path) -> None:
    workflow_dir = copy_suite(tmp_path, "refund-review")
    (workflow_dir / "tests" / "a-first.test.yml").write_text(HEAD)
    (workflow_dir / "tests" / "z" / "deep").mkdir(parents=True)
    (workflow_dir / "tests" / "z" / "deep" / "last.test.yaml").write_text(HEAD)
    (workflow_dir / "tests" / "dir.test.yaml").mkdir()  # a directory is no case
    (workflow_dir / "tests" / ".test.yaml").write_text(HEAD)  # no name before the suffix
    (workflow_dir / "tests" / "case.yaml").write_text(HEAD)
    cases = discover_cases(workflow_dir)
    assert [c.id for c in cases] == [
        "a-first",
        "refund/approved",
        "refund/rejected",
        "z/deep/last",
    ]
    assert [c.file for c in cases] == [
        "a-first.test.yml",
        "refund/approved.test.yaml",
        "refund/rejected.test.yml",
        "z/deep/last.test.yaml",
    ]
    assert cases[1].path == workflow_dir / "tests" / "refund" / "approved.test.yaml"


def test_discovery_filter_is_a_path_substring(tmp_path: Path) -> None:
    workflow_dir = copy_suite(tmp_path, "refund-review")
    assert [c.id for c in discover_cases(workflow_dir, "reject")] == ["refund/rejected"]
    assert [c.id for c in discover_cases(workflow_dir, "refund/")] == [
        "refund/approved",
        "refund/rejected",
    ]
    assert [c.id for c in discover_cases(workflow_dir, ".yml")] == ["refund/rejected"]
    assert discover_cases(workflow_dir, "nothing-matches") == []


def test_missing_tests_directory_is_an_empty_suite(tmp_path: Path) -> None:
    assert discover_cases(tmp_path) == []
