"""``archmax replay FILE...``: does a recorded session still run on the installed code?

Each file is a workflow history as JSON, exported with ``temporal workflow show --workflow-id
<id> --output json > h.json`` or downloaded from the Temporal UI (the session's page, the
history's JSON download). It is replayed against this installation's ``ArchmaxSession`` with
the worker's data converter, inside Temporal's sandbox (the worker runs the workflow
unsandboxed; here a clock, random, environment or file call from workflow code is refused,
as in CI's replays: :func:`archmax_temporal.worker.checking_runner`): ``OK`` when every
command the code issues matches the recorded ones, else the nondeterminism Temporal reports
(which command, which event).
Exit 0 when every file replays, 1 otherwise; a stack only with ``--debug``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path


@dataclass(frozen=True)
class ReplayVerdict:
    """What replaying one file came to: ``ok``, and otherwise why not."""

    path: Path
    ok: bool
    events: int = 0
    problem: str | None = None
    error: BaseException | None = None


class HistoryFileError(Exception):
    """The file is not a workflow history this command can read."""


def read_history(path: Path, workflow_id: str | None = None) -> object:
    """The :class:`temporalio.client.WorkflowHistory` in ``path`` (CLI or UI JSON export)."""
    from temporalio.client import WorkflowHistory

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HistoryFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryFileError(f"{path} is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(document, dict) or not isinstance(document.get("events"), list):
        raise HistoryFileError(
            f"{path} holds no workflow history (expected an object with 'events', as "
            "`temporal workflow show --output json` writes)"
        )
    if not document["events"]:
        raise HistoryFileError(f"{path}: the history has no events")
    try:
        return WorkflowHistory.from_json(workflow_id or path.stem, document)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HistoryFileError(f"{path} is not a readable workflow history: {first}") from None


_CORE_MESSAGE = re.compile(r'message: "(?P<text>(?:[^"\\]|\\.)*)"')
_CODE = re.compile(r"^\[TMPRL\d+\]\s*")


def describe_failure(failure: BaseException) -> str:
    """The sentence a replay failure boils down to (the nondeterminism Temporal found)."""
    text = str(failure)
    found = _CORE_MESSAGE.search(text)
    if found:
        detail = _CODE.sub("", found.group("text").replace('\\"', '"'))
        return detail if detail.lower().startswith("nondeterminism") else f"replay failed: {detail}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(failure).__name__}: {first}" if first else type(failure).__name__


async def replay_file(
    path: Path, workflow_id: str | None = None, *, quiet: bool = True
) -> ReplayVerdict:
    """Replay one exported history against the installed workflow code (``quiet``: the SDK
    core's own warnings about the failing task are not logged; the verdict says it)."""
    from temporalio.client import WorkflowHistory
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
    from temporalio.worker import Replayer

    from archmax_temporal.worker import DATA_CONVERTER, checking_runner, workflow_interceptors
    from archmax_temporal.workflows.session import ArchmaxSession

    try:
        history = read_history(path, workflow_id)
    except HistoryFileError as exc:
        return ReplayVerdict(path, False, problem=str(exc), error=exc)
    assert isinstance(history, WorkflowHistory)
    runtime = (
        Runtime(
            telemetry=TelemetryConfig(
                logging=LoggingConfig(
                    filter=TelemetryFilter(core_level="ERROR", other_level="ERROR")
                )
            )
        )
        if quiet
        else None
    )
    replayer = Replayer(
        workflows=[ArchmaxSession],
        data_converter=DATA_CONVERTER,
        workflow_runner=checking_runner(),
        interceptors=workflow_interceptors(),
        runtime=runtime,
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is None:
        return ReplayVerdict(path, True, events=len(history.events))
    failure = result.replay_failure
    return ReplayVerdict(
        path, False, events=len(history.events), problem=describe_failure(failure), error=failure
    )


async def run_replay(files: list[str], workflow_id: str | None, debug: bool) -> int:
    """``archmax replay``: one verdict line per file on stdout; exit 0 only if all replay."""
    import traceback

    installed = version("archmax-temporal")
    failed = 0
    for name in files:
        verdict = await replay_file(Path(name), workflow_id, quiet=not debug)
        if verdict.ok:
            print(f"OK {name}: {verdict.events} events replay on archmax-temporal {installed}")
            continue
        failed += 1
        print(f"FAIL {name}: {verdict.problem}")
        if debug and verdict.error is not None:
            traceback.print_exception(verdict.error, file=sys.stderr)
    if failed and not debug:
        print(
            "  a change to the order of workflow commands must sit behind workflow.patched "
            "(docs/design/workflow-code.md: Replay across releases)",
            file=sys.stderr,
        )
    return 1 if failed else 0
