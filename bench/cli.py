"""What the ``archmax`` command costs as a process: ``archmax test`` with 1 and N cases, and
``archmax sessions`` over S parked sessions, beside ``archmax help`` (the process floor).

Run from the repository root, in a private network namespace on a shared machine::

    timeout 900 unshare -n bash -c 'ip link set lo up; .venv/bin/python -m bench.cli'
    .venv/bin/python -m bench.cli --cases 8 --runs 5 --sessions 100 --sections test,sessions

One run starts its own Temporal dev server (``WorkflowEnvironment.start_local``, archmax's
search attributes registered) and passes its address to every command as
``TEMPORAL_ADDRESS``: a server already running, which is how a CI job or a developer with
``archmax dev`` meets the command. Every command is a fresh ``python -m archmax_temporal``
process, timed from outside, its runs of each kind interleaved.

* **test** — an authoring root copied from ``examples/support-inbox`` whose ``tests/`` holds
  ``--cases`` copies of ``clarify-then-deliver.test.yaml`` (two turns and three calls of the
  shipped scripted model each; no model is configured, so the command serves the playbook
  itself). ``archmax test support-inbox case-01.`` runs one case, ``archmax test
  support-inbox`` all of them; a further case costs (all − one) ÷ (N − 1), the fixed cost of
  the command is one case's run less that.
* **durable** — this runtime's case steps (README, "Cases that wait, crash and retry"), one
  case per ``archmax test`` process, on a root copied from ``examples/support-inbox``:
  ``plain`` (clarify-then-deliver as shipped), ``crash`` (the same with ``crash: {during:
  model}`` arming the deliver: a worker process SIGKILLed as the answer's model call starts,
  a fresh worker finishing the turn) and ``advance`` (a three-day ``until`` woken by
  ``advance: 7d`` on the time-skipping server the command starts). A crash's cost is
  crash − plain; an advancing case's is advance − plain, the server's start included.
* **sessions** — ``--sessions`` sessions of support-inbox parked in ``clarify`` (on the
  default task queue, by an in-process worker that is stopped before anything is timed, so
  the listing meets no worker, as a shell does); ``archmax sessions`` (it lists 100) beside
  the SDK's floor (``bench/sdk_list.py``: a process that imports ``temporalio.client``,
  connects and prints the ids of the same query's first 100), and in this process
  ``agent.sessions.list()`` of all of them against a bare ``client.list_workflows`` of the
  same query.

Medians are the figures to quote; the table gives min / median / max of ``--runs`` runs,
and the median CPU time (user + system of the command and the processes it waited for: on a
loaded machine the wall time is mostly waiting for a core, the CPU time much less so).

``--baseline <checkout>`` (an export of another commit: ``git archive <commit> | tar -x -C
<dir>``) times the test and durable sections' commands on that code too, each run of it
just before the same run of this checkout's, and gives after ÷ before of the medians.
``--bytecode cached`` (the default) lets the commands write and reuse bytecode under a
scratch ``PYTHONPYCACHEPREFIX`` (the warm-up run compiles it), as an installed package
runs; ``--bytecode source`` keeps the environment's setting (``PYTHONDONTWRITEBYTECODE=1``
recompiles every module of a source checkout at every start).
The process leaves through ``os._exit`` (sdk-python#300).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.client.visibility import listing_query
from archmax_temporal.worker import DATA_CONVERTER

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "support-inbox"
SLUG = "support-inbox"
CASE = "clarify-then-deliver.test.yaml"
MODEL_ENV = ("ARCHMAX_API_BASE_URL", "ARCHMAX_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY")


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def make_root(into: Path, cases: int) -> Path:
    """support-inbox with ``cases`` copies of its clarify-then-deliver case."""
    root = into / "root"
    shutil.copytree(EXAMPLE, root)
    tests = root / "workflows" / SLUG / "tests"
    text = (tests / CASE).read_text()
    for old in tests.glob("*.test.yaml"):
        old.unlink()
    for index in range(1, cases + 1):
        (tests / f"case-{index:02d}.test.yaml").write_text(text)
    return root


BYTECODE: dict[str, str] = {}
"""What every command's environment adds for its bytecode (set by ``main``: ``--bytecode``)."""


def command_env(address: str, root: Path, code: Path | None = None) -> dict[str, str]:
    """A command's environment: the shared server, the root, no model; ``code`` (a checkout
    to time instead of this one: ``--baseline``) first on its ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}
    env.update(TEMPORAL_ADDRESS=address, ARCHMAX_ROOT=str(root))
    env.pop("ARCHMAX_TASK_QUEUE", None)
    if BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(BYTECODE)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    return env


SDK_LIST = Path(__file__).with_name("sdk_list.py")
"""The SDK's floor for ``archmax sessions``: :mod:`bench.sdk_list`."""

SIDES: list[tuple[str, Path | None]] = [("", None)]
"""The code each command is timed with: this checkout, and ``--baseline``'s before it."""


def run_command(
    argv: list[str], env: dict[str, str], root: Path, script: Path | None = None
) -> tuple[float, str]:
    """One ``archmax`` process (or ``script``'s, with ``argv``): its wall seconds and stdout;
    a failure raises."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *([str(script)] if script else ["-m", "archmax_temporal"]), *argv],
        env=env,
        cwd=root,
        capture_output=True,
        timeout=300,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(
            f"archmax {' '.join(argv)} exited {done.returncode}: "
            f"{done.stderr.decode(errors='replace')[-600:]}"
        )
    return elapsed, done.stdout.decode(errors="replace")


def run_timed(argv: list[str], env: dict[str, str], root: Path) -> tuple[float, float, str]:
    """One ``archmax`` process: its wall seconds, the CPU seconds (user + system) it and the
    processes it waited for spent, and its stdout. On a loaded machine the wall time is
    mostly waiting for a core; the CPU time much less so."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed, out = run_command(argv, env, root)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, out


class Series:
    def __init__(self, label: str) -> None:
        self.label = label
        self.values: list[float] = []
        self.cpu: list[float] = []

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    def add(self, timed: tuple[float, float, str]) -> str:
        """Record one :func:`run_timed`; its stdout."""
        elapsed, cpu, out = timed
        self.values.append(elapsed)
        self.cpu.append(cpu)
        return out

    def row(self) -> str:
        low, mid, high = (v * 1000 for v in (min(self.values), self.median, max(self.values)))
        cpu = f"{self.cpu_median * 1000:,.0f}" if self.cpu else "-"
        return f"| {self.label} | {low:,.0f} | {mid:,.0f} | {high:,.0f} | {cpu} |"


HEADER = [
    "| command | min ms | median ms | max ms | median CPU ms |",
    "| --- | ---: | ---: | ---: | ---: |",
]


def section_test(address: str, scratch: Path, cases: int, runs: int) -> list[str]:
    root = make_root(scratch / "test", cases)
    one: dict[str, Series] = {}
    many: dict[str, Series] = {}
    floor: dict[str, Series] = {}
    envs: dict[str, dict[str, str]] = {}
    for side, code in SIDES:
        envs[side] = command_env(address, root, code)
        one[side] = Series(f"{side}`archmax test {SLUG} case-01.` (1 case)")
        many[side] = Series(f"{side}`archmax test {SLUG}` ({cases} cases)")
        floor[side] = Series(f"{side}`archmax help` (the process floor)")
    log(f"test: warm-up, then {runs} runs of 1 and of {cases} cases, sides interleaved")
    for side, _ in SIDES:
        run_command(["test", SLUG, "case-01."], envs[side], root)
    for index in range(runs):
        for side, _ in SIDES:
            for series, argv in (
                (one[side], ["test", SLUG, "case-01."]),
                (many[side], ["test", SLUG]),
                (floor[side], ["help"]),
            ):
                series.add(run_timed(argv, envs[side], root))
            log(
                f"  run {index + 1} {side or 'this'}: 1 case {one[side].values[-1]:.2f} s, "
                f"all {many[side].values[-1]:.2f} s"
            )
    lines = list(HEADER)
    for side, _ in SIDES:
        lines += [one[side].row(), many[side].row(), floor[side].row()]
    lines.append("")
    costs: dict[tuple[str, str], tuple[float, float]] = {}
    for side, _ in SIDES:
        for what, a, b in (
            ("wall", one[side].median, many[side].median),
            ("CPU", one[side].cpu_median, many[side].cpu_median),
        ):
            per_case = (b - a) / (cases - 1)
            fixed = a - per_case
            costs[side, what] = (per_case, fixed)
            lines += [
                f"- {side}a further case (two turns, three scripted-model calls), {what}: "
                f"{per_case * 1000:,.0f} ms (medians: ({cases} cases − 1 case) ÷ {cases - 1}); "
                f"fixed cost of one invocation: {fixed * 1000:,.0f} ms (1 case less that)",
            ]
    if len(SIDES) > 1:
        (before, _), (after, _) = SIDES[0], SIDES[-1]
        for what in ("wall", "CPU"):
            (b_case, b_fixed), (a_case, a_fixed) = costs[before, what], costs[after, what]
            lines.append(
                f"- after ÷ before, {what}: fixed cost {a_fixed / b_fixed:.2f}, a further case "
                f"{a_case / b_case:.2f} (medians, runs interleaved)"
            )
    return lines


DURABLE_CASES = ("plain", "crash", "advance")
"""The durable section's cases, in the order each run times them."""

CRASH_EDIT = ("  - deliver:", "  - crash: { during: model, nth: 1 }\n  - deliver:")
"""clarify-then-deliver becomes the crash case: a crash armed for its deliver."""

WEEK = """title: A week passes
description: A three-day wait is woken by its own timer within a seven-day advance.
trigger: { id: email_received }
variables: { conversation_id: bench-week }
steps:
  - send: "I'll look my order number up and write back."
  - parked: input
  - advance: 7d
  - succeeded: true
  - triggerArrival: timer
"""
"""The advancing case: support-inbox's three-day wait (its playbook's ``write back`` rule)."""


def make_durable_root(into: Path) -> Path:
    """support-inbox with the three cases of the durable section."""
    root = into / "root"
    shutil.copytree(EXAMPLE, root)
    tests = root / "workflows" / SLUG / "tests"
    text = (tests / CASE).read_text()
    for old in tests.glob("*.test.yaml"):
        old.unlink()
    (tests / "plain.test.yaml").write_text(text)
    before, after = CRASH_EDIT
    assert before in text
    (tests / "crash.test.yaml").write_text(text.replace(before, after, 1))
    (tests / "advance.test.yaml").write_text(WEEK)
    return root


def section_durable(address: str, scratch: Path, runs: int) -> list[str]:
    root = make_durable_root(scratch / "durable")
    envs = {side: command_env(address, root, code) for side, code in SIDES}
    series = {
        (side, name): Series(f"{side}`archmax test {SLUG} {name}.` (1 case)")
        for side, _ in SIDES
        for name in DURABLE_CASES
    }
    log(f"durable: warm-up, then {runs} runs of each case, sides interleaved")
    for side, _ in SIDES:
        for name in DURABLE_CASES:
            run_command(["test", SLUG, f"{name}."], envs[side], root)
    for index in range(runs):
        for side, _ in SIDES:
            for name in DURABLE_CASES:
                out = series[side, name].add(
                    run_timed(["test", SLUG, f"{name}."], envs[side], root)
                )
                if not out.startswith("1 passed"):
                    raise RuntimeError(f"case {name} did not pass: {out}")
            log(
                f"  run {index + 1} {side or 'this'}: "
                + ", ".join(f"{n} {series[side, n].values[-1]:.2f} s" for n in DURABLE_CASES)
            )
    lines = [*HEADER, *(timed.row() for timed in series.values()), ""]
    for side, _ in SIDES:
        plain, plain_cpu = series[side, "plain"].median, series[side, "plain"].cpu_median
        crash, advance = series[side, "crash"], series[side, "advance"]
        lines += [
            f"- {side}a crash (this side's: a worker process started, SIGKILLed, the attempt "
            f"retried on a fresh worker): {(crash.median - plain) * 1000:,.0f} ms wall, "
            f"{(crash.cpu_median - plain_cpu) * 1000:,.0f} ms CPU over the same case without it",
            f"- {side}a case with advance: 7d over a three-day wait, beside a two-turn case: "
            f"{(advance.median - plain) * 1000:+,.0f} ms wall, "
            f"{(advance.cpu_median - plain_cpu) * 1000:+,.0f} ms CPU (the time-skipping "
            "server's start included)",
        ]
    return lines


async def park(address: str, root: Path, count: int) -> None:
    """``count`` sessions parked in clarify on the default queue; the worker is stopped after."""
    playbook = Playbook.load(root / "workflows" / SLUG / "playbook.yaml")
    with ScriptedModelServer(playbook) as server:
        model = ModelConfig(base_url=server.url, api_key="scripted", default_model="scripted")
        config = RuntimeConfig.from_env(root=root).with_overrides(address=address)
        async with create_agent(SLUG, config=config, model=model, worker="inprocess") as agent:
            gate = asyncio.Semaphore(8)

            async def one(index: int) -> None:
                async with gate:
                    outcome = await agent.workflow.send(
                        f"bench-cli-{index:05d}",
                        "About my order",
                        trigger="email_received",
                        variables={"conversation_id": f"bench-cli-{index:05d}"},
                    )
                if outcome.status != "awaiting_input":
                    raise RuntimeError(f"session did not park: {outcome.status}")

            await asyncio.gather(*(one(i) for i in range(count)))


async def timed(fn: Callable[[], Awaitable[int]]) -> tuple[float, int]:
    started = time.perf_counter()
    count = await fn()
    return time.perf_counter() - started, count


async def section_sessions(address: str, scratch: Path, count: int, runs: int) -> list[str]:
    root = make_root(scratch / "sessions", 1)
    env = command_env(address, root)
    log(f"sessions: parking {count} sessions")
    started = time.perf_counter()
    await park(address, root, count)
    log(f"  parked in {time.perf_counter() - started:.1f} s")
    config = RuntimeConfig.from_env(root=root).with_overrides(address=address)
    cli = Series("`archmax sessions` (a process; lists 100)")
    sdk = Series("the SDK's floor: a process that imports `temporalio.client`, lists 100")
    floor = Series("`archmax help` (the process floor)")
    listed = Series(f"`agent.sessions.list(limit={count + 10:,})` (in process)")
    bare = Series("`client.list_workflows`, the same query (in process)")
    counts: dict[str, int] = {}
    async with create_agent(None, config=config, worker="external") as agent:
        query = listing_query(config.task_queue)

        async def sessions_list() -> int:
            return len(await agent.sessions.list(limit=count + 10))

        async def bare_list() -> int:
            return len([e async for e in agent.client.list_workflows(query)])

        sdk_argv = [address, config.namespace, query, "100"]
        await sessions_list()
        for _ in range(runs):
            for series, argv, script in (
                (cli, ["sessions"], None),
                (sdk, sdk_argv, SDK_LIST),
                (floor, ["help"], None),
            ):
                elapsed, out = await asyncio.to_thread(run_command, argv, env, root, script)
                series.values.append(elapsed)
                if series is not floor:
                    key = "cli" if series is cli else "sdk"
                    counts[key] = sum(1 for line in out.splitlines() if "bench-cli-" in line)
            for series, fn, key in ((listed, sessions_list, "list"), (bare, bare_list, "bare")):
                elapsed, counts[key] = await timed(fn)
                series.values.append(elapsed)

    def row(series: Series, listed: str) -> str:
        low, mid, high = (v * 1000 for v in (min(series.values), series.median, max(series.values)))
        return f"| {series.label} | {listed} | {low:,.0f} | {mid:,.0f} | {high:,.0f} |"

    return [
        "| call | listed | min ms | median ms | max ms |",
        "| --- | ---: | ---: | ---: | ---: |",
        row(cli, f"{counts['cli']:,}"),
        row(sdk, f"{counts['sdk']:,}"),
        row(floor, "-"),
        row(listed, f"{counts['list']:,}"),
        row(bare, f"{counts['bare']:,}"),
        "",
        f"- `archmax sessions` ÷ the SDK's floor (medians): {cli.median / sdk.median:.2f}x; "
        f"÷ `archmax help`: {cli.median / floor.median:.2f}x",
        f"- `agent.sessions.list` ÷ bare `list_workflows` (medians): "
        f"{listed.median / bare.median:.2f}x",
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=8, help="cases of the N-case run (8)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each command (5)")
    parser.add_argument("--sessions", type=int, default=100, help="parked sessions listed (100)")
    parser.add_argument("--sections", default="test,durable,sessions", help="test,durable,sessions")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of other code (an export of main) timed the same way, its runs "
        "interleaved with this one's; the test and durable sections then give both and "
        "their ratios",
    )
    parser.add_argument(
        "--bytecode",
        choices=("cached", "source"),
        default="cached",
        help="cached (default): the commands write and reuse bytecode (under a scratch "
        "PYTHONPYCACHEPREFIX, the warm-up run compiling it), as an installed package runs; "
        "source: as the environment says (PYTHONDONTWRITEBYTECODE=1 compiles every module "
        "of a source checkout at every start)",
    )
    args = parser.parse_args()
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    if args.cases < 2:
        parser.error("--cases must be at least 2")
    if args.baseline is not None:
        SIDES[:] = [("before: ", args.baseline.resolve()), ("after: ", None)]
    env = await start_local_environment(DATA_CONVERTER)
    address = env.client.service_client.config.target_host
    lines = [
        f"archmax CLI bench: dev server at {address}, {args.runs} runs of each command, "
        f"bytecode {args.bytecode}"
        + (f", before = {args.baseline}" if args.baseline is not None else ""),
        "",
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="archmax-bench-cli-") as scratch:
            if args.bytecode == "cached":
                BYTECODE["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "pycache")
            if "test" in sections:
                lines += [*section_test(address, Path(scratch), args.cases, args.runs), ""]
            if "durable" in sections:
                lines += [*section_durable(address, Path(scratch), args.runs), ""]
            if "sessions" in sections:
                lines += await section_sessions(address, Path(scratch), args.sessions, args.runs)
    finally:
        await env.shutdown()
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
