"""The ``archmax`` command line as a user runs it: a separate process, result on stdout,
narration on stderr, exit 0 for completed and parked, 1 for failures, 2 for usage errors.

Each command runs its own in-process worker (none polls the test's task queue) against the
suite's dev server, with the model endpoint from the environment: a scripted model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.agents import Scripted, write_workflow
from tests.support.cli import Cli, Result, park
from tests.support.scenarios import REVIEW, REVIEW_PLAYBOOK


def _footer(stderr: str) -> tuple[int, int]:
    """The (in, out) of the one ``tokens     in N · out M`` line of a command's stderr."""
    [line] = [x for x in stderr.splitlines() if x.startswith("tokens     in ")]
    parts = line.split("·")
    return int(parts[0].split()[-1]), int(parts[1].split()[-1])


class TestRunAndDeliver:
    def test_a_park_exits_zero_with_the_question_on_stdout(self, cli: Cli) -> None:
        """Waiting is success: exit 0, the agent's question on stdout, the park on stderr."""
        result = park(cli, "cli-park-1")
        assert result.code == 0, result.stderr
        assert result.stdout.strip().startswith("Thanks for writing! Which order")
        assert "⏸ parked in clarify" in result.stderr
        assert "archmax deliver cli-park-1" in result.stderr
        assert "parked" not in result.stdout
        # the header names workflow, directory and model, as archmax test's does
        assert f"workflow  support-inbox  ·  root {cli.root}  ·  model scripted" in result.stderr

    def test_a_file_arrives_exactly_and_a_second_one_of_its_name_is_numbered(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        """Seed: "The CLI does the same with archmax run … --file invoice=./invoice.pdf": the
        bytes arrive exactly, and a placement never overwrites (report.pdf → report-1.pdf)."""
        invoice = tmp_path / "invoice.pdf"
        data = bytes(range(256)) + b"%PDF-1.7 \x00 end"
        invoice.write_bytes(data)
        for message in ("Here is my invoice.", "And again."):
            result = cli(
                "run",
                "support-inbox",
                message,
                "--session",
                "cli-files-1",
                "--file",
                f"invoice={invoice}",
            )
            assert result.code == 0, result.stderr
        attachments = cli.root / "sessions" / "cli-files-1" / "scratchpad" / "attachments"
        assert (attachments / "invoice.pdf").read_bytes() == data
        assert (attachments / "invoice-1.pdf").read_bytes() == data
        shown = cli("sessions", "cli-files-1", "--json")
        variables = json.loads(shown.stdout)["variables"]
        assert variables["invoice"] == {
            "value": "scratchpad/attachments/invoice-1.pdf",
            "locked": True,
        }

    def test_deliver_resumes_and_prints_the_answer(self, cli: Cli) -> None:
        """`archmax deliver` exits 0 with the resumed reply on stdout."""
        assert park(cli, "cli-park-2").code == 0
        result = cli(
            "deliver",
            "cli-park-2",
            "--trigger",
            "email_reply",
            "--variables",
            json.dumps({"reply_body": "It's ORD-1001."}),
        )
        assert result.code == 0, result.stderr
        assert "ORD-1001" in result.stdout
        assert "✔ completed in answer" in result.stderr

    def test_each_command_closes_with_the_tokens_its_turn_spent(self, cli: Cli) -> None:
        """The footer of `run` is the first turn's spend, that of `deliver` the second's:
        together they are the session's whole usage as its records hold it."""
        parked = park(cli, "cli-park-tokens")
        resumed = cli(
            "deliver",
            "cli-park-tokens",
            "--trigger",
            "email_reply",
            "--variables",
            json.dumps({"reply_body": "It's ORD-1001."}),
        )
        footers = [_footer(parked.stderr), _footer(resumed.stderr)]
        metadata = cli.root / "sessions" / "cli-park-tokens" / "artifacts" / "metadata.json"
        usage = json.loads(metadata.read_text())["usage"]
        assert all(n > 0 and m > 0 for n, m in footers)
        assert (sum(n for n, _ in footers), sum(m for _, m in footers)) == (
            usage["prompt_tokens"],
            usage["completion_tokens"],
        )

    def test_a_second_delivery_exits_one_naming_the_error(self, cli: Cli) -> None:
        """A session that is not parked refuses the delivery: exit 1, nothing on stdout."""
        assert park(cli, "cli-park-3").code == 0
        assert cli("deliver", "cli-park-3", "--trigger", "email_reply").code == 0
        result = cli("deliver", "cli-park-3", "--trigger", "email_reply")
        assert result.code == 1
        assert result.stdout == ""
        assert "SessionNotAwaitingInputError" in result.stderr

    def test_sessions_lists_and_shows_variables_with_locks(self, cli: Cli) -> None:
        """`archmax sessions <id>` prints each variable's value and lock."""
        assert park(cli, "cli-park-4").code == 0
        detail = cli("sessions", "cli-park-4")
        listing = cli("sessions", "--json")
        assert detail.code == 0, detail.stderr
        assert "status    awaiting_input (open)" in detail.stdout
        assert 'conversation_id (locked) = "cli-park-4"' in detail.stdout
        records = json.loads(listing.stdout)
        mine = [r for r in records if r["sessionId"] == "cli-park-4"]  # archmax's camelCase
        assert mine and mine[0]["waitReason"] == "the customer's reply naming the order"


class TestExitCodes:
    def test_malformed_variables_is_a_usage_error(self, cli: Cli) -> None:
        """Malformed --variables: exit 2, one line plus the help pointer, nothing on stdout."""
        result = cli("run", "support-inbox", "hi", "--variables", "{not json")
        assert result.code == 2
        assert result.stdout == ""
        assert "--variables is not valid JSON" in result.stderr
        assert "try archmax run --help" in result.stderr

    def test_a_missing_required_flag_is_a_usage_error(self, cli: Cli) -> None:
        """`deliver` without --trigger: exit 2."""
        assert cli("deliver", "someone").code == 2

    def test_an_unknown_trigger_exits_one_listing_the_declared_ones(self, cli: Cli) -> None:
        """An undeclared trigger fails before any model call, naming the declared triggers."""
        result = cli("run", "support-inbox", "hi", "--trigger", "sms")
        assert result.code == 1
        assert result.stdout == ""
        assert "UnknownTriggerError" in result.stderr
        assert "manual, email_received, email_reply" in result.stderr

    def test_an_unknown_session_exits_one(self, cli: Cli) -> None:
        """`archmax sessions <id>` for a session that never ran: exit 1."""
        result = cli("sessions", "never-ran-1")
        assert result.code == 1
        assert "SessionNotFoundError" in result.stderr

    def test_an_invalid_workflow_exits_one_naming_key_and_path(self, cli: Cli) -> None:
        """A typo in workflow.yaml is reported with its path before anything runs."""
        write_workflow(
            cli.root,
            "broken",
            "states:\n  review:\n    triggers: {manual: }\n    transtions: []\n",
        )
        result = cli("run", "broken", "hi")
        assert result.code == 1
        assert 'states.review: unknown key "transtions"' in result.stderr

    def test_a_disabled_workflow_refuses_with_one_line(self, cli: Cli) -> None:
        """`disabled: true`: one line on stderr, exit 1, nothing on stdout."""
        write_workflow(
            cli.root,
            "retired",
            "disabled: true\nstates:\n  only:\n    triggers: {manual: }\n",
        )
        result = cli("run", "retired", "hi")
        assert result.code == 1
        assert result.stdout == ""
        assert "Refusing to start: workflow 'retired' is disabled." in result.stderr

    def test_a_raise_exits_one_with_code_and_reason(self, cli: Cli, scripted: Scripted) -> None:
        """A session the agent ended with archmax_raise: `✖ failed <code>: <reason>`, exit 1."""
        write_workflow(cli.root, "lookup", "states:\n  only:\n    triggers: {manual: }\n")
        raising = scripted(
            json.dumps(
                {
                    "rules": [
                        {
                            "when": {"state": "only"},
                            "reply": {
                                "tool_calls": [
                                    {
                                        "name": "archmax_raise",
                                        "arguments": {
                                            "code": "orders-unavailable",
                                            "reason": "The order system is down.",
                                        },
                                    }
                                ]
                            },
                        }
                    ]
                }
            )
        )
        result = cli("run", "lookup", "hi", model_url=raising.url)
        assert result.code == 1
        assert "✖ failed orders-unavailable: The order system is down." in result.stderr
        assert result.stdout == ""


class TestTheWorkflowMayBeOmitted:
    """archmax: `<workflow>` may be omitted when workflows/ holds exactly one; with several,
    the usage error names them."""

    def test_run_with_one_workflow_takes_every_word_as_the_message(self, cli: Cli) -> None:
        result = cli(
            "run",
            "About",
            "my",
            "order",
            "--trigger",
            "email_received",
            "--variables",
            json.dumps({"conversation_id": "cli-omit-1"}),
            "--verbose",
        )
        assert result.code == 0, result.stderr
        assert result.stdout.strip().startswith("Thanks for writing! Which order")
        assert "workflow  support-inbox" in result.stderr
        # --verbose narrates the turn's events live, read from the session's history
        assert '  · archmax_wait {"reason": "the customer\'s reply naming the order"}' in (
            result.stderr
        )
        assert "  · model scripted: in " in result.stderr

    def test_validate_and_test_find_the_one_workflow(self, cli: Cli) -> None:
        assert cli("validate").stdout == "valid — 0 error(s), 0 warning(s)\n"
        # the one word left is the filter, not a workflow
        done = cli("test", "unusable")
        assert done.stdout.endswith("1 passed, 0 failed, 0 skipped\n"), done.stderr

    def test_with_several_workflows_the_usage_error_names_them(self, cli: Cli) -> None:
        write_workflow(cli.root, "another", "states:\n  only:\n    triggers: {manual: }\n")
        result = cli("validate")
        assert result.code == 2
        assert "name the workflow: another, support-inbox" in result.stderr
        named = cli("validate", "support-inbox")
        assert named.code == 0


class TestHelpAndIds:
    def test_help_prints_the_command_table_and_a_commands_flags(self, cli: Cli) -> None:
        table = cli("help")
        assert table.code == 0 and "validate" in table.stdout and "deliver" in table.stdout
        one = cli("help", "deliver")
        assert one.code == 0 and "--trigger" in one.stdout and "--workflow" in one.stdout
        assert cli("help", "nope").code == 2

    def test_an_unusable_session_id_is_a_usage_error(self, cli: Cli) -> None:
        """An id typed on the command line that can name no session is a usage error."""
        result = cli("sessions", "bad\nid")
        assert result.code == 2
        assert "invalid session id 'bad\\nid'" in result.stderr

    def test_an_opaque_session_id_is_just_an_id(self, cli: Cli) -> None:
        """A mail Message-ID or ``CASE #12`` names a session like any other id."""
        for opaque in ("<CAF+x=1@mail.gmail.com>", "CASE #12", "../escape"):
            result = cli("sessions", opaque)
            assert result.code == 1 and "SessionNotFoundError" in result.stderr, result.stderr

    def test_a_bad_id_from_a_payload_names_its_path_and_exits_one(self, cli: Cli) -> None:
        """An id read through the trigger's ``session:`` path that breaks the rules is the
        typed error naming that path (exit 1), not a usage error."""
        result = cli(
            "run",
            "support-inbox",
            "About my order",
            "--trigger",
            "email_received",
            "--variables",
            json.dumps({"conversation_id": "line\nbreak"}),
        )
        assert result.code == 1
        assert "InvalidSessionIdError" in result.stderr
        assert "from session path 'conversation_id'" in result.stderr

    def test_workflow_scopes_a_delivery_to_its_own_sessions(self, cli: Cli) -> None:
        assert park(cli, "cli-scope-1").code == 0
        elsewhere = cli("deliver", "cli-scope-1", "--trigger", "email_reply", "--workflow", "other")
        assert elsewhere.code == 1
        assert "no session 'cli-scope-1' of workflow 'other' (it runs 'support-inbox')" in (
            elsewhere.stderr
        )
        own = cli(
            "deliver",
            "cli-scope-1",
            "--trigger",
            "email_reply",
            "--workflow",
            "support-inbox",
            "--variables",
            json.dumps({"reply_body": "It's ORD-1001."}),
        )
        assert own.code == 0 and "ORD-1001" in own.stdout


def test_events_prints_a_sessions_events_as_json_lines(cli: Cli) -> None:
    assert park(cli, "cli-events-1").code == 0
    result = cli("events", "cli-events-1")
    assert result.code == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["type"] == "turn-start"
    assert events[-1]["type"] == "parked" and events[-1]["data"]["state"] == "clarify"
    later = cli("events", "cli-events-1", "--after", str(events[-2]["seq"]))
    assert [json.loads(line)["type"] for line in later.stdout.splitlines()] == ["parked"]
    missing = cli("events", "never-ran-2")
    assert missing.code == 1 and "SessionNotFoundError" in missing.stderr


def _worker_pid(root: Path) -> int | None:
    """The pid of the root's one background worker, if one is recorded."""
    states = sorted((root / ".archmax").glob("worker-*.json"))
    assert len(states) <= 1, states
    return int(json.loads(states[0].read_text())["pid"]) if states else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] != "Z"


TIMED = """
states:
  wait:
    triggers: { manual: {} }
    instructions: Park until the timer, then finish.
    transitions: [{ to: done, description: woke }]
  done:
    instructions: Say done.
"""


class TestBackgroundWorker:
    """Commands that run a turn use the root's background worker; nothing else starts one,
    and no command serves the queue itself."""

    def test_turn_commands_share_one_background_worker(self, cli: Cli) -> None:
        """The first turn starts it, the next reuses it: one worker, one pid."""
        assert park(cli, "bg-1").code == 0
        pid = _worker_pid(cli.root)
        assert pid is not None and _alive(pid)
        assert park(cli, "bg-2").code == 0
        assert _worker_pid(cli.root) == pid

    def test_a_changed_model_configuration_restarts_it(self, cli: Cli) -> None:
        """A new model id (or key, or endpoint) means a new worker: the old one is stopped,
        so no session runs on the configuration a shell no longer has."""
        assert park(cli, "bg-3").code == 0
        first = _worker_pid(cli.root)
        assert first is not None
        again = cli(
            "deliver",
            "bg-3",
            "--trigger",
            "email_reply",
            "--variables",
            json.dumps({"reply_body": "It's ORD-1001."}),
            env_changes={"ARCHMAX_MODEL": "scripted-2"},
        )
        assert again.code == 0, again.stderr
        second = _worker_pid(cli.root)
        assert second is not None and second != first
        assert not _alive(first)

    def test_a_command_for_another_queue_leaves_the_roots_worker_where_it_is(
        self, cli: Cli
    ) -> None:
        """``--task-queue X`` gets a worker of its own for X: the one serving the root's queue
        (and its sessions' timers) keeps running."""
        assert park(cli, "bg-q1").code == 0
        first = _worker_pid(cli.root)
        assert first is not None
        other = cli(
            "run",
            "support-inbox",
            "About my order",
            "--trigger",
            "email_received",
            "--task-queue",
            f"other-{uuid.uuid4().hex[:8]}",
            "--variables",
            json.dumps({"conversation_id": "bg-q2"}),
        )
        assert other.code == 0, other.stderr
        states = sorted((cli.root / ".archmax").glob("worker-*.json"))
        pids = {int(json.loads(state.read_text())["pid"]) for state in states}
        assert len(states) == 2 and first in pids and all(_alive(pid) for pid in pids)

    def test_read_only_commands_start_no_worker(self, cli: Cli) -> None:
        """After ``archmax dev stop``, listing, showing and reading events start nothing:
        events read the history, and a session no worker can answer for is shown as
        visibility knows it, saying that no worker polls."""
        assert park(cli, "bg-4").code == 0
        pid = _worker_pid(cli.root)
        assert pid is not None
        stopped = cli("dev", "stop")
        assert stopped.code == 0 and "worker    stopped" in stopped.stderr
        assert not _alive(pid)
        assert cli("events", "bg-4").code == 0
        shown = cli("sessions", "bg-4")
        assert shown.code == 0, shown.stderr
        assert "status    awaiting_input (open)" in shown.stdout
        assert "waiting   no worker is polling; start one with archmax worker" in shown.stdout
        assert "variables conversation_id" in shown.stdout  # names, from the memo
        listed = cli("sessions")
        assert "bg-4  awaiting_input  open  state=clarify" in listed.stdout
        assert _worker_pid(cli.root) is None

    def test_no_model_endpoint_is_refused_before_any_session_is_touched(self, cli: Cli) -> None:
        """With no endpoint nor key the command refuses in one line, exit 1: no worker
        starts and no session exists afterwards."""
        result = _park_with(
            cli,
            "bg-5",
            env_changes={
                "ARCHMAX_API_BASE_URL": None,
                "ARCHMAX_API_KEY": None,
                "OPENAI_API_KEY": None,
                "OPENAI_BASE_URL": None,
            },
        )
        assert result.code == 1
        assert result.stderr.strip().splitlines() == [
            "✖ ConfigurationError: no model endpoint configured: set ARCHMAX_API_KEY (OpenAI) "
            "or ARCHMAX_API_BASE_URL (any OpenAI-compatible endpoint), or OPENAI_API_KEY / "
            "OPENAI_BASE_URL"
        ]
        assert _worker_pid(cli.root) is None
        assert "SessionNotFoundError" in cli("events", "bg-5").stderr

    def test_a_read_only_command_never_runs_an_overdue_wake(
        self, cli: Cli, scripted: Scripted
    ) -> None:
        """A session whose timer is due stays parked while only read-only commands run: no
        command serves the queue, so nothing runs it with that shell's configuration."""
        write_workflow(cli.root, "timed", TIMED)
        server = scripted(
            json.dumps(
                {
                    "rules": [
                        {
                            "when": {"state": "wait", "last_tool": "archmax_note"},
                            "reply": {
                                "content": "Waiting.",
                                "tool_calls": [
                                    {
                                        "name": "archmax_wait",
                                        "arguments": {"reason": "r", "until": "3s"},
                                    }
                                ],
                            },
                        }
                    ],
                    "default": {"content": "done"},
                }
            )
        )
        parked = cli(
            "run",
            "timed",
            "--session",
            "bg-6",
            model_url=server.url,
            env_changes={"ARCHMAX_WORKER": "inprocess"},  # its worker ends with the command
        )
        assert parked.code == 0, parked.stderr
        assert _worker_pid(cli.root) is None
        time.sleep(4.0)  # the 3 s timer is now due, and no worker polls
        for command in (("events", "bg-6"), ("sessions",), ("validate", "timed")):
            cli(*command, model_url=server.url)
        listing = cli("sessions", model_url=server.url).stdout
        (line,) = [line for line in listing.splitlines() if line.startswith("bg-6")]
        after = listing.split(line, 1)[1]
        assert re.search(r"^    due \d+ s ago — no worker is polling; start one with", after, re.M)
        events = [json.loads(line) for line in cli("events", "bg-6").stdout.splitlines()]
        assert events[-1]["type"] == "parked"
        assert not [e for e in events if e["type"] == "delivered"]


def _park_with(cli: Cli, conversation: str, env_changes: dict[str, str | None]) -> Result:
    return cli(
        "run",
        "support-inbox",
        "About my order",
        "--trigger",
        "email_received",
        "--variables",
        json.dumps({"conversation_id": conversation}),
        env_changes=env_changes,
    )


class TestNoTracebacks:
    def test_an_unexpected_error_is_one_line_and_exit_one(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Whatever goes wrong inside a command, the user reads one line naming the error
        and how to see more, never a traceback."""
        from archmax_temporal.client.cli import app as main
        from archmax_temporal.client.cli import commands

        async def broken(_: object) -> int:
            raise RuntimeError("the disk caught fire\nsecond line")

        monkeypatch.setattr(commands, "dispatch", broken)
        assert main.run_cli(["sessions"]) == 1
        err = capsys.readouterr().err
        assert err.splitlines()[0] == "✖ RuntimeError: the disk caught fire"
        assert "--debug" in err and "Traceback" not in err
        assert main.run_cli(["--debug", "sessions"]) == 1
        assert "Traceback" in capsys.readouterr().err


def test_events_into_a_reader_that_closed_ends_quietly(cli: Cli) -> None:
    """`archmax events … | head`: when the reader of stdout has gone, the command stops as a
    tool ended by SIGPIPE does (exit 141), with nothing on stderr (no BrokenPipeError)."""
    assert park(cli, "cli-pipe-1").code == 0
    events = subprocess.Popen(
        [sys.executable, "-m", "archmax_temporal", "events", "cli-pipe-1"],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert events.stdout is not None and events.stderr is not None
    events.stdout.close()  # the reader is gone before the first line
    stderr = events.stderr.read().decode()
    assert events.wait(timeout=120) == 141, stderr
    assert stderr == ""


def test_a_reply_narrates_no_trail_and_sessions_shows_the_decision_context(
    cli: Cli, scripted: Scripted
) -> None:
    """`archmax reply` answers at a human state and moves the session nowhere, so it narrates
    no state flow; `archmax sessions` lists a session awaiting a decision with its state, its
    edges and the agent's handoff."""
    write_workflow(cli.root, "review", REVIEW)
    server = scripted(REVIEW_PLAYBOOK)
    parked = cli("run", "review", "Draft it.", "--session", "cli-reply-1", model_url=server.url)
    assert parked.code == 0, parked.stderr
    assert "  → review  (agent)" in parked.stderr
    replied = cli("reply", "cli-reply-1", "Is", "it", "ready?", model_url=server.url)
    assert replied.code == 0, replied.stderr
    assert replied.stdout.strip() == "It is waiting for you."
    flow = [line for line in replied.stderr.splitlines() if line.startswith(("  ▸", "  → "))]
    assert flow == []
    listing = cli("sessions", "--workflow", "review", model_url=server.url)
    assert "    decision at review: done, second-review" in listing.stdout
    assert "    handoff: It is waiting for you." in listing.stdout
