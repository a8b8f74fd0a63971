"""``archmax test`` as a user runs it: a separate process against the suite's dev server, with
no model endpoint configured, so each example runs on the playbook kept beside its cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Protocol, cast

import pytest
from temporalio.client import Client

from tests.support.agents import copy_example
from tests.support.scenarios import MODEL_VARIABLES


class Archmax(Protocol):
    """The ``archmax`` fixture: runs the command with its arguments and extra environment;
    ``root`` is the authoring root."""

    root: Path

    def __call__(self, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]: ...


@pytest.fixture
def archmax(client: Client, tmp_path: Path) -> Archmax:
    root = copy_example("support-inbox", tmp_path)
    environment = {
        **{k: v for k, v in os.environ.items() if k not in MODEL_VARIABLES},
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": f"cli-test-{uuid.uuid4().hex[:8]}",
        "ARCHMAX_ROOT": str(root),
        "NO_COLOR": "1",
    }

    def run(*argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "archmax_temporal", *argv],
            env={**environment, **extra},
            capture_output=True,
            text=True,
            timeout=180,
        )

    run.root = root  # type: ignore[attr-defined]
    return cast(Archmax, run)


def test_json_document_field_by_field(archmax: Archmax) -> None:
    done = archmax("test", "support-inbox", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert list(document) == ["workflow", "results", "exitCode", "discovered"]
    assert (document["workflow"], document["exitCode"], document["discovered"]) == (
        "support-inbox",
        0,
        4,
    )
    first = document["results"][0]
    assert list(first) == ["id", "title", "description", "sessionId", "verdict", "records"]
    assert first["id"] == "clarify-then-deliver"
    assert first["title"] == "Clarify, park, and answer once the reply arrives"
    assert first["description"].startswith("A vague request parks in clarify")
    assert first["sessionId"].startswith("test-") and first["sessionId"].endswith(
        "-clarify-then-deliver"
    )
    assert first["verdict"] == {"status": "passed", "failures": []}
    records = first["records"]
    assert records[0] == {"kind": "parked", "status": "passed", "threshold": None, "step": 1}
    assert [r["step"] for r in records] == sorted(r["step"] for r in records)
    reply_records = [r for r in records if r["kind"] == "reply"]
    assert len(reply_records) == 3  # one per token: two includes, one excludes
    assert "scripted (workflows/support-inbox/playbook.yaml)" in done.stderr


def test_a_failing_case_exits_1_and_narrates_what_never_ran(archmax: Archmax) -> None:
    tests = archmax.root / "workflows" / "support-inbox" / "tests"
    (tests / "wrong.test.yaml").write_text(
        "title: A wrong expectation\ndescription: Expects an answer straight away.\n"
        "steps:\n  - send: hello\n  - succeeded: true\n  - reply: { includes: x }\n"
        "  - reachedState: answer\n"
    )
    done = archmax("test", "support-inbox")
    assert done.returncode == 1
    assert done.stdout == "4 passed, 1 failed, 0 skipped\n"
    assert "✖ A wrong expectation" in done.stderr
    assert "succeeded: the turn parked (input at 'clarify') instead of completing" in done.stderr
    assert "2 assertions not executed" in done.stderr


def test_a_filter_that_matches_nothing_exits_1(archmax: Archmax) -> None:
    done = archmax("test", "support-inbox", "nothing-like-this")
    assert done.returncode == 1
    assert "no cases matched 'nothing-like-this' (4 discovered)" in done.stderr
    assert done.stdout == "0 passed, 0 failed, 0 skipped\n"
    filtered = archmax("test", "support-inbox", "unusable")
    assert (filtered.returncode, filtered.stdout) == (0, "1 passed, 0 failed, 0 skipped\n")


def test_a_disabled_workflow_skips_its_suite_and_exits_0(archmax: Archmax) -> None:
    spec = archmax.root / "workflows" / "support-inbox" / "workflow.yaml"
    spec.write_text(spec.read_text() + "disabled: true\n")
    done = archmax("test", "support-inbox")
    assert (done.returncode, done.stdout) == (0, "suite skipped — disabled\n")
    as_json = json.loads(archmax("test", "support-inbox", "--json").stdout)
    assert (as_json["skipped"], as_json["results"], as_json["exitCode"]) == ("disabled", [], 0)


def _tokens(line: str) -> tuple[int, int]:
    """``tokens     in N · out M[ · …]`` → (N, M)."""
    parts = line.split("·")
    return int(parts[0].split()[-1]), int(parts[1].split()[-1])


def test_each_case_and_the_suite_report_the_tokens_their_sessions_spent(archmax: Archmax) -> None:
    done = archmax("test", "support-inbox", "--json")
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stderr.splitlines()]
    per_case = [_tokens(line) for line in lines if line.startswith("tokens ")][:-1]
    total = _tokens([line for line in lines if line.startswith("tokens ")][-1])
    spent = []
    for result in json.loads(done.stdout)["results"]:
        # The suite ran on a private queue no worker polls now: read the session's records.
        metadata = archmax.root / "sessions" / result["sessionId"] / "artifacts" / "metadata.json"
        usage = json.loads(metadata.read_text())["usage"]
        spent.append((usage["prompt_tokens"], usage["completion_tokens"]))
    # what it did stays readable without a worker: its summary from visibility (the
    # listing it published), its events from the history
    sid = json.loads(done.stdout)["results"][0]["sessionId"]
    unanswered = archmax("sessions", sid)
    assert unanswered.returncode == 0, unanswered.stderr
    assert f"session   {sid}" in unanswered.stdout
    assert "status    completed (finished)" in unanswered.stdout
    assert "no worker is polling" not in unanswered.stdout  # a finished session waits on none
    events = archmax("events", sid)
    assert events.returncode == 0
    types = [json.loads(line)["type"] for line in events.stdout.splitlines()]
    assert types[0] == "turn-start" and "parked" in types
    assert per_case == spent and all(n > 0 and m > 0 for n, m in spent)
    assert total == (sum(n for n, _ in spent), sum(m for _, m in spent))
    assert "$" not in done.stderr  # no prices configured: no cost is guessed


def test_configured_prices_add_the_cost(archmax: Archmax) -> None:
    prices = {"ARCHMAX_PRICE_INPUT": "2", "ARCHMAX_PRICE_OUTPUT": "8"}
    done = archmax("test", "support-inbox", "unusable", **prices)
    [line] = [x.strip() for x in done.stderr.splitlines() if x.strip().startswith("tokens ")][:1]
    prompt, completion = _tokens(line)
    assert line.endswith(f"· ${(prompt * 2 + completion * 8) / 1_000_000:.4f}")
