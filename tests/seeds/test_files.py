"""Files handed to a session (the seed's "Files handed to a session"), on the dev server."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from archmax_temporal.activities.store_errors import ReadOnlyPathError
from archmax_temporal.workflows.errors import ArchmaxError
from tests.support.agents import Scripted, running_agent, write_workflow

SPEC = """
states:
  inbox:
    triggers: { manual: }
    instructions: Read the attachment.
"""

PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"last_tool": "read_file", "last_tool_result": "/(?P<total>TOTAL \\d+)/"},
                "reply": {"content": "The invoice says {total}."},
            },
            {
                "when": {"last_user": "invoice"},
                "reply": {
                    "tool_calls": [
                        {
                            "name": "read_file",
                            # {{ }} escape the playbook's own templating: the model
                            # writes the reference ${{invoice}} into its call
                            "arguments": {"file_path": "${{{{invoice}}}}"},
                        }
                    ]
                },
            },
            {"when": {}, "reply": {"content": "ok"}},
        ]
    }
)


async def test_files_are_placed_seeded_locked_and_readable_by_reference(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Each file lands in scratchpad/attachments/ before the turn; its variable is seeded,
    locked, with the placed path; the agent reads it through a ${{invoice}} reference; a
    second file of the same name takes the next free name; bytes arrive exactly."""
    write_workflow(tmp_path, "inbox", SPEC)
    server = scripted(PLAYBOOK)
    store = tmp_path / "store"
    raw = bytes(range(256))
    async with running_agent(client, task_queue, tmp_path, "inbox", server, store=store) as agent:
        first = await agent.workflow.send(
            "files-1",
            "here is the invoice",
            files={"invoice": ("invoice.txt", "TOTAL 412"), "scan": ("scan.bin", raw)},
        )
        second = await agent.workflow.send(
            "files-1", "another one", files={"invoice_again": ("invoice.txt", "TOTAL 7")}
        )
        seeded = await agent.sessions.seed("files-1", {"trigger.json": '{"a": 1}'})
    assert first.reply == "The invoice says TOTAL 412."
    invoice = first.variables["invoice"]
    assert (invoice.value, invoice.locked) == ("scratchpad/attachments/invoice.txt", True)
    attachments = store / "files-1" / "scratchpad" / "attachments"
    assert (attachments / "scan.bin").read_bytes() == raw
    assert second.variables["invoice_again"].value == "scratchpad/attachments/invoice-1.txt"
    assert (attachments / "invoice.txt").read_text() == "TOTAL 412"
    assert (attachments / "invoice-1.txt").read_text() == "TOTAL 7"
    assert seeded == ["trigger.json"]
    assert (store / "files-1" / "trigger.json").read_text() == '{"a": 1}'
    assert "trigger.json" not in second.variables


async def test_a_refused_seed_is_an_archmax_error(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """``except ArchmaxError`` catches ``sessions.seed``'s refusal: a typed ``WorkspaceError``
    naming the refused path, like every error a host can see."""
    write_workflow(tmp_path, "inbox", SPEC)
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, tmp_path, "inbox", server, worker=False) as agent:
        try:
            await agent.sessions.seed("files-2", {"skills/x/notes.md": "no"})
        except ArchmaxError as exc:
            refused: ArchmaxError | None = exc
        else:
            refused = None
    assert isinstance(refused, ReadOnlyPathError)
    assert refused.path == "skills/x/notes.md"
