"""A whole session on an ``s3://`` store: a worker and a host on the dev server, files handed
over and written through the tools, nothing on local disk."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from temporalio.client import Client

from archmax_temporal.activities.object_store import open_store
from tests.support.agents import Scripted, running_agent, write_workflow

SESSION_SPEC = """
states:
  inbox:
    triggers: { manual: }
    instructions: Read the attachment, keep notes.
"""

SESSION_PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"last_tool": "read_file", "last_tool_result": "/(?P<total>TOTAL \\d+)/"},
                "reply": {"content": "The invoice says {total}."},
            },
            {
                "when": {"last_tool": "write_file"},
                "reply": {"content": "Noted."},
            },
            {
                "when": {"last_user": "invoice"},
                "reply": {
                    "tool_calls": [
                        {"name": "read_file", "arguments": {"file_path": "${{{{invoice}}}}"}}
                    ]
                },
            },
            {
                "when": {"last_user": "note"},
                "reply": {
                    "tool_calls": [
                        {
                            "name": "write_file",
                            "arguments": {"file_path": "scratchpad/notes.md", "content": "paid"},
                        }
                    ]
                },
            },
            {"when": {}, "reply": {"content": "ok"}},
        ]
    }
)


async def test_a_session_runs_on_s3_end_to_end(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path, s3_url: str
) -> None:
    """A host and a worker on one ``s3://`` store: files handed over land in the bucket, the
    agent reads and writes them through its tools across two turns, and the session folder
    on local disk never appears."""
    write_workflow(tmp_path, "inbox", SESSION_SPEC)
    server = scripted(SESSION_PLAYBOOK)
    sid = f"s3-session-{uuid.uuid4().hex[:8]}"
    raw = bytes(range(256))
    async with running_agent(client, task_queue, tmp_path, "inbox", server, store=s3_url) as agent:
        first = await agent.workflow.send(
            sid,
            "here is the invoice",
            files={"invoice": ("invoice.txt", "TOTAL 412"), "scan": ("scan.bin", raw)},
        )
        second = await agent.workflow.send(sid, "note that it is paid")
    assert first.reply == "The invoice says TOTAL 412."
    assert second.reply == "Noted."
    assert first.variables["invoice"].value == "scratchpad/attachments/invoice.txt"
    store = open_store(s3_url)
    assert store.read_bytes(sid, "scratchpad/attachments/scan.bin") == raw
    assert store.read_text(sid, "scratchpad/notes.md") == "paid"
    assert any(p.startswith("artifacts/") for p in store.walk(sid, ""))
    assert not (tmp_path / "sessions").exists()
