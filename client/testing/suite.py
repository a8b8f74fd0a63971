"""``archmax test`` as a command: pick the model, run the suite, render it.

The model is the environment's endpoint when one is configured (``ARCHMAX_API_BASE_URL`` /
``ARCHMAX_API_KEY``, or the ``OPENAI_*`` fallbacks). With none, a workflow that keeps a
scripted-model playbook beside its cases (``workflows/<slug>/tests/playbook.yaml``, else
``workflows/<slug>/playbook.yaml``) runs against that playbook instead, on a private task
queue, so the same cases pass in CI with no key and run unchanged against a real model.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.events import SessionEvent
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.report import TestView
from archmax_temporal.client.testing.results import CaseResult
from archmax_temporal.client.testing.runner import run_tests
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.client.usage import configured_pricing
from archmax_temporal.workflows.models import TrailStep

PLAYBOOK_NAMES = ("tests/playbook.yaml", "playbook.yaml")
"""Where a workflow keeps its scripted-model playbook, relative to ``workflows/<slug>/``."""


def find_playbook(root: Path, workflow: str) -> Path | None:
    """The workflow's scripted-model playbook, if it keeps one."""
    for name in PLAYBOOK_NAMES:
        path = root / "workflows" / workflow / name
        if path.is_file():
            return path
    return None


class _ViewListener:
    """Adapts the runner's events to the test view; ``verbose`` also hears each hook's and
    script's console lines (``hook-output`` events)."""

    def __init__(self, view: TestView, *, verbose: bool = False) -> None:
        self._view = view
        self.hears_output = verbose

    def hook_output(self, case_id: str, event: SessionEvent) -> None:
        self._view.on_output(case_id, event.data)

    def case_started(self, case_id: str, title: str, session_id: str) -> None:
        self._view.case_started(case_id, title)

    def trail_step(self, case_id: str, from_state: str | None, step: TrailStep) -> None:
        self._view.on_state(case_id, from_state, step.to, step.kind, step.reason)

    def case_finished(self, result: CaseResult) -> None:
        self._view.case_finished(result)

    def run_started(self, case_id: str, run: int, runs: int) -> None:
        self._view.on_run(case_id, run, runs)

    def clock_advanced(self, case_id: str, by: str) -> None:
        self._view.on_clock(case_id, by)

    def worker_killed(self, case_id: str, text: str) -> None:
        self._view.on_kill(case_id, text)


@contextlib.contextmanager
def _model_for(
    config: RuntimeConfig, workflow: str
) -> Iterator[tuple[ModelConfig, RuntimeConfig, str]]:
    """The model a suite runs against, the runtime config to use, and a label for it."""
    model = ModelConfig.from_env()
    playbook = None if (model.base_url or model.api_key) else find_playbook(config.root, workflow)
    if playbook is None:
        yield model, config, model.default_model or "unset"
        return
    with ScriptedModelServer(Playbook.load(playbook)) as server:
        scripted = ModelConfig(base_url=server.url, api_key="scripted", default_model="scripted")
        private = config.with_overrides(task_queue=f"archmax-test-{uuid.uuid4().hex[:8]}")
        label = f"scripted ({playbook.relative_to(config.root).as_posix()})"
        yield scripted, private, label


async def run_suite(
    workflow: str,
    config: RuntimeConfig,
    *,
    filter: str | None,
    as_json: bool,
    err: TextIO,
    out: TextIO,
    verbose: bool = False,
) -> int:
    """Run and render one suite; the process exit code. ``verbose`` narrates the hooks' and
    scripts' console output under each case."""
    view = TestView(err, out, pricing=configured_pricing(lambda line: print(line, file=err)))
    with _model_for(config, workflow) as (model, run_config, label):
        view.session_started(workflow, config.root, label)
        scripted = run_config is not config
        result = await run_tests(
            workflow,
            config.root,
            filter=filter,
            listener=_ViewListener(view, verbose=verbose),
            model=model,
            config=run_config,
            worker="inprocess" if scripted else None,
        )
    if filter is not None and not result.results and result.skipped is None:
        view.no_match(filter, result.discovered)
    view.suite_finished(workflow, result, as_json=as_json)
    return result.exit_code
