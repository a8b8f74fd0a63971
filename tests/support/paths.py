"""Where things are, for every test module wherever it sits in the tree: the repository, the
tests, the examples, the fixtures and the golden histories."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
EXAMPLES = REPO / "examples"
FIXTURES = TESTS / "fixtures"
HISTORIES = TESTS / "histories"
