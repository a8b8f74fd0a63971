"""activities/workspace_reads.py: ``ls``, ``read_file``, ``glob`` and ``grep``.

Under untrusted input too: a model's regex or glob never freezes the worker."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from archmax_temporal.activities import workspace_reads
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.activities.workspace_reads import glob_regex
from tests.support.workspace import PNG, SID, call, err, ok


class TestLs:
    async def test_root(self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore) -> None:
        fs_store.write_text(SID, "trigger.json", "{}")
        fs_store.write_text(SID, "artifacts/trail.json", "{}")
        fs_store.write_text(SID, "checkpoints/cp.json", "{}")
        listing = ok(await call(ws, "ls"))
        assert listing.splitlines() == ["AGENTS.md", "scratchpad/", "skills/", "trigger.json"]

    async def test_empty_scratchpad(self, ws: WorkspaceActivities) -> None:
        assert "empty" in ok(await call(ws, "ls", path="scratchpad"))

    async def test_skills_lists_visible_only(self, ws: WorkspaceActivities) -> None:
        assert ok(await call(ws, "ls", path="skills")) == "skills/pricing/"
        assert "secret" not in ok(await call(ws, "ls", path="skills/"))
        both = ok(await call(ws, "ls", visible=["pricing", "secret"], path="skills"))
        assert both.splitlines() == ["skills/pricing/", "skills/secret/"]
        assert ok(await call(ws, "ls", path="skills/pricing")).splitlines() == [
            "skills/pricing/SKILL.md",
            "skills/pricing/scripts/",
        ]

    async def test_no_skills_visible(self, ws: WorkspaceActivities) -> None:
        assert "skills/" not in ok(await call(ws, "ls", visible=[])).splitlines()

    async def test_refusals(self, ws: WorkspaceActivities) -> None:
        assert "not enabled" in err(await call(ws, "ls", path="skills/secret"))
        assert "runtime-internal" in err(await call(ws, "ls", path="artifacts"))
        assert ".." in err(await call(ws, "ls", path="scratchpad/../.."))
        assert "absolute" in err(await call(ws, "ls", path="/etc"))
        assert "does not exist" in err(await call(ws, "ls", path="scratchpad/nope"))


class TestReadFile:
    async def test_numbered_lines_offset_limit(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        fs_store.write_text(SID, "scratchpad/a.txt", "".join(f"line {i}\n" for i in range(1, 6)))
        assert ok(await call(ws, "read_file", file_path="scratchpad/a.txt")) == "\n".join(
            f"{i:6d}\tline {i}" for i in range(1, 6)
        )
        page = ok(await call(ws, "read_file", file_path="scratchpad/a.txt", offset=1, limit=2))
        assert page.splitlines()[:2] == ["     2\tline 2", "     3\tline 3"]
        assert "offset=3" in page
        assert "past the end" in err(
            await call(ws, "read_file", file_path="scratchpad/a.txt", offset=9)
        )

    async def test_mounts_and_session_files(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        fs_store.write_text(SID, "trigger.json", '{"a": 1}')
        assert "Be kind." in ok(await call(ws, "read_file", file_path="AGENTS.md"))
        assert "Price it." in ok(await call(ws, "read_file", file_path="skills/pricing/SKILL.md"))
        assert '{"a": 1}' in ok(await call(ws, "read_file", file_path="trigger.json"))

    async def test_invisible_skill_refused(self, ws: WorkspaceActivities) -> None:
        message = err(await call(ws, "read_file", file_path="skills/secret/SKILL.md"))
        assert "not enabled" in message
        assert "Hidden." not in message

    async def test_runtime_internal_refused(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        fs_store.write_text(SID, "artifacts/trail.json", '{"secret": 1}')
        assert "runtime-internal" in err(
            await call(ws, "read_file", file_path="artifacts/trail.json")
        )

    @pytest.mark.parametrize(
        "path", ["../other-session/scratchpad/x", "scratchpad/../../x", "/etc/passwd", "C:\\x"]
    )
    async def test_escape_refused(self, ws: WorkspaceActivities, path: str) -> None:
        err(await call(ws, "read_file", file_path=path))

    async def test_symlink_out_refused(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore, tmp_path: Path
    ) -> None:
        (tmp_path / "secret.txt").write_text("top secret")
        fs_store.write_text(SID, "scratchpad/ok.txt", "ok")
        (fs_store.root / SID / "scratchpad" / "leak.txt").symlink_to(tmp_path / "secret.txt")
        assert "symlink" in err(await call(ws, "read_file", file_path="scratchpad/leak.txt"))

    async def test_skill_symlink_out_refused(
        self, ws: WorkspaceActivities, authoring: Path, tmp_path: Path
    ) -> None:
        (tmp_path / "secret.txt").write_text("top secret")
        (authoring / "skills" / "pricing" / "leak.txt").symlink_to(tmp_path / "secret.txt")
        message = err(await call(ws, "read_file", file_path="skills/pricing/leak.txt"))
        assert "top secret" not in message
        assert "leak.txt" not in ok(await call(ws, "ls", path="skills/pricing"))
        assert "top secret" not in ok(await call(ws, "grep", pattern="secret"))

    async def test_binary_refused(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        fs_store.write_bytes(SID, "scratchpad/pic.png", PNG)
        fs_store.write_bytes(SID, "scratchpad/blob", b"abc\x00def")
        message = err(await call(ws, "read_file", file_path="scratchpad/pic.png"))
        assert message.startswith("Error: 'scratchpad/pic.png' is a binary file (image/png, ")
        assert message.endswith("read_file returns text files only.")
        assert "application/octet-stream" in err(
            await call(ws, "read_file", file_path="scratchpad/blob")
        )

    async def test_missing_and_bad_arguments(self, ws: WorkspaceActivities) -> None:
        assert "does not exist" in err(await call(ws, "read_file", file_path="scratchpad/x"))
        assert "file_path" in err(await call(ws, "read_file"))
        assert "offset" in err(await call(ws, "read_file", file_path="AGENTS.md", offset=-1))

    async def test_truncation_marker(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        fs_store.write_text(SID, "scratchpad/big.txt", "x" * 500)
        result = await call(ws, "read_file", max_chars=100, file_path="scratchpad/big.txt")
        assert result.truncated
        assert len(result.content.split("…")[0]) == 100
        full = ok(await call(ws, "read_file", file_path="scratchpad/big.txt"))
        assert result.content.endswith(f"…[truncated: {len(full) - 100} more chars]")


class TestGlob:
    async def test_matches_dotfiles_and_depth(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        fs_store.write_text(SID, "scratchpad/.env", "A=1")
        fs_store.write_text(SID, "scratchpad/a.md", "a")
        fs_store.write_text(SID, "scratchpad/.hidden/b.md", "b")
        fs_store.write_text(SID, "artifacts/x.md", "internal")
        assert ok(await call(ws, "glob", pattern="*", path="scratchpad")).splitlines() == [
            "scratchpad/.env",
            "scratchpad/a.md",
        ]
        assert ok(await call(ws, "glob", pattern="**/*.md")).splitlines() == [
            "AGENTS.md",
            "scratchpad/.hidden/b.md",
            "scratchpad/a.md",
            "skills/pricing/SKILL.md",
        ]
        assert ok(await call(ws, "glob", pattern="scratchpad/.*")) == "scratchpad/.env"
        assert ok(await call(ws, "glob", pattern="*.md")) == "AGENTS.md"

    async def test_no_match_and_refusals(self, ws: WorkspaceActivities) -> None:
        assert "No files match" in ok(await call(ws, "glob", pattern="*.zzz"))
        err(await call(ws, "glob", pattern="../*"))
        err(await call(ws, "glob", pattern="/etc/*"))
        assert "not enabled" in err(await call(ws, "glob", pattern="*", path="skills/secret"))
        assert "secret" not in ok(await call(ws, "glob", pattern="skills/**"))

    @pytest.mark.parametrize(
        ("pattern", "path", "hit"),
        [
            ("*.md", "a.md", True),
            ("*.md", "d/a.md", False),
            ("**/*.md", "a.md", True),
            ("**/*.md", "d/e/a.md", True),
            ("d/**", "d/e/a.md", True),
            ("?.md", "a.md", True),
            ("[ab].md", "b.md", True),
            ("[!ab].md", "c.md", True),
            ("[!ab].md", "a.md", False),
            ("*.{md,txt}", "a.txt", True),
            ("*", ".env", True),
            ("a+b(1).md", "a+b(1).md", True),
        ],
    )
    def test_glob_regex(self, pattern: str, path: str, hit: bool) -> None:
        assert bool(glob_regex(pattern).match(path)) is hit


class TestGrep:
    async def test_results_and_filters(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        fs_store.write_text(SID, "scratchpad/a.md", "order 1\nnothing\norder 2\n")
        fs_store.write_text(SID, "scratchpad/b.txt", "order 3\n")
        fs_store.write_bytes(SID, "scratchpad/c.bin", b"order\x00\xff")
        fs_store.write_text(SID, "artifacts/t.json", "order internal")
        assert ok(await call(ws, "grep", pattern=r"order \d", path="scratchpad")).splitlines() == [
            "scratchpad/a.md:1:order 1",
            "scratchpad/a.md:3:order 2",
            "scratchpad/b.txt:1:order 3",
        ]
        assert ok(await call(ws, "grep", pattern="order", glob="*.txt")) == (
            "scratchpad/b.txt:1:order 3"
        )
        assert ok(await call(ws, "grep", pattern="order 3", path="scratchpad/b.txt")) == (
            "scratchpad/b.txt:1:order 3"
        )
        assert "internal" not in ok(await call(ws, "grep", pattern="order"))
        assert "Be kind" in ok(await call(ws, "grep", pattern="kind"))

    async def test_max_count(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        fs_store.write_text(SID, "scratchpad/a.txt", "hit\n" * 10)
        lines = ok(await call(ws, "grep", pattern="hit", max_count=3)).splitlines()
        assert lines == [
            "scratchpad/a.txt:1:hit",
            "scratchpad/a.txt:2:hit",
            "scratchpad/a.txt:3:hit",
            "(stopped at max_count=3 matches)",
        ]
        exact = ok(await call(ws, "grep", pattern="hit", max_count=10)).splitlines()
        assert len(exact) == 10

    async def test_refusals(self, ws: WorkspaceActivities) -> None:
        assert "invalid regular expression" in err(await call(ws, "grep", pattern="("))
        assert "No matches" in ok(await call(ws, "grep", pattern="zzz"))
        assert "does not exist" in err(await call(ws, "grep", pattern="x", path="scratchpad/no"))
        assert "not enabled" in err(await call(ws, "grep", pattern="x", path="skills/secret"))
        assert "No matches" in ok(await call(ws, "grep", pattern="Hidden"))


class TestPatterns:
    async def test_a_catastrophic_pattern_returns_at_once_and_the_loop_keeps_running(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        """``^(a+)+$`` over ``a…a!`` (minutes of backtracking in Python's ``re``) finds
        nothing, while a trivial asyncio task on the same loop goes on ticking."""
        fs_store.write_text(SID, "scratchpad/evil.txt", ("a" * 30 + "!\n") * 60_000)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.02)
        before = ticks
        started = time.monotonic()
        result = await call(ws, "grep", pattern="^(a+)+$")
        elapsed = time.monotonic() - started
        task.cancel()
        assert result.status == "ok"
        assert result.content == "No matches for '^(a+)+$' under '.'."
        assert ticks - before >= 2  # the loop ran while the grep did
        assert elapsed < 30

    async def test_a_pattern_re2_refuses_is_a_readable_tool_error(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        """A backreference or lookaround is an error result saying why, not a failure."""
        fs_store.write_text(SID, "scratchpad/a.txt", "abab\n")
        back = err(await call(ws, "grep", pattern=r"(ab)\1"))
        assert "backreference" in back and "linear time" in back
        look = err(await call(ws, "grep", pattern=r"a(?=b)"))
        assert "lookahead" in look

    async def test_a_models_glob_never_backtracks(
        self, ws: WorkspaceActivities, fs_store: FilesystemSessionStore
    ) -> None:
        """A glob of many stars over a long name answers at once, in ``glob`` and as a
        ``grep`` filter."""
        fs_store.write_text(SID, f"scratchpad/{'a' * 200}", "x\n")
        star = "a*" * 40 + "b"
        started = time.monotonic()
        assert "No files match" in (await call(ws, "glob", pattern=f"**/{star}")).content
        assert "No matches" in (await call(ws, "grep", pattern="x", glob=star)).content
        assert time.monotonic() - started < 5

    async def test_grep_stops_at_its_byte_budget_and_says_so(
        self,
        ws: WorkspaceActivities,
        fs_store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Past ``GREP_MAX_BYTES`` a grep stops at a line boundary and tells the model."""
        monkeypatch.setattr(workspace_reads, "GREP_MAX_BYTES", 64)
        fs_store.write_text(SID, "scratchpad/a.txt", "hit\n" * 10)
        fs_store.write_text(SID, "scratchpad/b.txt", "hit\n" * 10)
        lines = (await call(ws, "grep", pattern="hit", path="scratchpad")).content.splitlines()
        assert lines[:10] == [f"scratchpad/a.txt:{n}:hit" for n in range(1, 11)]
        assert len([line for line in lines if line.endswith(":hit")]) == 16  # 64 bytes
        assert lines[-1].startswith("(stopped after searching 64 bytes")
