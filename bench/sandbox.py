"""What a hook or script run costs in the QuickJS sandbox, and what a script's resumption costs.

Run from the repository root::

    .venv/bin/python -m bench.sandbox [--n 30] [--calls 10]

No Temporal here: the sandbox activity's own work (``SandboxActivities.evaluate``) is timed
in this process against a scratch workspace, with ``time.perf_counter_ns``:

* **process floor** — ``python -I`` running nothing: the start-up every sandbox run pays,
  since each run has a process of its own (the price of killing a runaway without touching
  the worker);
* **trivial hook** — ``export default () => ok()``;
* **script, K live calls** — a script that reads a workspace file K times through
  ``tools.readFile`` (each call a JSON line to the parent and back, governed and mocked-checked)
  and then calls a sub-workflow: the run stops there and stores its journal;
* **script, K replayed calls** — the same script resumed with that journal and the
  sub-workflow's answer: the K answers come from the stored journal, no file is read.

Figures are medians and 95th percentiles in milliseconds, and the ratio of each run to the
process floor. The machine is shared and noisy: read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.models import SandboxToolCall, ScriptJournal
from archmax_temporal.workflows.sandbox import SandboxLimits, SandboxRunInput
from archmax_temporal.workflows.spec import WorkflowSpec

SPEC = WorkflowSpec.model_validate(
    {"title": "Bench", "states": {"work": {"triggers": {"manual": None}}}}
)
SESSION = "bench-sandbox"
FILE = "scratchpad/data.json"


def _script(calls: int) -> str:
    return (
        "export default async ({ tools }) => {\n"
        "  let size = 0;\n"
        f"  for (let i = 0; i < {calls}; i++) size += (await tools.readFile("
        f"{{ file_path: '{FILE}' }})).length;\n"
        "  await tools.archmaxWorkflowBench({});\n"
        "  return { size };\n"
        "};\n"
    )


def _request(source: str, journal: ScriptJournal | None = None) -> SandboxRunInput:
    return SandboxRunInput(
        session_id=SESSION,
        label="bench.js",
        kind="script",
        source=source,
        spec=SPEC,
        state="work",
        limits=SandboxLimits(timeout_ms=10_000),
        workflow_tools=["archmax_workflow_bench"],
        journal=journal or ScriptJournal(),
    )


async def _timed(run: Callable[[], Awaitable[object]], n: int) -> list[float]:
    await run()  # warm the page cache and the interpreter's imports
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        await run()
        samples.append((time.perf_counter_ns() - started) / 1e6)
    return samples


def _floor() -> None:
    subprocess.run([sys.executable, "-I", "-c", "import json, sys"], check=True)


async def main(n: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        store = FilesystemSessionStore(Path(scratch) / "sessions")
        store.write_text(SESSION, FILE, '{"orders": ["ORD-1", "ORD-2", "ORD-3"]}')
        sandbox = SandboxActivities(WorkspaceActivities(store, Path(scratch)))
        stopped = await sandbox.evaluate(_request(_script(calls)))
        assert stopped.journal is not None and stopped.dispatch is not None
        answer = SandboxToolCall(tool=stopped.dispatch.tool, status="ok", content="{}")
        journal = stopped.journal.then(answer)
        figures = {
            "process floor (python -I)": await _timed(lambda: asyncio.to_thread(_floor), n),
            "trivial hook": await _timed(
                lambda: sandbox.evaluate(_request("export default () => ok()")), n
            ),
            f"script, {calls} live calls": await _timed(
                lambda: sandbox.evaluate(_request(_script(calls))), n
            ),
            f"script, {calls} replayed calls": await _timed(
                lambda: sandbox.evaluate(_request(_script(calls), journal)), n
            ),
        }
    floor = statistics.median(next(iter(figures.values())))
    print(f"{'run':<32} {'p50 ms':>8} {'p95 ms':>8} {'× floor':>8}")
    for name, samples in figures.items():
        p50 = statistics.median(samples)
        p95 = statistics.quantiles(samples, n=20)[-1] if len(samples) >= 2 else p50
        print(f"{name:<32} {p50:>8.1f} {p95:>8.1f} {p50 / floor:>8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="samples per figure")
    parser.add_argument("--calls", type=int, default=10, help="tools.readFile calls per script")
    options = parser.parse_args()
    asyncio.run(main(options.n, options.calls))
