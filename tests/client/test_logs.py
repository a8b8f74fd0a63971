"""Logs: JSON lines or key-value on stderr, the session bound on workflow and activity lines,
replay-safe, nothing on stdout from the library, no secret in any line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from temporalio.client import Client

from archmax_temporal.activities.logs import get_logger
from archmax_temporal.client.logs import MASK, configure_logging, secrets_from_env
from tests.support.agents import Scripted, copy_example, running_agent
from tests.support.paths import EXAMPLES

SECRET = "sk-live-0123456789abcdef"
PLAYBOOK = EXAMPLES / "support-inbox/workflows/support-inbox/playbook.yaml"


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    """Each test starts and ends with no archmax logging set up (as a host that set none)."""

    def reset() -> None:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if h.get_name() == "archmax"]:
            root.removeHandler(handler)
        root.setLevel(logging.WARNING)
        structlog.reset_defaults()

    reset()
    yield
    reset()


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


async def _park_and_deliver(
    client: Client, task_queue: str, tmp_path: Path, scripted: Scripted, session_id: str
) -> None:
    """The support-inbox turn that parks, then the delivery that completes it, on a
    cache-less worker (every workflow task replays the whole history)."""
    root = copy_example("support-inbox", tmp_path)
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, root, "support-inbox", server) as agent:
        parked = await agent.workflow.send(
            session_id,
            "About the thing we discussed on the phone.",
            trigger="email_received",
            variables={"conversation_id": session_id},
        )
        assert parked.status == "awaiting_input"
        done = await agent.workflow.deliver(
            session_id, trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
        )
        assert done.status == "completed"


class TestJsonLines:
    async def test_workflow_and_activity_lines_carry_the_session_once_each(
        self, client: Client, task_queue: str, tmp_path: Path, scripted: Scripted
    ) -> None:
        """Every line is a JSON object; workflow lines carry session, run, workflow and
        state; model-call lines carry session, run, activity, attempt and state; replays
        (a cache-less worker replays every task) add no line."""
        stream = io.StringIO()
        configure_logging(verbose=True, format="json", stream=stream, env={})
        session_id = f"logs-{task_queue}"
        await _park_and_deliver(client, task_queue, tmp_path, scripted, session_id)
        lines = _lines(stream)
        ours = [line for line in lines if line.get("session_id") == session_id]
        settled = [line for line in ours if line["event"].startswith("firing settled")]
        assert [line["event"] for line in settled] == [
            "firing settled (turn): awaiting_input",
            "firing settled (deliver): completed",
        ]
        for line in settled:
            assert line["workflow"] == "support-inbox"
            assert line["state"] and line["run_id"] and line["level"] == "info"
            assert line["timestamp"].endswith("Z")
        woken = [line for line in ours if line["event"] == "session woken by input"]
        assert len(woken) == 1
        calls = [line for line in ours if line["event"] == "model call"]
        assert len(calls) >= 2
        for line in calls:
            assert line["activity"] == "archmax.model.complete"
            assert line["attempt"] == 1 and line["run_id"] and line["state"]
            assert line["logger"] == "archmax.model"

    def test_a_secret_is_masked_in_every_field_and_message(self) -> None:
        """A key from the environment is masked wherever it appears; secret-named fields
        are masked whatever they hold."""
        stream = io.StringIO()
        configure_logging(format="json", stream=stream, env={"ARCHMAX_API_KEY": SECRET})
        get_logger("archmax.test").warning(
            "call failed", error=f"401 for key {SECRET}", api_key="anything", nested={"k": SECRET}
        )
        logging.getLogger("some.library").warning("connecting with %s", SECRET)
        structlog.get_logger("archmax.cli").warning("header", authorization=f"Bearer {SECRET}")
        text = stream.getvalue()
        assert SECRET not in text
        first, second, third = _lines(stream)
        assert first["error"] == f"401 for key {MASK}" and first["api_key"] == MASK
        assert first["nested"] == {"k": MASK}
        assert second["event"] == f"connecting with {MASK}"
        assert third["authorization"] == MASK

    @pytest.mark.parametrize("format", ["json", "console"])
    def test_a_secret_in_a_traceback_is_masked(self, format: Any) -> None:
        """An exception whose message or traceback holds the key is logged masked."""
        stream = io.StringIO()
        configure_logging(format=format, stream=stream, env={"OPENAI_API_KEY": SECRET})
        try:
            raise RuntimeError(f"401 Unauthorized for {SECRET}")
        except RuntimeError:
            get_logger("archmax.test").exception("model call failed")
            logging.getLogger("other").exception("also failed")
        text = stream.getvalue()
        assert SECRET not in text
        assert text.count("RuntimeError") >= 2 and MASK in text

    def test_secrets_are_read_from_secret_named_variables_only(self) -> None:
        """``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``; short values are left."""
        env = {
            "TEMPORAL_API_KEY": "tk-123456789",
            "GITHUB_TOKEN": "ghp_abcdefgh",
            "ARCHMAX_MODEL": "gpt-4.1-mini",
            "DB_PASSWORD": "x",
            "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI",  # the object store's credentials
            "AZURE_STORAGE_ACCOUNT_KEY": "az-0123456789",
            "AWS_ACCESS_KEY_ID": "AKIAIDENTIFIER",  # an identifier, not a secret
        }
        assert set(secrets_from_env(env)) == {
            "tk-123456789",
            "ghp_abcdefgh",
            "wJalrXUtnFEMI",
            "az-0123456789",
        }


class TestConsole:
    def test_key_value_lines_on_a_terminal(self) -> None:
        """Without ARCHMAX_LOG_FORMAT=json a line is readable key-value text."""
        stream = io.StringIO()
        configure_logging(stream=stream, env={})
        get_logger("archmax.test").warning("parked", session_id="s-1", state="clarify")
        text = stream.getvalue()
        assert "parked" in text and "session_id=s-1" in text and "state=clarify" in text
        with pytest.raises(json.JSONDecodeError):
            json.loads(text.splitlines()[0])

    def test_the_format_comes_from_archmax_log_format(self) -> None:
        """ARCHMAX_LOG_FORMAT=json switches to JSON lines."""
        stream = io.StringIO()
        configure_logging(stream=stream, env={"ARCHMAX_LOG_FORMAT": "json"})
        get_logger("archmax.test").warning("parked", session_id="s-1")
        assert _lines(stream)[0]["session_id"] == "s-1"


class TestLibrary:
    async def test_a_turn_prints_nothing_on_stdout_when_nothing_is_configured(
        self,
        client: Client,
        task_queue: str,
        tmp_path: Path,
        scripted: Scripted,
        capfd: pytest.CaptureFixture[str],
    ) -> None:
        """Used as a library (no logging set up), a whole park-and-deliver writes nothing to
        stdout, and its info lines reach no stream at all."""
        capfd.readouterr()
        await _park_and_deliver(client, task_queue, tmp_path, scripted, f"quiet-{task_queue}")
        out, err = capfd.readouterr()
        assert out == ""
        assert "model call" not in err and "firing settled" not in err
