"""The forms archmax's reference workspace uses, in a project of this repository's own
(``tests/fixtures/grade-desk``): a plain script that awaits at its top level over one
sub-workflow per item, and hooks that log.

The suite runs as a user runs it (``archmax test --verbose`` in a separate process, on the
playbook kept beside the cases); the hooks' console lines reach ``archmax events``, a turn's
``on_event`` and the test view as ``hook-output`` events.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from archmax_temporal.client.events import SessionEvent
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from tests.support.agents import running_agent
from tests.support.http_harness import http_api, read_events
from tests.support.paths import FIXTURES
from tests.support.scenarios import MODEL_VARIABLES

FIXTURE = FIXTURES / "grade-desk"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    target = tmp_path / "grade-desk"
    shutil.copytree(FIXTURE, target)
    return target


def _archmax(client: Client, root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **{k: v for k, v in os.environ.items() if k not in MODEL_VARIABLES},
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": f"forms-{uuid.uuid4().hex[:8]}",
        "ARCHMAX_ROOT": str(root),
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "archmax_temporal", *argv],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_suite_passes_and_its_verbose_view_shows_the_hooks_lines(
    client: Client, root: Path
) -> None:
    """Both cases pass; ``--verbose`` prints every console line under its case, and
    ``archmax events`` prints them as ``hook-output`` events."""
    done = _archmax(client, root, "test", "grade-desk", "--verbose", "--json")
    assert done.returncode == 0, done.stderr
    assert "2 passed" in done.stderr
    results = {r["id"]: r for r in json.loads(done.stdout)["results"]}
    assert {r["verdict"]["status"] for r in results.values()} == {"passed"}
    listed = _archmax(client, root, "events", results["fan-out"]["sessionId"])
    assert listed.returncode == 0, listed.stderr
    output = [e for e in map(json.loads, listed.stdout.splitlines()) if e["type"] == "hook-output"]
    assert [e["data"]["text"] for e in output][:2] == [
        "Allowed: grading_requested for IT-1, IT-2",
        "grading 2 item(s)",
    ]
    err = done.stderr
    assert "· hooks/audit-request.js: Allowed: grading_requested for IT-1, IT-2" in err
    assert "· skills/batch-grading/scripts/grade-all.js: grading 2 item(s)" in err
    assert "graded IT-1=A-IT-1, IT-2=A-IT-2" in err
    assert "· hooks/audit-report.js: Report check - IT-2: A-IT-2" in err
    assert "· hooks/audit-request.js: Vetoed: grading_requested carried no items" in err
    # The resumed script runs from the top after each dispatch; its first line is told once.
    assert err.count("grading 2 item(s)") == 1


async def test_a_logging_hook_and_the_fan_out_read_as_hook_output_events(
    client: Client, task_queue: str, root: Path
) -> None:
    """``on_event`` and ``sessions.events`` carry one ``hook-output`` event per console line,
    before the hook's verdict (or the script's result), naming who wrote it."""
    playbook = Playbook.load(root / "workflows" / "grade-desk" / "playbook.yaml")
    heard: list[SessionEvent] = []
    with ScriptedModelServer(playbook) as server:
        async with running_agent(client, task_queue, root, "grade-desk", server) as agent:
            outcome = await agent.workflow.send(
                "forms-1",
                "Grade the requested items.",
                trigger="grading_requested",
                variables={"items": [{"item_id": "IT-1"}, {"item_id": "IT-2"}]},
                on_event=heard.append,
            )
            events = [e async for e in agent.sessions.events("forms-1")]
    assert outcome.kind == "completed", outcome
    output = [e for e in events if e.type == "hook-output"]
    assert [(e.data.get("hook") or e.data.get("script"), e.data["text"]) for e in output] == [
        ("hooks/audit-request.js", "Allowed: grading_requested for IT-1, IT-2"),
        ("skills/batch-grading/scripts/grade-all.js", "grading 2 item(s)"),
        ("skills/batch-grading/scripts/grade-all.js", "graded IT-1=A-IT-1, IT-2=A-IT-2"),
        ("hooks/audit-report.js", "Report check - IT-1: A-IT-1"),
        ("hooks/audit-report.js", "Report check - IT-2: A-IT-2"),
    ]
    first = output[0]
    assert first.data == {
        "phase": "before",
        "state": "intake",
        "hook": "hooks/audit-request.js",
        "method": "log",
        "text": "Allowed: grading_requested for IT-1, IT-2",
    }
    kinds = [e.type for e in events]
    assert kinds.index("hook-output") < kinds.index("hook-verdict")
    assert [e.seq for e in heard if e.type == "hook-output"] == [e.seq for e in output]
    print(
        "hook-output figures:",
        json.dumps(
            {
                kind: sum(1 for e in events if e.type == kind)
                for kind in ("hook-start", "hook-output", "hook-verdict", "script-result")
            }
        ),
    )


async def test_a_vetoing_hook_logs_a_warning_event(
    client: Client, task_queue: str, root: Path
) -> None:
    """``console.warn`` is a ``hook-output`` event at level warn, before the veto."""
    playbook = Playbook.load(root / "workflows" / "grade-desk" / "playbook.yaml")
    with ScriptedModelServer(playbook) as server:
        async with running_agent(client, task_queue, root, "grade-desk", server) as agent:
            outcome = await agent.workflow.send(
                "forms-2", "Grade.", trigger="grading_requested", variables={"items": []}
            )
            events = [e async for e in agent.sessions.events("forms-2")]
    assert outcome.kind == "rejected"
    [(line, verdict)] = [
        (e, v)
        for e, v in itertools.pairwise(events)
        if e.type == "hook-output" and v.type == "hook-verdict"
    ]
    assert (line.level, line.data["method"]) == ("warn", "warn")
    assert line.data["text"] == "Vetoed: grading_requested carried no items"
    assert verdict.data["verdict"] == "veto"


async def test_the_sse_stream_carries_the_hooks_lines(
    client: Client, task_queue: str, root: Path
) -> None:
    """``GET /v1/sessions/{id}/events`` streams the same ``hook-output`` events."""
    playbook = Playbook.load(root / "workflows" / "grade-desk" / "playbook.yaml")
    with ScriptedModelServer(playbook) as server:
        async with http_api(
            client, task_queue, root, "grade-desk", server, store=root / "sessions"
        ) as api:
            await api.agent.workflow.send(
                "forms-3", "Grade.", trigger="grading_requested", variables={"items": []}
            )
            async with api.http.stream(
                "GET", "/v1/sessions/forms-3/events", params={"follow": "false"}
            ) as response:
                assert response.status_code == 200
                streamed = await read_events(response)
    [line] = [e.data for e in streamed if e.data["type"] == "hook-output"]
    assert (line["level"], line["data"]["hook"]) == ("warn", "hooks/audit-request.js")
    assert line["data"]["text"] == "Vetoed: grading_requested carried no items"
