"""The sandbox activity on its own: limits that stop a run without harming the worker, the
hook contract's globals, and ``tools.*`` calls governed, mocked and served from the workspace.

Every run goes through Temporal's ``ActivityEnvironment`` and the real QuickJS process.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.errors import ForbiddenSandboxImportError
from archmax_temporal.workflows.models import SandboxToolCall, ToolMock
from archmax_temporal.workflows.sandbox import SandboxLimits, SandboxRunResult
from archmax_temporal.workflows.sandbox_source import forbidden_imports, prepare
from tests.support.sandbox import run


@pytest.fixture
def sandbox(tmp_path: Path) -> SandboxActivities:
    for slug, text in (("orders", '[{"id": "ORD-1"}]'), ("secret", "classified")):
        assets = tmp_path / "skills" / slug / "assets"
        assets.mkdir(parents=True)
        (assets / "data.json").write_text(text)
    store = FilesystemSessionStore(tmp_path / "sessions")
    store.write_text("sb-1", "scratchpad/private/key.txt", "hunter2")
    return SandboxActivities(WorkspaceActivities(store, tmp_path))


async def failure(sandbox: SandboxActivities, source: str, **overrides: Any) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await run(sandbox, source, **overrides)
    assert caught.value.non_retryable
    return caught.value


# --- limits -------------------------------------------------------------------------------


async def test_an_endless_loop_times_out_with_a_clear_error(sandbox: SandboxActivities) -> None:
    started = time.monotonic()
    error = await failure(
        sandbox, "while (true) {}", limits=SandboxLimits(timeout_ms=300, memory_limit_bytes=2**25)
    )
    assert error.type == "SandboxTimeoutError"
    assert "timed out after 300 ms" in error.message and "settings.timeoutMs" in error.message
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "bomb",
    [
        "const a = []; while (true) { a.push('x'.repeat(1024) + Math.random()); }",
        # QuickJS throws a bare null when it cannot even allocate its out-of-memory error.
        "const a = []; while (true) a.push({ n: a.length });",
    ],
    ids=["strings", "objects"],
)
async def test_a_memory_bomb_is_stopped_by_the_quota(sandbox: SandboxActivities, bomb: str) -> None:
    """Stopped by the quota however slowly the machine runs it: the time limit is far beyond
    what filling 16 MiB takes (on a loaded machine, 2 s was not always enough)."""
    limits = SandboxLimits(timeout_ms=120_000, memory_limit_bytes=16 * 2**20)
    error = await failure(sandbox, bomb, limits=limits)
    assert error.type == "SandboxMemoryError"
    assert "settings.memoryLimitBytes" in error.message


async def test_a_throw_is_a_script_error_naming_its_message(sandbox: SandboxActivities) -> None:
    source = 'export default () => {\n  throw new Error("refund.json is missing");\n};\n'
    error = await failure(sandbox, source)
    assert error.type == "SandboxScriptError"
    assert error.message == "hooks/test.js (line 2): Error: refund.json is missing"


async def test_a_script_throwing_null_is_a_script_error_not_a_memory_error(
    sandbox: SandboxActivities,
) -> None:
    error = await failure(sandbox, "throw null;")
    assert error.type == "SandboxScriptError" and "null" in error.message


async def test_runaway_recursion_is_a_script_error_not_a_crash(sandbox: SandboxActivities) -> None:
    error = await failure(sandbox, "function f() { return f(); } f();")
    assert error.type == "SandboxScriptError" and "stack overflow" in error.message


async def test_the_worker_survives_and_serves_the_next_run(sandbox: SandboxActivities) -> None:
    """Bombs running side by side end on their own; a healthy run beside them still answers.
    The memory bomb has a minute before its timeout, so on however slow a machine it is the
    memory limit that stops it."""
    limits = SandboxLimits(timeout_ms=500, memory_limit_bytes=2**24)
    roomy = SandboxLimits(timeout_ms=60_000, memory_limit_bytes=2**24)
    results = await asyncio.gather(
        run(sandbox, "while (true) {}", limits=limits),
        run(
            sandbox,
            "const a = []; while (true) a.push('y'.repeat(4096) + a.length);",
            limits=roomy,
        ),
        run(sandbox, "export default () => ok()"),
        return_exceptions=True,
    )
    assert [getattr(r, "type", None) for r in results[:2]] == [
        "SandboxTimeoutError",
        "SandboxMemoryError",
    ]
    assert isinstance(results[2], SandboxRunResult) and results[2].value == {"verdict": "ok"}


async def test_a_result_longer_than_max_result_chars_is_refused(sandbox: SandboxActivities) -> None:
    limits = SandboxLimits(timeout_ms=2000, max_result_chars=100)
    error = await failure(sandbox, "'x'.repeat(500)", limits=limits)
    assert error.type == "SandboxResultTooLargeError"


async def test_tool_calls_beyond_max_ptc_calls_are_refused(sandbox: SandboxActivities) -> None:
    source = """export default async ({ tools }) => {
      const file_path = "skills/orders/assets/data.json";
      for (let i = 0; i < 3; i++) await tools.readFile({ file_path });
    }"""
    error = await failure(sandbox, source, limits=SandboxLimits(max_ptc_calls=2))
    assert "settings.maxPtcCalls" in error.message


# --- imports ------------------------------------------------------------------------------


def test_the_harness_import_is_stripped_keeping_line_numbers() -> None:
    source = 'import { ok, veto } from "@archmax-ai/harness/sandbox";\nexport default () => ok();\n'
    prepared = prepare(source, "hooks/a.js")
    assert prepared.count("\n") == source.count("\n")
    assert "import" not in prepared and "globalThis.__archmax_default = () => ok()" in prepared


def test_any_other_import_is_forbidden() -> None:
    assert forbidden_imports('import fs from "node:fs";\nconst x = require("child_process");') == [
        "node:fs",
        "child_process",
    ]
    with pytest.raises(ForbiddenSandboxImportError, match="node:fs"):
        prepare('import fs from "node:fs";', "hooks/a.js")


async def test_a_forbidden_import_fails_the_run_typed(sandbox: SandboxActivities) -> None:
    error = await failure(sandbox, 'import { readFileSync } from "fs";\nexport default () => ok();')
    assert error.type == "ForbiddenSandboxImportError" and "'fs'" in error.message


# --- the contract -------------------------------------------------------------------------


async def test_the_default_export_receives_args_and_returns_a_verdict(
    sandbox: SandboxActivities,
) -> None:
    source = """import { veto, defineHook } from "@archmax-ai/harness/sandbox";
    export default defineHook(async ({ state, phase, variables }) =>
      veto(`${phase} ${state}: ${variables.order_id}`));"""
    result = await run(
        sandbox, source, args={"state": "intake", "phase": "before", "variables": {"order_id": 7}}
    )
    assert result.value == {"verdict": "veto", "reason": "before intake: 7"}


async def test_a_plain_script_completion_value_is_the_result_and_args_is_global(
    sandbox: SandboxActivities,
) -> None:
    result = await run(
        sandbox,
        "console.log('checking', args.state);\nargs.state === 'intake' ? correct('again') : ok()",
        args={"state": "intake"},
    )
    assert result.value == {"verdict": "correct", "reason": "again"}
    assert result.logs == ["log checking intake"]


async def test_returning_nothing_is_marked(sandbox: SandboxActivities) -> None:
    result = await run(sandbox, "export default async () => {}")
    assert result.returned_nothing and result.value is None


# --- tools --------------------------------------------------------------------------------


async def test_read_file_returns_the_raw_text_on_runtime_authority(
    sandbox: SandboxActivities,
) -> None:
    """The state forbids read_file and enables no skill; a hook reads a bundle anyway."""
    source = """export default async ({ tools }) => {
      const file_path = "skills/orders/assets/data.json";
      return JSON.parse(await tools.readFile({ file_path }))[0].id;
    }"""
    result = await run(sandbox, source)
    assert result.value == "ORD-1"
    assert [(c.tool, c.status) for c in result.calls] == [("read_file", "ok")]


async def test_workflow_wide_denials_and_zones_still_bind_a_hook(
    sandbox: SandboxActivities,
) -> None:
    source = """export default async ({ tools }) => {
      const out = [];
      for (const file_path of ["skills/secret/assets/data.json", "scratchpad/private/key.txt",
                               "../outside.txt", "artifacts/trail.json"]) {
        try { await tools.readFile({ file_path }); out.push("read"); }
        catch (e) { out.push(e.message); }
      }
      return out;
    }"""
    result = await run(sandbox, source, visible_skills=["orders", "secret"])
    rules = [json.dumps(v) for v in result.value]
    assert "skill.forbidden" in rules[0]
    assert "tool.forbidden" in rules[1]
    assert "zone.outside-workspace" in rules[2]
    assert "zone.runtime-internal" in rules[3]
    assert all(c.status == "blocked" for c in result.calls)
    assert "hunter2" not in json.dumps(result.value)


async def test_a_script_is_governed_as_the_agent(sandbox: SandboxActivities) -> None:
    """On the agent's authority the state's skill set binds: the same read is blocked."""
    source = """export default async ({ tools }) => {
      try { return await tools.readFile({ file_path: "skills/orders/assets/data.json" }); }
      catch (e) { return e.message; }
    }"""
    result = await run(sandbox, source, kind="script", label="skills/orders/scripts/x.js")
    assert "skill.not-allowed" in result.value


async def test_a_mock_answers_a_hook_call_and_an_error_mock_fails_it(
    sandbox: SandboxActivities,
) -> None:
    source = """export default async ({ tools }) => {
      const first = await tools.readFile({ file_path: "skills/orders/assets/data.json" });
      let second;
      try { await tools.ls({ path: "scratchpad" }); } catch (e) { second = e.message; }
      return [first, second];
    }"""
    mocks = [
        ToolMock(tool="read_file", when_input={"file_path": "/orders/"}, result="[]"),
        ToolMock(tool="ls", result={"error": "listing is down"}),
    ]
    result = await run(sandbox, source, mocks=mocks)
    assert result.value == ["[]", "listing is down"]
    assert [(c.status, c.mocked) for c in result.calls] == [("ok", True), ("error", True)]
    assert [c.tool for c in result.failed_calls] == ["ls"]


async def test_write_file_goes_to_the_session_scratchpad(
    sandbox: SandboxActivities, tmp_path: Path
) -> None:
    source = """export default async ({ tools }) =>
      tools.writeFile({ file_path: "scratchpad/out.txt", content: "from a hook" })"""
    result = await run(sandbox, source)
    assert "Wrote 'scratchpad/out.txt'" in result.value
    store = FilesystemSessionStore(tmp_path / "sessions")
    assert store.read_text("sb-1", "scratchpad/out.txt") == "from a hook"


async def test_a_tool_the_bridge_does_not_offer_rejects_naming_what_it_offers(
    sandbox: SandboxActivities,
) -> None:
    source = (
        "export default async ({ tools }) => {\n"
        "  try { await tools.archmaxWorkflowNowhere({}); } catch (e) { return e.message; }\n"
        "};\n"
    )
    result = await run(sandbox, source, kind="script")
    assert result.value.startswith("tools.archmaxWorkflowNowhere is not available to this run")
    assert "readFile" in result.value and "writeFile" in result.value
    assert result.calls == []  # nothing crossed the bridge


# --- a script stopped at a sub-workflow call ------------------------------------------------

DISPATCHING = """export default async ({ tools }) => {
  const secret = await tools.grep({ pattern: "hunter" });
  const answer = await tools.archmaxWorkflowEnrich({ doc: "a" });
  return { secret, answer };
};
"""


async def test_a_stopped_run_keeps_its_journal_in_the_store_not_in_its_result(
    sandbox: SandboxActivities,
) -> None:
    """The result that goes into the history names the journal; the file contents the script
    read stay in the session store, and a resumption replays them from there."""
    sandbox._workspace.store.write_text("sb-1", "scratchpad/notes.txt", "hunter2")
    overrides = {"kind": "script", "workflow_tools": ["archmax_workflow_enrich"]}
    stopped = await run(sandbox, DISPATCHING, **overrides)
    assert stopped.dispatch is not None and stopped.dispatch.arguments == {"doc": "a"}
    assert stopped.journal is not None and stopped.journal.count == 1
    assert "hunter2" not in stopped.model_dump_json()
    stored = sandbox._workspace.store.read_text("sb-1", stopped.journal.stored or "")
    assert "hunter2" in stored
    answer = SandboxToolCall(
        tool="archmax_workflow_enrich", arguments={"doc": "a"}, status="ok", content="enriched"
    )
    resumed = await run(sandbox, DISPATCHING, journal=stopped.journal.then(answer), **overrides)
    assert resumed.value["answer"] == "enriched" and "hunter2" in resumed.value["secret"]
    assert [c.replayed for c in resumed.calls] == [True, True]


async def test_a_journal_altered_in_the_store_fails_the_resumption(
    sandbox: SandboxActivities,
) -> None:
    sandbox._workspace.store.write_text("sb-1", "scratchpad/notes.txt", "hunter2")
    overrides = {"kind": "script", "workflow_tools": ["archmax_workflow_enrich"]}
    stopped = await run(sandbox, DISPATCHING, **overrides)
    assert stopped.journal is not None and stopped.journal.stored is not None
    sandbox._workspace.store.write_text("sb-1", stopped.journal.stored, "[]")
    error = await failure(sandbox, DISPATCHING, journal=stopped.journal, **overrides)
    assert error.type == "SandboxScriptError" and "was altered" in error.message


async def test_a_results_calls_keep_only_the_answers_of_failed_calls(
    sandbox: SandboxActivities,
) -> None:
    source = """export default async ({ tools }) => {
  await tools.readFile({ file_path: "scratchpad/notes.txt" });
  try { await tools.readFile({ file_path: "scratchpad/none.txt" }); } catch (e) {}
  return "done";
};
"""
    sandbox._workspace.store.write_text("sb-1", "scratchpad/notes.txt", "hunter2")
    result = await run(sandbox, source)  # a hook: the state's read_file ban binds no hook
    assert (result.calls[0].status, result.calls[0].content) == ("ok", "")
    assert result.calls[1].status == "error" and "none.txt" in result.calls[1].content


async def test_a_script_copies_and_removes_through_the_bridge(sandbox: SandboxActivities) -> None:
    sandbox._workspace.store.write_text("sb-1", "scratchpad/a.txt", "alpha")
    source = """export default async ({ tools }) => {
  await tools.copyFile({ source: "scratchpad/a.txt", destination: "scratchpad/b.txt" });
  await tools.removeFile({ file_path: "scratchpad/a.txt" });
  return "done";
};
"""
    result = await run(sandbox, source, kind="script")
    assert result.value == "done"
    assert [(c.tool, c.status) for c in result.calls] == [
        ("copy_file", "ok"),
        ("remove_file", "ok"),
    ]
    store = sandbox._workspace.store
    assert store.read_text("sb-1", "scratchpad/b.txt") == "alpha"
    assert not store.exists("sb-1", "scratchpad/a.txt")


async def test_an_eval_returns_its_completion_value_without_calling_it(
    sandbox: SandboxActivities,
) -> None:
    function_valued = await run(sandbox, "(() => 'called')", kind="eval")
    assert function_valued.value is None or function_valued.value != "called"
    promised = await run(sandbox, "Promise.resolve(6 * 7)", kind="eval")
    assert promised.value == 42
    script = await run(sandbox, "(() => 'called')", kind="script")
    assert script.value == "called"  # a script's function completion is its entry
