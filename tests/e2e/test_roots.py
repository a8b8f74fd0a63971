"""Two authoring roots on one machine, with nothing configured: they share the embedded dev
server, never each other's task queue, background worker, model configuration or store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from archmax_temporal.client.background import stop_background_worker
from archmax_temporal.client.config import DEFAULT_TASK_QUEUE, RuntimeConfig, root_task_queue
from archmax_temporal.client.devserver import stop_dev_server
from tests.support.agents import Scripted, write_workflow

DESK = """
title: Desk
states:
  answer:
    triggers: { manual: {} }
    instructions: Answer.
"""


class TestDefaultQueue:
    def test_each_root_has_its_own_queue_with_nothing_configured(self, tmp_path: Path) -> None:
        """The embedded default names the queue after the root's folder and path."""
        first = RuntimeConfig.from_env({}, root=tmp_path / "shop")
        second = RuntimeConfig.from_env({}, root=tmp_path / "other" / "shop")
        assert first.task_queue != second.task_queue
        assert first.task_queue == root_task_queue(tmp_path / "shop")
        assert first.task_queue.startswith("archmax-shop-")
        assert not first.task_queue_configured

    def test_a_named_address_keeps_the_one_default_queue(self, tmp_path: Path) -> None:
        """Hosts and workers of a deployment agree on ``archmax`` without sharing a folder."""
        env = {"TEMPORAL_ADDRESS": "temporal.internal:7233"}
        assert RuntimeConfig.from_env(env, root=tmp_path).task_queue == DEFAULT_TASK_QUEUE
        flagged = RuntimeConfig.from_env({}, root=tmp_path).with_overrides(address="t:7233")
        assert flagged.task_queue == DEFAULT_TASK_QUEUE

    def test_a_configured_queue_is_kept_whatever_else_changes(self, tmp_path: Path) -> None:
        configured = RuntimeConfig.from_env({"ARCHMAX_TASK_QUEUE": "mine"}, root=tmp_path)
        assert (configured.task_queue, configured.task_queue_configured) == ("mine", True)
        assert configured.with_overrides(address="t:7233").task_queue == "mine"
        flagged = RuntimeConfig.from_env({}, root=tmp_path).with_overrides(task_queue="x")
        assert (flagged.task_queue, flagged.with_overrides(namespace="n").task_queue) == ("x", "x")

    def test_an_odd_folder_name_still_gives_a_valid_queue(self, tmp_path: Path) -> None:
        queue = root_task_queue(tmp_path / "My Project (copy)")
        assert queue.startswith("archmax-My-Project-copy-") and " " not in queue


@pytest.fixture
def two_roots(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    roots = (tmp_path / "first" / "desk-app", tmp_path / "second" / "desk-app")
    for root in roots:
        write_workflow(root, "desk", DESK)
    yield roots
    for root in roots:
        stop_background_worker(root)
    for root in roots:
        stop_dev_server(root)


def _run(root: Path, model_url: str, session: str) -> subprocess.CompletedProcess[str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("TEMPORAL_", "ARCHMAX_"))
    }
    env |= {
        "ARCHMAX_ROOT": str(root),
        "ARCHMAX_API_BASE_URL": model_url,
        "ARCHMAX_API_KEY": "sk-roots",
        "ARCHMAX_MODEL": "scripted",
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "archmax_temporal", "run", "desk", "hello", "--session", session],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_two_roots_on_one_machine_answer_only_their_own_sessions(
    two_roots: tuple[Path, Path], scripted: Scripted
) -> None:
    """Before, the second root's session was served by the first root's background worker,
    with the first root's model and store."""
    first, second = two_roots
    models = [
        scripted(json.dumps({"default": {"content": f"Answered by the {name} root."}}))
        for name in ("first", "second")
    ]
    one = _run(first, models[0].url, "roots-1")
    assert one.returncode == 0, one.stderr
    two = _run(second, models[1].url, "roots-2")
    assert two.returncode == 0, two.stderr
    assert "Answered by the first root." in one.stdout
    assert "Answered by the second root." in two.stdout
    assert [len(m.requests) for m in models] == [1, 1]
    assert (second / "sessions" / "roots-2").is_dir()
    assert not (first / "sessions" / "roots-2").exists()
    workers = [sorted((root / ".archmax").glob("worker-*.json")) for root in two_roots]
    assert [len(w) for w in workers] == [1, 1]
    assert workers[0][0].name != workers[1][0].name
