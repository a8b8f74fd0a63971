"""workflows/placement.py: where a file handed to a session lands (seed, "Files handed to a
session")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archmax_temporal.workflows.placement import (
    FALLBACK_NAME,
    placed_name,
    sanitize_name,
    split_extension,
)


@pytest.mark.parametrize(
    ("existing", "name", "placed"),
    [
        # the seed's table
        (set(), "report.pdf", "report.pdf"),
        ({"report.pdf"}, "report.pdf", "report-1.pdf"),
        ({"report.pdf", "report-1.pdf"}, "report.pdf", "report-2.pdf"),
        # lowest free number
        ({"report.pdf", "report-2.pdf"}, "report.pdf", "report-1.pdf"),
        ({"report.pdf", "report-1.pdf", "report-3.pdf"}, "report.pdf", "report-2.pdf"),
        # a taken suffixed name alone does not move the original
        ({"report-1.pdf"}, "report.pdf", "report.pdf"),
        # no extension: the suffix goes at the end
        ({"notes"}, "notes", "notes-1"),
        ({"notes", "notes-1"}, "notes", "notes-2"),
        ({".env"}, ".env", ".env-1"),
        # only the last extension moves
        ({"archive.tar.gz"}, "archive.tar.gz", "archive.tar-1.gz"),
        ({".env.local"}, ".env.local", ".env-1.local"),
        # unrelated names do not matter
        ({"other.pdf"}, "report.pdf", "report.pdf"),
    ],
)
def test_placement_table(existing: set[str], name: str, placed: str) -> None:
    assert placed_name(existing, name) == placed


@pytest.mark.parametrize(
    ("name", "bare"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("/abs/path/a.txt", "a.txt"),
        ("C:\\Users\\me\\a.txt", "a.txt"),
        ("dir/", "dir"),
        ("..", FALLBACK_NAME),
        (".", FALLBACK_NAME),
        ("...", FALLBACK_NAME),
        ("", FALLBACK_NAME),
        ("/", FALLBACK_NAME),
        ("a\x00b.txt", "ab.txt"),
        ("  spaced.txt  ", "spaced.txt"),
        ("a..b.txt", "a..b.txt"),
    ],
)
def test_sanitize_name(name: str, bare: str) -> None:
    assert sanitize_name(name) == bare


def test_sanitized_name_is_used_for_collisions() -> None:
    assert placed_name({"passwd"}, "../../passwd") == "passwd-1"


def test_overlong_name_keeps_extension() -> None:
    bare = sanitize_name("x" * 400 + ".pdf")
    assert bare.endswith(".pdf")
    assert len(bare.encode()) <= 200


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("report.pdf", ("report", ".pdf")),
        ("archive.tar.gz", ("archive.tar", ".gz")),
        ("notes", ("notes", "")),
        (".env", (".env", "")),
        ("file.", ("file.", "")),
    ],
)
def test_split_extension(name: str, parts: tuple[str, str]) -> None:
    assert split_extension(name) == parts


names = st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=30)


@given(existing=st.sets(names, max_size=20), name=names)
def test_placed_name_is_free_and_bare(existing: set[str], name: str) -> None:
    placed = placed_name(existing, name)
    assert placed not in existing
    assert "/" not in placed and "\\" not in placed
    assert placed not in ("", ".", "..")
    if sanitize_name(name) not in existing:
        assert placed == sanitize_name(name)


@given(stem=st.from_regex(r"[a-z]{1,8}", fullmatch=True), taken=st.integers(0, 15))
def test_placed_name_takes_lowest_free_number(stem: str, taken: int) -> None:
    existing = {f"{stem}.txt"} | {f"{stem}-{n}.txt" for n in range(1, taken + 1)}
    assert placed_name(existing, f"{stem}.txt") == f"{stem}-{taken + 1}.txt"
