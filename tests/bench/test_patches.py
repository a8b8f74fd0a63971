"""``bench.patches``: the table gives each count's median over its rounds and its difference
from asking none."""

from __future__ import annotations

from bench.patches import report


def test_the_table_gives_medians_and_the_difference_from_none() -> None:
    table = report({0: [50.0, 52.0, 60.0], 3: [80.0, 90.0, 85.0]}, 400)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == ["| 0 | 52 (50, 52, 60) |  |", "| 3 | 85 (80, 90, 85) | +33 |"]
    assert "400 a round" in table


def test_the_table_says_when_the_ids_were_asked_as_deprecated() -> None:
    assert "deprecate_patch" in report({0: [50.0]}, 10, deprecated=True)
    assert "deprecate_patch" not in report({0: [50.0]}, 10)
