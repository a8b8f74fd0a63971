"""The store contract: the workspace tools answer the same on a folder and on S3.

One script of tool calls (every tool: reads, writes, refusals of every kind) runs through
:class:`WorkspaceActivities` over a :class:`FilesystemSessionStore` and over an
:class:`ObjectSessionStore` on a real S3 API (moto in server mode, ``s3_url``); the results
must be equal byte for byte, and so must the files left behind. Then what only a shared store
owes a fleet of workers: two writers holding the same version, exactly one wins; an object
created "if absent" by many at once, exactly once. Last, a whole session on S3: a worker and a
host on the dev server, nothing on local disk.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.effects import EffectJournal
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.object_store import ObjectSessionStore, open_store
from archmax_temporal.activities.session_store import SessionStore, write_upload
from archmax_temporal.activities.store_errors import StoreConflictError
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.contracts.workspace import (
    FilePlacementInput,
    PlacedFile,
    SeedFilesInput,
    SessionFileRef,
    WorkspaceToolInput,
    WorkspaceToolResult,
)
from archmax_temporal.workflows.zones import RUNTIME_INTERNAL
from tests.support.agents import Scripted, running_agent, write_workflow

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"
LONG = "n" * 300

T = TypeVar("T")

Call = tuple[str, dict[str, Any]]

SCRIPT: list[Call] = [
    ("ls", {}),
    ("ls", {"path": "scratchpad"}),
    ("ls", {"path": "scratchpad/in"}),
    ("ls", {"path": "scratchpad/in/logo.png"}),
    ("ls", {"path": "scratchpad/none"}),
    ("ls", {"path": "artifacts"}),
    ("ls", {"path": "skills"}),
    ("ls", {"path": "skills/pricing"}),
    ("ls", {"path": "skills/secret"}),
    ("ls", {"path": "../x"}),
    ("read_file", {"file_path": "trigger.json"}),
    ("read_file", {"file_path": "scratchpad/in/logo.png"}),
    ("read_file", {"file_path": "scratchpad/in/data.bin"}),
    ("read_file", {"file_path": "scratchpad/none.txt"}),
    ("read_file", {"file_path": "scratchpad/in"}),
    ("read_file", {"file_path": "scratchpad"}),
    ("read_file", {"file_path": "scratchpad/in/logo.png/x"}),
    ("read_file", {"file_path": "artifacts/trail.json"}),
    ("read_file", {"file_path": "checkpoints/cp.json"}),
    ("read_file", {"file_path": "skills/pricing/SKILL.md"}),
    ("read_file", {"file_path": "AGENTS.md"}),
    ("read_file", {"file_path": "/etc/passwd"}),
    ("read_file", {"file_path": "scratchpad/../../x"}),
    ("read_file", {"file_path": f"scratchpad/{LONG}"}),
    ("write_file", {"file_path": "scratchpad/notes.md", "content": "one\ntwo needle\nthree\n"}),
    ("write_file", {"file_path": "scratchpad/notes.md", "content": "a needle\nb\nneedle c\nd\n"}),
    ("read_file", {"file_path": "scratchpad/notes.md", "offset": 1, "limit": 2}),
    ("read_file", {"file_path": "scratchpad/notes.md", "offset": 9}),
    ("write_file", {"file_path": "scratchpad/empty.txt", "content": ""}),
    ("read_file", {"file_path": "scratchpad/empty.txt"}),
    ("write_file", {"file_path": "scratchpad/deep/er/still.txt", "content": "deep needle"}),
    # a folder emptied by a move or a removal stays on disk and not on S3: each keeps a file
    ("write_file", {"file_path": "scratchpad/deep/er/keep.txt", "content": "kept"}),
    ("write_file", {"file_path": "scratchpad/copy/keep.txt", "content": "kept"}),
    ("write_file", {"file_path": "scratchpad/héllo wörld #1.md", "content": "ünïcode needle"}),
    ("write_file", {"file_path": "AGENTS.md", "content": "x"}),
    ("write_file", {"file_path": "trigger.json", "content": "x"}),
    ("write_file", {"file_path": "skills/pricing/x.md", "content": "x"}),
    ("write_file", {"file_path": "artifacts/x.json", "content": "x"}),
    ("write_file", {"file_path": "../../etc/x", "content": "x"}),
    ("write_file", {"file_path": "scratchpad", "content": "x"}),
    ("write_file", {"file_path": "scratchpad/in", "content": "x"}),
    ("write_file", {"file_path": "scratchpad/in/logo.png/child.txt", "content": "x"}),
    ("write_file", {"file_path": f"scratchpad/{LONG}", "content": "x"}),
    ("write_file", {"file_path": f"scratchpad/{LONG}/x.txt", "content": "x"}),
    ("edit_file", {"file_path": "scratchpad/notes.md", "old_string": "b\n", "new_string": "B\n"}),
    ("edit_file", {"file_path": "scratchpad/notes.md", "old_string": "needle", "new_string": "x"}),
    (
        "edit_file",
        {
            "file_path": "scratchpad/notes.md",
            "old_string": "needle",
            "new_string": "pin",
            "replace_all": True,
        },
    ),
    ("edit_file", {"file_path": "scratchpad/notes.md", "old_string": "absent", "new_string": "x"}),
    ("edit_file", {"file_path": "scratchpad/notes.md", "old_string": "", "new_string": "x"}),
    ("edit_file", {"file_path": "scratchpad/in/logo.png", "old_string": "P", "new_string": "Q"}),
    ("edit_file", {"file_path": "scratchpad/none.md", "old_string": "a", "new_string": "b"}),
    ("read_file", {"file_path": "scratchpad/notes.md"}),
    ("glob", {"pattern": "**/*.md"}),
    ("glob", {"pattern": "*", "path": "scratchpad"}),
    ("glob", {"pattern": "**"}),
    ("glob", {"pattern": "**/*.png", "path": "scratchpad/in"}),
    ("glob", {"pattern": "*.nothing"}),
    ("glob", {"pattern": "/abs/*"}),
    ("grep", {"pattern": "needle"}),
    ("grep", {"pattern": "needle|pin", "path": "scratchpad"}),
    ("grep", {"pattern": "needle", "glob": "*.txt"}),
    ("grep", {"pattern": "e", "max_count": 2}),
    ("grep", {"pattern": "needle", "path": "scratchpad/none"}),
    ("grep", {"pattern": "needle", "path": "artifacts"}),
    ("grep", {"pattern": "("}),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "scratchpad/copy/notes.md"}),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "scratchpad/copy/notes.md"}),
    (
        "copy_file",
        {
            "source": "scratchpad/in/logo.png",
            "destination": "scratchpad/copy/notes.md",
            "overwrite": True,
        },
    ),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "scratchpad/notes.md"}),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "scratchpad/in"}),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "AGENTS.md"}),
    ("copy_file", {"source": "scratchpad/none.md", "destination": "scratchpad/x.md"}),
    ("copy_file", {"source": "skills/pricing/scripts/calc.js", "destination": "scratchpad/c.js"}),
    ("copy_file", {"source": "trigger.json", "destination": "scratchpad/in/logo.png/t.json"}),
    ("move_file", {"source": "scratchpad/copy/notes.md", "destination": "scratchpad/moved.png"}),
    ("move_file", {"source": "skills/pricing/SKILL.md", "destination": "scratchpad/s.md"}),
    ("move_file", {"source": "scratchpad/none.md", "destination": "scratchpad/s.md"}),
    ("move_file", {"source": "scratchpad/c.js", "destination": "scratchpad/moved.png"}),
    ("remove_file", {"file_path": "scratchpad/deep/er/still.txt"}),
    ("remove_file", {"file_path": "scratchpad/in"}),
    ("remove_file", {"file_path": "scratchpad/none.txt"}),
    ("remove_file", {"file_path": "scratchpad/in/logo.png/x"}),
    ("remove_file", {"file_path": "AGENTS.md"}),
    ("remove_file", {"file_path": "trigger.json"}),
    ("remove_file", {"file_path": "scratchpad"}),
    ("ls", {"path": "scratchpad"}),
    ("ls", {}),
    ("glob", {"pattern": "**"}),
    ("read_file", {"file_path": "scratchpad/moved.png"}),
    ("read_file", {"file_path": "scratchpad/héllo wörld #1.md"}),
]
"""Every workspace tool, on files, folders, mounts, runtime areas, and every refusal: escape,
read-only, binary, missing, a folder as a file, a file as a folder, a name too long. No folder
is emptied (see ``test_an_emptied_folder_is_where_the_stores_differ``)."""


def tools_on(store: SessionStore, authoring: Path) -> WorkspaceActivities:
    return WorkspaceActivities(store, authoring)


@pytest.fixture
def authoring(tmp_path: Path) -> Path:
    root = tmp_path / "authoring"
    (root / "skills" / "pricing" / "scripts").mkdir(parents=True)
    (root / "skills" / "pricing" / "SKILL.md").write_text("---\nname: pricing\n---\nneedle\n")
    (root / "skills" / "pricing" / "scripts" / "calc.js").write_text("return 1;\n")
    (root / "skills" / "secret").mkdir()
    (root / "skills" / "secret" / "SKILL.md").write_text("---\nname: secret\n---\nHidden.\n")
    (root / "AGENTS.md").write_text("# Agents\nBe kind.\n")
    return root


@pytest.fixture
def sid() -> str:
    return f"contract-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def folder(tmp_path: Path) -> FilesystemSessionStore:
    return FilesystemSessionStore(tmp_path / "sessions")


@pytest.fixture
def s3(s3_url: str) -> ObjectSessionStore:
    store = open_store(s3_url)
    assert isinstance(store, ObjectSessionStore)
    return store


async def seed(tools: WorkspaceActivities, sid: str) -> None:
    """The same starting point in each store: a trigger, a PNG, bytes, runtime files."""
    await tools.seed_files(
        SeedFilesInput.model_validate(
            {
                "session_id": sid,
                "files": {
                    "trigger.json": {"content": '{"from": "ana@example.com"}'},
                    "scratchpad/in/logo.png": {
                        "content": base64.b64encode(PNG).decode(),
                        "encoding": "base64",
                    },
                    "scratchpad/in/data.bin": {
                        "content": base64.b64encode(b"\x00\x01\x02").decode(),
                        "encoding": "base64",
                    },
                },
            }
        )
    )
    tools.store.write_text(sid, "artifacts/trail.json", '{"needle": true}')
    tools.store.write_text(sid, "checkpoints/cp.json", "{}")


async def run_script(tools: WorkspaceActivities, sid: str) -> list[WorkspaceToolResult]:
    results = []
    for tool, arguments in SCRIPT:
        call = WorkspaceToolInput(
            session_id=sid, tool=tool, arguments=arguments, visible_skills=["pricing"]
        )
        results.append(await getattr(tools, tool)(call))
    return results


def files_of(store: SessionStore, sid: str) -> dict[str, bytes]:
    """Every file the session holds outside the runtime's own areas, with its bytes."""
    return {
        path: store.read_bytes(sid, path)
        for path in store.walk(sid, "")
        if path.split("/")[0] not in RUNTIME_INTERNAL
    }


def assert_same_answers(
    expected: list[WorkspaceToolResult], actual: list[WorkspaceToolResult]
) -> None:
    """Equal, call by call: a failure names the call and both answers."""
    assert len(actual) == len(expected)
    for (tool, arguments), want, got in zip(SCRIPT, expected, actual, strict=True):
        assert got == want, f"{tool} {arguments}:\n  folder: {want!r}\n  s3:     {got!r}"


class TestToolsAnswerAlike:
    async def test_the_script_gives_the_same_answers_and_files(
        self, folder: FilesystemSessionStore, s3: ObjectSessionStore, authoring: Path, sid: str
    ) -> None:
        """Every call answers byte for byte the same on a folder and on S3, refusals
        included, and leaves the same files behind."""
        answers = {}
        for name, store in (("folder", folder), ("s3", s3)):
            tools = tools_on(store, authoring)
            await seed(tools, sid)
            answers[name] = await run_script(tools, sid)
        assert_same_answers(answers["folder"], answers["s3"])
        errors = [r.content for r in answers["s3"] if r.status == "error"]
        for refusal in (
            "cannot climb out",
            "is an absolute path",
            "a parent folder is a file",
            "read-only",
            "binary file",
            "longer than the file system allows",
            "does not exist",
            "is a folder",
            "is a file, not a folder",
            "runtime-internal",
        ):
            assert any(refusal in e for e in errors), refusal
        assert files_of(s3, sid) == files_of(folder, sid)
        assert files_of(s3, sid)["scratchpad/moved.png"] == PNG

    async def test_an_emptied_folder_is_where_the_stores_differ(
        self, folder: FilesystemSessionStore, s3: ObjectSessionStore, authoring: Path, sid: str
    ) -> None:
        """The one difference the agent can see: a folder whose last file was removed stays
        on disk (empty) and is gone from an object store, where folders are implied by keys."""
        listings = {}
        for name, store in (("folder", folder), ("s3", s3)):
            tools = tools_on(store, authoring)
            store.write_text(sid, "scratchpad/tmp/a.txt", "x")
            call = WorkspaceToolInput(
                session_id=sid, tool="remove_file", arguments={"file_path": "scratchpad/tmp/a.txt"}
            )
            assert (await tools.remove_file(call)).status == "ok"
            ls = WorkspaceToolInput(session_id=sid, tool="ls", arguments={"path": "scratchpad/tmp"})
            listings[name] = await tools.ls(ls)
        assert listings["folder"].content == "'scratchpad/tmp' is empty."
        assert listings["s3"].status == "error"
        assert listings["s3"].content == "Error: 'scratchpad/tmp' does not exist"

    async def test_journaled_calls_replay_alike(
        self, folder: FilesystemSessionStore, s3: ObjectSessionStore, authoring: Path, sid: str
    ) -> None:
        """The sandbox's path (``run_tool`` with an idempotency key): the entry is recorded in
        the store, a retry with the same key answers the recorded answer, on both stores."""
        answers: dict[str, list[str]] = {}
        for name, store in (("folder", folder), ("s3", s3)):
            tools = tools_on(store, authoring)
            got = []
            for _attempt in range(2):
                for n, (tool, arguments) in enumerate(
                    [
                        ("write_file", {"file_path": "scratchpad/j.md", "content": "v1"}),
                        (
                            "edit_file",
                            {
                                "file_path": "scratchpad/j.md",
                                "old_string": "v1",
                                "new_string": "v2",
                            },
                        ),
                        (
                            "move_file",
                            {"source": "scratchpad/j.md", "destination": "scratchpad/k.md"},
                        ),
                    ]
                ):
                    call = WorkspaceToolInput(session_id=sid, tool=tool, arguments=arguments)
                    result = tools.run_tool(call, key=f"run-1.{n}")
                    got.append(f"{result.status}:{result.content}")
            answers[name] = got
            assert store.read_text(sid, "scratchpad/k.md") == "v2"
            assert not store.exists(sid, "scratchpad/j.md")
            effects = [e.name for e in store.list_dir(sid, "checkpoints/effects")]
            assert effects == ["run-1.0.json", "run-1.1.json", "run-1.2.json"]
            assert EffectJournal(store).prune(sid, "run-1") == 3
        assert answers["s3"] == answers["folder"]
        assert answers["s3"][:3] == answers["s3"][3:]  # the retry: the recorded answers

    async def test_placements_and_seeds_alike(
        self, folder: FilesystemSessionStore, s3: ObjectSessionStore, authoring: Path, sid: str
    ) -> None:
        """Files handed to a session (by content, by upload reference, copied from another
        session) land under the same names; refused seeds are refused alike."""
        outcomes: dict[str, list[object]] = {}
        for name, store in (("folder", folder), ("s3", s3)):
            tools = tools_on(store, authoring)
            store.write_text("parent-1", "scratchpad/report.json", '{"ok": true}')
            store.write_text(sid, "scratchpad/attachments/report.pdf", "written by the agent")
            ref = write_upload(store, PNG)
            got: list[object] = []
            for files, copies in (
                (
                    {
                        "a": PlacedFile(name="report.pdf", content="second"),
                        "b": PlacedFile(name="report.pdf", content="third"),
                        "c": PlacedFile(name="../../notes", content="text"),
                        "d": PlacedFile(name="scan.png", ref=ref),
                    },
                    {"e": SessionFileRef(session_id="parent-1", path="scratchpad/report.json")},
                ),
                ({"f": PlacedFile(name="scan.png", ref=ref)}, {}),
            ):
                placed = await tools.place_files(
                    FilePlacementInput(session_id=sid, files=files, copies=copies)
                )
                got.append(placed.paths)
            for seeded in (
                {"scratchpad/s/a.txt": {"content": "a"}},
                {"AGENTS.md": {"content": "x"}},
            ):
                seed_input = SeedFilesInput.model_validate({"session_id": sid, "files": seeded})
                try:
                    got.append((await tools.seed_files(seed_input)).paths)
                except ApplicationError as exc:
                    got.append((exc.type, str(exc), exc.non_retryable))
            missing = FilePlacementInput(
                session_id=sid,
                copies={"x": SessionFileRef(session_id="parent-1", path="scratchpad/none.json")},
            )
            with pytest.raises(ApplicationError) as refused:
                await tools.place_files(missing)
            got.append((refused.value.type, str(refused.value)))
            outcomes[name] = got
        assert outcomes["s3"] == outcomes["folder"]
        assert files_of(s3, sid) == files_of(folder, sid)
        assert files_of(s3, sid)["scratchpad/attachments/scan.png"] == PNG


def race(workers: int, attempt: Callable[[int], T]) -> list[T | BaseException]:
    """Run ``attempt(i)`` for each worker at once (all released together by a barrier)."""
    start = threading.Barrier(workers)

    def run(i: int) -> T | BaseException:
        start.wait()
        try:
            return attempt(i)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(run, range(workers)))


class TestConditionalWritesOnS3:
    def test_two_writers_with_the_same_version_exactly_one_wins(
        self, s3_url: str, sid: str
    ) -> None:
        """Two workers (two stores on the same URL) read the same version and write: one
        write lands, the other is refused with :class:`StoreConflictError` and wrote
        nothing; the winner's version is what a reader sees next."""
        stores = [open_store(s3_url), open_store(s3_url)]
        stores[0].write_if(sid, "artifacts/state.json", b"0", version=None)

        def writer(round_: int, version: str) -> Callable[[int], str]:
            def write(i: int) -> str:
                data = f"{round_}-{i}".encode()
                return stores[i].write_if(sid, "artifacts/state.json", data, version=version)

            return write

        for round_ in range(1, 6):
            _, version = stores[0].read_versioned(sid, "artifacts/state.json")
            assert stores[1].read_versioned(sid, "artifacts/state.json")[1] == version
            outcomes = race(2, writer(round_, version))
            won = [i for i, o in enumerate(outcomes) if isinstance(o, str)]
            lost = [o for o in outcomes if isinstance(o, StoreConflictError)]
            assert len(won) == 1 and len(lost) == 1, outcomes
            assert "changed since it was read" in str(lost[0])
            data, now = stores[1].read_versioned(sid, "artifacts/state.json")
            assert (data, now) == (f"{round_}-{won[0]}".encode(), outcomes[won[0]])

    def test_put_if_absent_is_written_once(self, s3_url: str, sid: str) -> None:
        """Six workers create the same object at once: one creates it, five are refused and
        the object holds the creator's bytes; a shared object likewise."""
        stores = [open_store(s3_url) for _ in range(6)]
        outcomes = race(
            6, lambda i: stores[i].write_if(sid, "artifacts/once.json", b"%d" % i, version=None)
        )
        won = [i for i, o in enumerate(outcomes) if isinstance(o, str)]
        assert len(won) == 1, outcomes
        assert all(isinstance(o, StoreConflictError) for o in outcomes if not isinstance(o, str))
        assert stores[0].read_bytes(sid, "artifacts/once.json") == b"%d" % won[0]

        created = race(6, lambda i: stores[i].write_shared_once("_specs/s.json", b"%d" % i))
        assert sorted(created, key=str) == [False] * 5 + [True]
        assert stores[0].read_shared("_specs/s.json") == b"%d" % created.index(True)


SESSION_SPEC = """
states:
  inbox:
    triggers: { manual: }
    instructions: Read the attachment, keep notes.
"""

SESSION_PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"last_tool": "read_file", "last_tool_result": "/(?P<total>TOTAL \\d+)/"},
                "reply": {"content": "The invoice says {total}."},
            },
            {
                "when": {"last_tool": "write_file"},
                "reply": {"content": "Noted."},
            },
            {
                "when": {"last_user": "invoice"},
                "reply": {
                    "tool_calls": [
                        {"name": "read_file", "arguments": {"file_path": "${{{{invoice}}}}"}}
                    ]
                },
            },
            {
                "when": {"last_user": "note"},
                "reply": {
                    "tool_calls": [
                        {
                            "name": "write_file",
                            "arguments": {"file_path": "scratchpad/notes.md", "content": "paid"},
                        }
                    ]
                },
            },
            {"when": {}, "reply": {"content": "ok"}},
        ]
    }
)


async def test_a_session_runs_on_s3_end_to_end(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path, s3_url: str
) -> None:
    """A host and a worker on one ``s3://`` store: files handed over land in the bucket, the
    agent reads and writes them through its tools across two turns, and the session folder
    on local disk never appears."""
    write_workflow(tmp_path, "inbox", SESSION_SPEC)
    server = scripted(SESSION_PLAYBOOK)
    sid = f"s3-session-{uuid.uuid4().hex[:8]}"
    raw = bytes(range(256))
    async with running_agent(client, task_queue, tmp_path, "inbox", server, store=s3_url) as agent:
        first = await agent.workflow.send(
            sid,
            "here is the invoice",
            files={"invoice": ("invoice.txt", "TOTAL 412"), "scan": ("scan.bin", raw)},
        )
        second = await agent.workflow.send(sid, "note that it is paid")
    assert first.reply == "The invoice says TOTAL 412."
    assert second.reply == "Noted."
    assert first.variables["invoice"].value == "scratchpad/attachments/invoice.txt"
    store = open_store(s3_url)
    assert store.read_bytes(sid, "scratchpad/attachments/scan.bin") == raw
    assert store.read_text(sid, "scratchpad/notes.md") == "paid"
    assert any(p.startswith("artifacts/") for p in store.walk(sid, ""))
    assert not (tmp_path / "sessions").exists()
