"""A run's ``console.*`` lines, as the sandbox activity keeps them for the ``hook-output``
events: bounded in count and size, kept when the run fails or stops at a sub-workflow call,
and told once when a resumed script replays its journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.contracts.sandbox import (
    MAX_OUTPUT_LINE_CHARS,
    MAX_OUTPUT_LINES,
    OUTPUT_CUT,
)
from archmax_temporal.workflows.models import SandboxToolCall
from tests.support.sandbox import run


@pytest.fixture
def sandbox(tmp_path: Path) -> SandboxActivities:
    return SandboxActivities(WorkspaceActivities(FilesystemSessionStore(tmp_path / "s"), tmp_path))


async def test_every_console_method_is_a_line_named_by_its_method(
    sandbox: SandboxActivities,
) -> None:
    """log, info, warn, error and debug each give one line, objects as JSON."""
    source = (
        "console.log('a', 1); console.info({ k: 'v' }); console.warn('w');\n"
        "console.error('e'); console.debug('d'); ok()"
    )
    result = await run(sandbox, source)
    assert result.logs == ["log a 1", 'info {"k":"v"}', "warn w", "error e", "debug d"]
    assert result.output_dropped == 0


async def test_the_lines_are_bounded_in_count_and_size(sandbox: SandboxActivities) -> None:
    """Past the bound lines are counted, not kept; a long line is cut and says so."""
    source = (
        f"console.log('x'.repeat({MAX_OUTPUT_LINE_CHARS * 5}));\n"
        f"for (let i = 0; i < {MAX_OUTPUT_LINES + 49}; i++) console.log('line', i);\nok()"
    )
    result = await run(sandbox, source)
    assert len(result.logs) == MAX_OUTPUT_LINES and result.output_dropped == 50
    first = result.logs[0]
    assert first.endswith(OUTPUT_CUT) and len(first) == MAX_OUTPUT_LINE_CHARS + len(OUTPUT_CUT)
    assert result.logs[-1] == f"log line {MAX_OUTPUT_LINES - 2}"


async def test_a_failed_run_carries_what_it_wrote(sandbox: SandboxActivities) -> None:
    """The typed error's details hold the lines written before the throw."""
    with pytest.raises(ApplicationError) as caught:
        await run(sandbox, "console.log('checking');\nthrow new Error('no file')")
    assert caught.value.type == "SandboxScriptError"
    assert caught.value.details == ({"logs": ["log checking"]},)


async def test_a_resumed_script_tells_its_replayed_lines_once(sandbox: SandboxActivities) -> None:
    """The stopped run keeps the lines before its sub-workflow call; the resumed run, which
    replays that call, only the lines after it."""
    source = (
        "console.log('before');\n"
        "const answer = await tools.archmaxWorkflowEnrich({ doc: 'a' });\n"
        "console.log('after', answer);\nanswer"
    )
    overrides: dict[str, Any] = {"kind": "script", "workflow_tools": ["archmax_workflow_enrich"]}
    stopped = await run(sandbox, source, **overrides)
    assert stopped.dispatch is not None and stopped.journal is not None
    assert stopped.logs == ["log before"]
    answer = SandboxToolCall(
        tool="archmax_workflow_enrich", arguments={"doc": "a"}, status="ok", content="done"
    )
    resumed = await run(sandbox, source, journal=stopped.journal.then(answer), **overrides)
    assert resumed.value == "done"
    assert resumed.logs == ["log after done"]
