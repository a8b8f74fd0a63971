"""``archmax replay``: an exported history replayed against the installed code, as a user
runs it (a subprocess): OK and exit 0, or the nondeterminism named and exit 1, no stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from temporalio.client import Client

from archmax_temporal.client.devserver import find_temporal_cli
from tests.support.golden import SCENARIOS, bench_on, goldens


def _archmax(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "archmax_temporal", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _renamed_activity(source: Path, target: Path) -> None:
    """``source`` with its first activity's type renamed: a command order the code never
    issues (as a rename without ``workflow.patched`` would record)."""
    document = json.loads(source.read_text())
    for event in document["events"]:
        attributes = event.get("activityTaskScheduledEventAttributes")
        if attributes:
            attributes["activityType"]["name"] = "archmax.model.renamed"
            break
    target.write_text(json.dumps(document))


class TestReplay:
    def test_golden_histories_replay_ok(self) -> None:
        """Histories recorded by a release replay: one OK line each, exit 0."""
        paths = [str(g.path) for g in goldens()[:2]]
        done = _archmax("replay", *paths)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) == 2
        assert all(line.startswith("OK ") and "events replay" in line for line in lines)

    def test_a_diverging_history_names_the_nondeterminism(self, tmp_path: Path) -> None:
        """A history the code would not issue: FAIL with Temporal's nondeterminism, exit 1,
        no traceback; a good file beside it is still OK."""
        good = goldens()[0].path
        broken = tmp_path / "broken.json"
        _renamed_activity(good, broken)
        done = _archmax("replay", str(good), str(broken))
        assert done.returncode == 1
        ok, fail = done.stdout.splitlines()
        assert ok.startswith(f"OK {good}")
        assert fail.startswith(f"FAIL {broken}: Nondeterminism error")
        assert "'archmax.model.renamed'" in fail
        assert "Traceback" not in done.stderr + done.stdout
        assert "workflow.patched" in done.stderr

    def test_debug_prints_the_stack(self, tmp_path: Path) -> None:
        """``--debug`` adds the whole failure Temporal reported, as every command's does."""
        broken = tmp_path / "broken.json"
        _renamed_activity(goldens()[0].path, broken)
        done = _archmax("--debug", "replay", str(broken))
        assert done.returncode == 1
        assert "temporalio.workflow._exceptions.NondeterminismError" in done.stderr
        assert "force_cause: NonDeterministicError" in done.stderr

    def test_a_file_that_is_no_history_is_refused_by_name(self, tmp_path: Path) -> None:
        """Not JSON, JSON without events, a missing file: each a one-line FAIL, exit 1."""
        (tmp_path / "text.json").write_text("{nope")
        (tmp_path / "other.json").write_text('{"workflows": []}')
        done = _archmax(
            "replay",
            str(tmp_path / "text.json"),
            str(tmp_path / "other.json"),
            str(tmp_path / "missing.json"),
        )
        assert done.returncode == 1
        assert [
            line.split(":", 1)[1].strip().split(" ")[0] for line in done.stdout.splitlines()
        ] == [
            str(tmp_path / "text.json"),
            str(tmp_path / "other.json"),
            "cannot",
        ]
        assert "Traceback" not in done.stderr

    def test_without_files_it_is_a_usage_error(self) -> None:
        """No file named: exit 2 with the usage pointer."""
        done = _archmax("replay")
        assert done.returncode == 2
        assert "archmax replay --help" in done.stderr


async def test_a_history_exported_by_the_temporal_cli_replays(
    client: Client, tmp_path: Path
) -> None:
    """What an operator exports (``temporal workflow show --output json``) of a session
    parked on its timer is what ``archmax replay`` reads: OK, exit 0."""
    with bench_on(client) as bench:
        [history] = (await SCENARIOS["bank-parked-on-timer"](bench)).values()
    exported = tmp_path / "exported.json"
    shown = subprocess.run(
        [
            str(find_temporal_cli()),
            "workflow",
            "show",
            "--address",
            client.service_client.config.target_host,
            "--workflow-id",
            history.workflow_id,
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    exported.write_text(shown.stdout)
    done = _archmax("replay", str(exported))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"OK {exported}: {len(history.events)} events replay")
