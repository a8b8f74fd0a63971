"""Case documents written inline for the case schema's tests: a head, a list of steps, parsed
or refused with its issues; and a fixture suite copied under a workflow's ``tests/``."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from archmax_temporal.client.testing.case_issues import CaseSchemaError
from archmax_temporal.client.testing.case_model import CaseDocument
from archmax_temporal.client.testing.cases import parse_case
from tests.support import paths

CASE_FIXTURES = paths.FIXTURES / "cases"
"""Workflows' ``tests/`` folders of case files (``refund-review/refund/approved.test.yaml``)."""

HEAD = "title: A case\ndescription: What it drives and asserts.\n"
"""The two keys every case needs."""


def parse(text: str, tests_dir: Path | None = None) -> CaseDocument:
    """``text`` (dedented) parsed as ``case.test.yaml``."""
    return parse_case("case.test.yaml", textwrap.dedent(text), tests_dir)


def issues(text: str, tests_dir: Path | None = None) -> list[str]:
    """The issues ``text`` is refused with (it must be refused, as ``case.test.yaml``)."""
    with pytest.raises(CaseSchemaError) as caught:
        parse(text, tests_dir)
    assert caught.value.file == "case.test.yaml"
    assert str(caught.value).startswith("case.test.yaml: invalid test case")
    return caught.value.issues


def steps_doc(steps: str, head: str = HEAD) -> str:
    """A case of ``head`` and the ``steps`` (a YAML list, dedented)."""
    return head + "steps:\n" + textwrap.indent(textwrap.dedent(steps), "  ")


def copy_suite(tmp_path: Path, fixture: str) -> Path:
    """A workflow folder under ``tmp_path`` whose ``tests/`` is the fixture's cases."""
    workflow_dir = tmp_path / fixture
    shutil.copytree(CASE_FIXTURES / fixture, workflow_dir / "tests")
    return workflow_dir
