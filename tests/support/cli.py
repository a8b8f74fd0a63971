"""The ``archmax`` command line as a test runs it: the ``cli`` fixture (a separate process per
command, against the suite's dev server, with a copy of support-inbox and a scripted model),
and the parking run most of its tests start with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from temporalio.client import Client

from archmax_temporal.client.background import stop_background_worker
from tests.support.agents import Scripted, copy_example
from tests.support.scenarios import SUPPORT_INBOX_PLAYBOOK as PLAYBOOK


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


class Cli(Protocol):
    """What the ``cli`` fixture yields: runs ``archmax`` with its arguments; ``root`` is the
    authoring root."""

    root: Path
    env: dict[str, str]

    def __call__(
        self,
        *argv: str,
        model_url: str | None = None,
        env_changes: dict[str, str | None] | None = None,
    ) -> Result: ...


@contextmanager
def running_cli(client: Client, scripted: Scripted, tmp_path: Path) -> Iterator[Cli]:
    """What the ``cli`` fixture (tests/conftest.py) yields: ``archmax`` bound to a copy of
    support-inbox under ``tmp_path``, the dev server and a scripted model."""
    root = copy_example("support-inbox", tmp_path)
    server = scripted(PLAYBOOK)
    environment = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": f"cli-{uuid.uuid4().hex[:8]}",
        "ARCHMAX_ROOT": str(root),
        "ARCHMAX_API_BASE_URL": server.url,
        "ARCHMAX_API_KEY": "sk-cli-test",
        "ARCHMAX_MODEL": "scripted",
        "NO_COLOR": "1",
    }
    environment.pop("ARCHMAX_WORKER", None)  # commands use the root's background worker

    def run(
        *argv: str, model_url: str | None = None, env_changes: dict[str, str | None] | None = None
    ) -> Result:
        env = {**environment, "ARCHMAX_API_BASE_URL": model_url or server.url}
        for name, value in (env_changes or {}).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        done = subprocess.run(
            [sys.executable, "-m", "archmax_temporal", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    run.root = root  # type: ignore[attr-defined]
    run.env = environment  # type: ignore[attr-defined]
    try:
        yield cast(Cli, run)
    finally:
        stop_background_worker(root)


def park(cli: Cli, conversation: str) -> Result:
    return cli(
        "run",
        "support-inbox",
        "About",
        "my",
        "order",
        "--trigger",
        "email_received",
        "--variables",
        json.dumps({"conversation_id": conversation}),
    )
