"""What a model, a host or an external system sends never wedges, closes or fakes a session.

Each test reproduces a failure seen on an earlier main, against the real dev server and the
real ``openai`` client talking to the scripted model."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from archmax_temporal.workflows.context import CLEANED_ARGUMENTS
from archmax_temporal.workflows.text import REPLACEMENT
from tests.conftest import Scripted, running_agent, write_workflow

NOTES = """
title: Notes
instructions: Keep notes.
states:
  write:
    triggers: { manual: {} }
    instructions: Write the note, then say done.
    tools:
      allow: [write_file, read_file]
"""


def _book(*rules: dict[str, object], default: str = "done") -> str:
    return json.dumps({"rules": list(rules), "default": {"content": default}})


def _sid() -> str:
    return f"untrusted-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def notes_root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "notes", NOTES)
    return tmp_path


class TestLoneSurrogates:
    async def test_an_escaped_surrogate_in_tool_arguments_is_replaced_and_the_model_told(
        self, client: Client, task_queue: str, scripted: Scripted, notes_root: Path
    ) -> None:
        """``{"content": "bad \\ud800"}`` is valid JSON: the write runs with U+FFFD, the
        answer says the arguments were altered, and the session completes."""
        raw = '{"file_path": "scratchpad/s.txt", "content": "bad \\ud800 end"}'
        server = scripted(
            _book(
                {
                    "when": {"last_user": "note"},
                    "times": 1,
                    "reply": {"tool_calls": [{"name": "write_file", "raw_arguments": raw}]},
                }
            )
        )
        sid = _sid()
        async with running_agent(client, task_queue, notes_root, "notes", server) as agent:
            outcome = await agent.workflow.send(sid, "write the note")
            view = await agent.sessions.view(sid)
        assert outcome.kind == "completed"
        written = (notes_root / "sessions" / sid / "scratchpad" / "s.txt").read_text()
        assert written == f"bad {REPLACEMENT} end"
        (answer,) = [m for m in view.transcript if m.role == "tool" and m.name == "write_file"]
        assert (answer.content or "").startswith(CLEANED_ARGUMENTS)

    async def test_a_surrogate_in_a_set_variable_reaches_the_artifacts(
        self, client: Client, task_queue: str, scripted: Scripted, notes_root: Path
    ) -> None:
        """A value set with ``archmax_set_variables`` is stored cleaned, so the artifacts
        activity that carries it can be written."""
        raw = '{"variables": {"topic": "x\\udc00y"}}'
        server = scripted(
            _book(
                {
                    "when": {"last_user": "note"},
                    "times": 1,
                    "reply": {
                        "tool_calls": [{"name": "archmax_set_variables", "raw_arguments": raw}]
                    },
                }
            )
        )
        sid = _sid()
        async with running_agent(client, task_queue, notes_root, "notes", server) as agent:
            outcome = await agent.workflow.send(sid, "note the topic")
        assert outcome.kind == "completed"
        assert outcome.variables["topic"].value == f"x{REPLACEMENT}y"
        stored = json.loads(
            (notes_root / "sessions" / sid / "artifacts" / "variables.json").read_text()
        )
        assert stored["variables"]["topic"]["value"] == f"x{REPLACEMENT}y"

    async def test_a_surrogate_in_the_models_text_costs_one_call(
        self, client: Client, task_queue: str, scripted: Scripted, notes_root: Path
    ) -> None:
        """The reply text is cleaned by the model activity: one paid call, not six."""
        server = scripted(_book(default="answer \ud800 here"))
        sid = _sid()
        async with running_agent(client, task_queue, notes_root, "notes", server) as agent:
            outcome = await agent.workflow.send(sid, "hello")
        assert outcome.kind == "completed"
        assert outcome.reply == f"answer {REPLACEMENT} here"
        assert len(server.requests) == 1
