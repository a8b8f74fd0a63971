"""activities/workspace.py: the agent's workspace tools and file placement."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.text_only_store import TextOnlyStore
from archmax_temporal.activities.workspace import WorkspaceActivities, glob_regex, truncate
from archmax_temporal.workflows.workspace_tools import (
    PLACE_FILES_ACTIVITY,
    TOOL_ACTIVITIES,
    TOOL_ARGUMENTS,
    WORKSPACE_TOOLS,
    FilePlacementInput,
    PlacedFile,
    SeedFilesInput,
    WorkspaceToolInput,
    WorkspaceToolResult,
    workspace_tool_schemas,
)

SID = "chat-42"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


@pytest.fixture
def authoring(tmp_path: Path) -> Path:
    root = tmp_path / "authoring"
    (root / "skills" / "pricing" / "scripts").mkdir(parents=True)
    (root / "skills" / "pricing" / "SKILL.md").write_text("---\nname: pricing\n---\nPrice it.\n")
    (root / "skills" / "pricing" / "scripts" / "calc.js").write_text("return 1;\n")
    (root / "skills" / "secret").mkdir()
    (root / "skills" / "secret" / "SKILL.md").write_text("---\nname: secret\n---\nHidden.\n")
    (root / "AGENTS.md").write_text("# Agents\nBe kind.\n")
    return root


@pytest.fixture
def fs_store(tmp_path: Path) -> FilesystemSessionStore:
    return FilesystemSessionStore(tmp_path / "sessions")


@pytest.fixture
def ws(fs_store: FilesystemSessionStore, authoring: Path) -> WorkspaceActivities:
    return WorkspaceActivities(fs_store, authoring)


async def call(
    ws: WorkspaceActivities,
    tool: str,
    visible: list[str] | None = None,
    max_chars: int = 20_000,
    **arguments: Any,
) -> WorkspaceToolResult:
    method = getattr(ws, tool)
    result: WorkspaceToolResult = await method(
        WorkspaceToolInput(
            session_id=SID,
            tool=tool,
            arguments=arguments,
            visible_skills=["pricing"] if visible is None else visible,
            max_result_chars=max_chars,
        )
    )
    return result


def ok(result: WorkspaceToolResult) -> str:
    assert result.status == "ok", result.content
    return result.content


def err(result: WorkspaceToolResult) -> str:
    assert result.status == "error", result.content
    assert result.content.startswith("Error: ")
    return result.content


class TestContracts:
    def test_schemas_match_argument_models(self) -> None:
        schemas = {s.name: s for s in workspace_tool_schemas()}
        assert tuple(schemas) == WORKSPACE_TOOLS
        for name, schema in schemas.items():
            model = TOOL_ARGUMENTS[name]
            assert set(schema.parameters["properties"]) == set(model.model_fields)
            required = {n for n, f in model.model_fields.items() if f.is_required()}
            assert set(schema.parameters.get("required", [])) == required
            assert schema.description

    def test_activity_names(self, ws: WorkspaceActivities) -> None:
        assert {t: f"archmax.workspace.{t}" for t in WORKSPACE_TOOLS} == TOOL_ACTIVITIES
        names = {getattr(fn, "__temporal_activity_definition").name for fn in ws.activities()}
        assert names == set(TOOL_ACTIVITIES.values()) | {
            PLACE_FILES_ACTIVITY,
            "archmax.workspace.seed_files",
        }


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


class TestWriteAndEdit:
    async def test_write_then_read(self, ws: WorkspaceActivities) -> None:
        first = ok(await call(ws, "write_file", file_path="scratchpad/n/a.md", content="hi\n"))
        assert first.startswith("Wrote 'scratchpad/n/a.md'")
        second = ok(await call(ws, "write_file", file_path="scratchpad/n/a.md", content="yo\n"))
        assert second.startswith("Updated")
        assert ok(await call(ws, "read_file", file_path="scratchpad/n/a.md")) == "     1\tyo"

    @pytest.mark.parametrize(
        "path", ["skills/pricing/SKILL.md", "AGENTS.md", "trigger.json", "notes.md", ""]
    )
    async def test_write_outside_scratchpad_refused(
        self, ws: WorkspaceActivities, authoring: Path, path: str
    ) -> None:
        assert "read-only" in err(await call(ws, "write_file", file_path=path, content="x"))
        assert "Price it." in (authoring / "skills" / "pricing" / "SKILL.md").read_text()

    async def test_write_escape_refused(self, ws: WorkspaceActivities, tmp_path: Path) -> None:
        err(await call(ws, "write_file", file_path="scratchpad/../../../x.txt", content="x"))
        assert not (tmp_path / "x.txt").exists()
        err(await call(ws, "write_file", file_path="skills/secret/x", content="x"))

    async def test_edit_unique(self, ws: WorkspaceActivities) -> None:
        await call(ws, "write_file", file_path="scratchpad/a.txt", content="alpha beta gamma")
        done = ok(
            await call(
                ws, "edit_file", file_path="scratchpad/a.txt", old_string="beta", new_string="B"
            )
        )
        assert done == "Replaced 1 occurrence in 'scratchpad/a.txt'."
        assert "alpha B gamma" in ok(await call(ws, "read_file", file_path="scratchpad/a.txt"))

    async def test_edit_ambiguity_and_replace_all(self, ws: WorkspaceActivities) -> None:
        await call(ws, "write_file", file_path="scratchpad/a.txt", content="x x x")
        message = err(
            await call(
                ws, "edit_file", file_path="scratchpad/a.txt", old_string="x", new_string="y"
            )
        )
        assert "occurs 3 times" in message and "replace_all" in message
        assert ok(await call(ws, "read_file", file_path="scratchpad/a.txt")).endswith("x x x")
        done = ok(
            await call(
                ws,
                "edit_file",
                file_path="scratchpad/a.txt",
                old_string="x",
                new_string="y",
                replace_all=True,
            )
        )
        assert "3 occurrences" in done
        assert ok(await call(ws, "read_file", file_path="scratchpad/a.txt")).endswith("y y y")

    async def test_edit_refusals(self, ws: WorkspaceActivities) -> None:
        await call(ws, "write_file", file_path="scratchpad/a.txt", content="abc")
        assert "not found" in err(
            await call(ws, "edit_file", file_path="scratchpad/a.txt", old_string="z", new_string="")
        )
        assert "empty" in err(
            await call(ws, "edit_file", file_path="scratchpad/a.txt", old_string="", new_string="")
        )
        assert "read-only" in err(
            await call(ws, "edit_file", file_path="AGENTS.md", old_string="Be", new_string="Do")
        )


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


class TestInfrastructure:
    async def test_tool_mismatch_is_an_error_result(self, ws: WorkspaceActivities) -> None:
        result = await ws.ls(WorkspaceToolInput(session_id=SID, tool="grep"))
        assert result.status == "error"

    async def test_invalid_session_id_fails_the_activity(self, ws: WorkspaceActivities) -> None:
        with pytest.raises(ApplicationError) as caught:
            await ws.ls(WorkspaceToolInput(session_id="a\x00b", tool="ls"))
        assert caught.value.type == "InvalidSessionIdError"
        assert caught.value.non_retryable

    async def test_runs_in_activity_environment(self, ws: WorkspaceActivities) -> None:
        env = ActivityEnvironment()
        result = await env.run(ws.ls, WorkspaceToolInput(session_id=SID, tool="ls"))
        assert result.status == "ok"

    def test_truncate(self) -> None:
        assert truncate("abc", 3) == ("abc", False)
        assert truncate("abcdef", 2) == ("ab…[truncated: 4 more chars]", True)


class SlowStore(MemorySessionStore):
    """A memory store whose writes take a while."""

    def write_bytes(self, session_id: str, path: str, data: bytes) -> None:
        time.sleep(0.05)
        super().write_bytes(session_id, path, data)


def placement(*files: tuple[str, str, bytes | str]) -> FilePlacementInput:
    out: dict[str, PlacedFile] = {}
    for var, name, content in files:
        if isinstance(content, bytes):
            out[var] = PlacedFile(
                name=name, content=base64.b64encode(content).decode(), encoding="base64"
            )
        else:
            out[var] = PlacedFile(name=name, content=content)
    return FilePlacementInput(session_id=SID, files=out)


class TestPlaceFiles:
    @pytest.fixture(params=["fs", "memory"])
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
        if request.param == "fs":
            return FilesystemSessionStore(tmp_path / "sessions")
        return MemorySessionStore()

    async def test_collisions(self, store: SessionStore, authoring: Path) -> None:
        ws = WorkspaceActivities(store, authoring)
        first = await ws.place_files(placement(("invoice", "report.pdf", PNG)))
        assert first.paths == {"invoice": "scratchpad/attachments/report.pdf"}
        second = await ws.place_files(
            placement(
                ("a", "report.pdf", b"second"),
                ("b", "report.pdf", b"third"),
                ("c", "../../notes", "text"),
                ("d", "archive.tar.gz", b"gz"),
            )
        )
        assert second.paths == {
            "a": "scratchpad/attachments/report-1.pdf",
            "b": "scratchpad/attachments/report-2.pdf",
            "c": "scratchpad/attachments/notes",
            "d": "scratchpad/attachments/archive.tar.gz",
        }
        assert store.read_bytes(SID, "scratchpad/attachments/report.pdf") == PNG
        assert store.read_bytes(SID, "scratchpad/attachments/report-1.pdf") == b"second"
        assert store.read_bytes(SID, "scratchpad/attachments/report-2.pdf") == b"third"
        again = await ws.place_files(placement(("e", "archive.tar.gz", b"gz2")))
        assert again.paths == {"e": "scratchpad/attachments/archive.tar-1.gz"}

    async def test_concurrent_same_name_get_different_names(
        self, store: SessionStore, authoring: Path
    ) -> None:
        ws = WorkspaceActivities(store, authoring)
        results = await asyncio.gather(
            *(ws.place_files(placement(("f", "out.csv", f"run {i}"))) for i in range(8))
        )
        paths = [r.paths["f"] for r in results]
        assert len(set(paths)) == 8
        assert sorted(paths) == sorted(
            ["scratchpad/attachments/out.csv"]
            + [f"scratchpad/attachments/out-{n}.csv" for n in range(1, 8)]
        )
        contents = {store.read_text(SID, p) for p in paths}
        assert contents == {f"run {i}" for i in range(8)}

    async def test_concurrent_placements_are_serialised(self, authoring: Path) -> None:
        """A slow store widens the window between choosing a name and writing it: only the
        per-session lock keeps two placements from choosing the same name."""
        store = SlowStore()
        ws = WorkspaceActivities(store, authoring)
        results = await asyncio.gather(
            *(ws.place_files(placement(("f", "out.csv", f"run {i}"))) for i in range(4))
        )
        paths = {r.paths["f"] for r in results}
        assert len(paths) == 4
        assert {store.read_text(SID, p) for p in paths} == {f"run {i}" for i in range(4)}

    async def test_never_overwrites_a_file_written_elsewhere(
        self, store: SessionStore, authoring: Path
    ) -> None:
        store.write_text(SID, "scratchpad/attachments/a.txt", "agent's")
        ws = WorkspaceActivities(store, authoring)
        result = await ws.place_files(placement(("x", "a.txt", "host's")))
        assert result.paths["x"] == "scratchpad/attachments/a-1.txt"
        assert store.read_text(SID, "scratchpad/attachments/a.txt") == "agent's"

    async def test_placed_files_are_visible_to_tools(
        self, store: SessionStore, authoring: Path
    ) -> None:
        ws = WorkspaceActivities(store, authoring)
        await ws.place_files(placement(("x", "a.txt", "hello")))
        assert ok(await call(ws, "read_file", file_path="scratchpad/attachments/a.txt")) == (
            "     1\thello"
        )

    async def test_text_only_store_refuses_binary_writes_nothing(self, authoring: Path) -> None:
        inner = MemorySessionStore()
        ws = WorkspaceActivities(TextOnlyStore(inner), authoring)
        with pytest.raises(ApplicationError) as caught:
            await ws.place_files(
                placement(("note", "a.txt", "text first"), ("scan", "scan.pdf", PNG))
            )
        assert caught.value.type == "StoreCapabilityError"
        assert caught.value.non_retryable
        assert "scratchpad/attachments/scan.pdf" in str(caught.value)
        assert inner.walk(SID, "") == []

    async def test_text_only_store_places_text(self, authoring: Path) -> None:
        inner = MemorySessionStore()
        ws = WorkspaceActivities(TextOnlyStore(inner), authoring)
        result = await ws.place_files(placement(("a", "a.txt", "plain"), ("b", "b.csv", b"x,y\n")))
        assert inner.read_text(SID, result.paths["b"]) == "x,y\n"

    async def test_bad_base64_refused(self, authoring: Path) -> None:
        ws = WorkspaceActivities(MemorySessionStore(), authoring)
        bad = FilePlacementInput(
            session_id=SID,
            files={"x": PlacedFile(name="a.bin", content="***", encoding="base64")},
        )
        with pytest.raises(ApplicationError, match="base64"):
            await ws.place_files(bad)


class TestSeedFiles:
    async def test_seed_paths(self, authoring: Path) -> None:
        store = MemorySessionStore()
        ws = WorkspaceActivities(store, authoring)
        result = await ws.seed_files(
            SeedFilesInput.model_validate(
                {
                    "session_id": SID,
                    "files": {
                        "trigger.json": {"content": '{"a": 1}'},
                        "scratchpad/in/data.bin": {
                            "content": base64.b64encode(PNG).decode(),
                            "encoding": "base64",
                        },
                    },
                }
            )
        )
        assert result.paths == ["trigger.json", "scratchpad/in/data.bin"]
        assert store.read_bytes(SID, "scratchpad/in/data.bin") == PNG
        assert '{"a": 1}' in ok(await call(ws, "read_file", file_path="trigger.json"))

    @pytest.mark.parametrize(
        "path",
        ["skills/pricing/x.md", "AGENTS.md", "artifacts/trail.json", "../x", "/abs", "", "."],
    )
    async def test_seed_refusals_write_nothing(self, authoring: Path, path: str) -> None:
        store = MemorySessionStore()
        ws = WorkspaceActivities(store, authoring)
        seed = SeedFilesInput.model_validate(
            {
                "session_id": SID,
                "files": {"scratchpad/ok.txt": {"content": "ok"}, path: {"content": "x"}},
            }
        )
        with pytest.raises(ApplicationError):
            await ws.seed_files(seed)
        assert store.walk(SID, "") == []
        assert "Price it." in (authoring / "skills" / "pricing" / "SKILL.md").read_text()

    async def test_seed_binary_into_text_only_refused(self, authoring: Path) -> None:
        inner = MemorySessionStore()
        ws = WorkspaceActivities(TextOnlyStore(inner), authoring)
        seed = SeedFilesInput.model_validate(
            {
                "session_id": SID,
                "files": {
                    "scratchpad/ok.txt": {"content": "ok"},
                    "scratchpad/x.png": {
                        "content": base64.b64encode(PNG).decode(),
                        "encoding": "base64",
                    },
                },
            }
        )
        with pytest.raises(ApplicationError, match=r"scratchpad/x\.png") as caught:
            await ws.seed_files(seed)
        assert caught.value.type == "StoreCapabilityError"
        assert inner.walk(SID, "") == []


# --- copy_file, move_file, remove_file (archmax 0.4) -----------------------------------------


async def test_copy_is_byte_exact_and_creates_the_destinations_folders(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_bytes(SID, "scratchpad/in/logo.png", PNG)
    result = await call(
        ws, "copy_file", source="scratchpad/in/logo.png", destination="scratchpad/out/a/logo.png"
    )
    assert result.status == "ok"
    assert result.content.startswith("Copied 'scratchpad/in/logo.png' to 'scratchpad/out/a/")
    assert fs_store.read_bytes(SID, "scratchpad/out/a/logo.png") == PNG
    assert fs_store.read_bytes(SID, "scratchpad/in/logo.png") == PNG


async def test_copy_reads_a_skill_asset_into_the_scratchpad(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    result = await call(
        ws, "copy_file", source="skills/pricing/scripts/calc.js", destination="scratchpad/calc.js"
    )
    assert result.status == "ok"
    assert fs_store.read_text(SID, "scratchpad/calc.js") == "return 1;\n"


async def test_an_existing_destination_needs_overwrite(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_text(SID, "scratchpad/a.txt", "new")
    fs_store.write_text(SID, "scratchpad/b.txt", "old")
    refused = await call(ws, "copy_file", source="scratchpad/a.txt", destination="scratchpad/b.txt")
    assert refused.status == "error"
    assert "'scratchpad/b.txt' exists; pass overwrite: true" in refused.content
    assert fs_store.read_text(SID, "scratchpad/b.txt") == "old"
    done = await call(
        ws, "copy_file", source="scratchpad/a.txt", destination="scratchpad/b.txt", overwrite=True
    )
    assert done.status == "ok" and fs_store.read_text(SID, "scratchpad/b.txt") == "new"


async def test_a_copy_onto_itself_and_into_a_read_only_area_are_refused(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_text(SID, "scratchpad/a.txt", "x")
    same = await call(ws, "copy_file", source="scratchpad/a.txt", destination="scratchpad/a.txt")
    assert same.status == "error" and "both source and destination" in same.content
    mount = await call(ws, "copy_file", source="scratchpad/a.txt", destination="skills/pricing/a")
    assert mount.status == "error" and "read-only" in mount.content


async def test_move_writes_the_destination_then_removes_the_source(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_text(SID, "scratchpad/draft.md", "# Draft")
    result = await call(
        ws, "move_file", source="scratchpad/draft.md", destination="scratchpad/final/report.md"
    )
    assert result.status == "ok"
    assert result.content.startswith("Moved 'scratchpad/draft.md' to 'scratchpad/final/report.md'")
    assert fs_store.read_text(SID, "scratchpad/final/report.md") == "# Draft"
    assert not fs_store.exists(SID, "scratchpad/draft.md")


async def test_a_move_out_of_a_read_only_area_is_refused_and_moves_nothing(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    result = await call(
        ws, "move_file", source="skills/pricing/SKILL.md", destination="scratchpad/SKILL.md"
    )
    assert result.status == "error" and "read-only" in result.content
    assert not fs_store.exists(SID, "scratchpad/SKILL.md")


async def test_remove_deletes_one_file_and_refuses_folders_and_mounts(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_text(SID, "scratchpad/tmp/a.txt", "x")
    assert (await call(ws, "remove_file", file_path="scratchpad/tmp/a.txt")).status == "ok"
    assert not fs_store.exists(SID, "scratchpad/tmp/a.txt")
    fs_store.write_text(SID, "scratchpad/tmp/b.txt", "y")
    folder = await call(ws, "remove_file", file_path="scratchpad/tmp")
    assert folder.status == "error" and "is a folder" in folder.content
    missing = await call(ws, "remove_file", file_path="scratchpad/none.txt")
    assert missing.status == "error" and "does not exist" in missing.content
    mount = await call(ws, "remove_file", file_path="AGENTS.md")
    assert mount.status == "error" and "read-only" in mount.content


@pytest.mark.parametrize("make", [MemorySessionStore, lambda: TextOnlyStore(MemorySessionStore())])
async def test_every_bundled_store_can_delete(
    authoring: Path, make: Callable[[], SessionStore]
) -> None:
    store = make()
    store.write_text(SID, "scratchpad/a.txt", "x")
    tools = WorkspaceActivities(store, authoring)
    assert (await call(tools, "remove_file", file_path="scratchpad/a.txt")).status == "ok"
    assert not store.exists(SID, "scratchpad/a.txt")


async def test_a_store_without_delete_refuses_a_removal_by_name(authoring: Path) -> None:
    class NoDelete:
        """A store that implements the minimal protocol only."""

        def __init__(self) -> None:
            self._inner = MemorySessionStore()

        def __getattr__(self, name: str) -> Any:
            if name == "delete":
                raise AttributeError(name)
            return getattr(self._inner, name)

    store = NoDelete()
    store.write_text(SID, "scratchpad/a.txt", "x")
    tools = WorkspaceActivities(store, authoring)
    result = await call(tools, "remove_file", file_path="scratchpad/a.txt")
    assert result.status == "error"
    assert "this session store cannot delete files ('scratchpad/a.txt')" in result.content
    assert store.exists(SID, "scratchpad/a.txt")


async def test_a_text_only_store_refuses_a_binary_copy(authoring: Path) -> None:
    store = TextOnlyStore(MemorySessionStore())
    MemorySessionStore.write_bytes(store._inner, SID, "scratchpad/logo.png", PNG)  # type: ignore[arg-type]
    tools = WorkspaceActivities(store, authoring)
    result = await call(
        tools, "copy_file", source="scratchpad/logo.png", destination="scratchpad/b.png"
    )
    assert result.status == "error" and "takes text only" in result.content
