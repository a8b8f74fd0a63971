"""A case's workspace seeds (``client/testing/case_workspace.py``): what a case may seed, where a
``from:`` may point, and the bytes each seed writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from archmax_temporal.client.testing.case_model import WorkspaceFrom
from archmax_temporal.client.testing.case_workspace import workspace_seeds
from tests.support.case_docs import HEAD, issues, parse


def test_workspace_seeds_inline_and_from(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "orders.json").write_bytes(b'[{"id": "ORD-1"}]\n')
    document = parse(
        HEAD
        + """\
workspace:
  trigger.json: { from: shared/orders.json }
  scratchpad/fixtures/report.json: { total: 412.5 }
  scratchpad/notes.md: "verbatim text"
""",
        tmp_path,
    )
    assert document.workspace["trigger.json"] == WorkspaceFrom(from_="shared/orders.json")
    seeds = workspace_seeds(document, tmp_path)
    assert seeds == {
        "trigger.json": b'[{"id": "ORD-1"}]\n',
        "scratchpad/fixtures/report.json": b'{\n  "total": 412.5\n}',
        "scratchpad/notes.md": b"verbatim text",
    }


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("skills/order-data/assets/orders.json", "skills/ is a mount"),
        ("AGENTS.md", "AGENTS.md is a mount"),
        ("artifacts/trail.json", "artifacts/ is a runtime area"),
        ("checkpoints/cp-1.json", "checkpoints/ is a runtime area"),
        ("large_tool_results/x", "large_tool_results/ is a runtime area"),
        ("data/orders.json", "data/ is not an agent-visible session area"),
        ("scratchpad", "scratchpad is a directory"),
        ("/etc/passwd", "must be a workspace-relative path"),
        ("scratchpad/../trigger.json", "must be a canonical relative path"),
        ("scratchpad//x", "must be a canonical relative path"),
    ],
)
def test_workspace_refuses_mounts_runtime_areas_and_non_session_paths(
    path: str, expected: str
) -> None:
    found = issues(HEAD + f"workspace:\n  {path!r}: x\n")
    assert len(found) == 1
    assert found[0].startswith(f"workspace[{path!r}]: {expected}")


def test_workspace_from_must_stay_inside_tests_and_exist(tmp_path: Path) -> None:
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    (tmp_path / "secret.json").write_text("{}")
    (tests_dir / "link.json").symlink_to(tmp_path / "secret.json")
    (tests_dir / "a-dir").mkdir()
    found = issues(
        HEAD
        + """\
workspace:
  a.json: { from: ../secret.json }
  b.json: { from: /etc/passwd }
  c.json: { from: missing.json }
  d.json: { from: link.json }
  e.json: { from: a-dir }
  f.json: { from: x.json, mode: copy }
  g.json: { from: 3 }
""",
        tests_dir,
    )
    assert found == [
        "workspace['a.json'].from: '../secret.json' escapes the tests/ directory",
        "workspace['b.json'].from: '/etc/passwd' escapes the tests/ directory",
        "workspace['c.json'].from: 'missing.json' names no file under tests/",
        "workspace['d.json'].from: 'link.json' escapes the tests/ directory",
        "workspace['e.json'].from: 'a-dir' names no file under tests/",
        "workspace['f.json']: a from: reference takes no other keys (got mode)",
        "workspace['g.json'].from: must be a path relative to the tests/ directory",
    ]
    # Without a tests directory only the form is checked.
    assert parse(HEAD + "workspace: { a.json: { from: missing.json } }\n").workspace
