"""``archmax demo``: the seed's email conversation, end to end, with no API key.

An email arrives (``email_received``); the session asks which order it is about and parks with
``archmax_wait``; the customer's reply is delivered (``email_reply``); the session resumes in
``clarify``, advances to ``answer`` and names the order. It runs on the embedded dev server with
an in-process worker, and the model is the scripted one from the example's playbook, reached
through the same ``openai`` client code as any real endpoint.

The finished session then releases its run at once (the idle close, :data:`DEMO_IDLE_CLOSE`):
its state is checkpointed and the run completes, so the Temporal UI link the demo prints opens
on a Completed workflow, not on a Running one whose queue no worker polls once the demo's
in-process worker has gone. A next firing on the id reopens it from the checkpoint.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.host import Agent
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.workflows.identity import folder_name
from archmax_temporal.workflows.models import PendingInput

WORKFLOW = "support-inbox"
DEMO_TASK_QUEUE = "archmax-demo"
"""Its own queue, so the demo's scripted-model worker never serves real sessions."""


DEMO_IDLE_CLOSE = timedelta(seconds=1)
"""How long the demo's finished session keeps its run open: a moment, so it closes (Completed)
while the demo's worker still runs."""

CLOSE_WAIT_SECONDS = 30.0
"""How long the demo waits for its finished session's run to close before saying it did not."""


INSTALLED_COPY = "archmax-demo"
"""Where an installed package's demo runs: a copy of the shipped example in the cwd."""


def shipped_example() -> Path:
    """The example tree: ``examples/support-inbox`` of the checkout, or the package data of
    an installed distribution (both sit two levels above this module's real path)."""
    return Path(__file__).resolve().parents[2] / "examples" / WORKFLOW


def default_root() -> Path:
    """The authoring root the demo runs in. In a checkout, the example itself; from an
    installed package (whose files are not the user's to write to), a copy of it in
    ``./archmax-demo``, made once, where the session store and the dev server's database
    live too."""
    shipped = shipped_example()
    if (shipped.parents[1] / "pyproject.toml").is_file():
        return shipped
    copy = Path.cwd() / INSTALLED_COPY
    if not (copy / "workflows" / WORKFLOW / "workflow.yaml").is_file():
        shutil.copytree(shipped, copy, dirs_exist_ok=True)
    return copy


def _say(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


async def run_demo(root: Path | None = None, conversation: str | None = None) -> int:
    """Run the demo; 0 when the session parked, resumed and answered naming the order."""
    root = (root or default_root()).resolve()
    playbook = Playbook.load(root / "workflows" / WORKFLOW / "playbook.yaml")
    config = RuntimeConfig.from_env(root=root).with_overrides(
        task_queue=DEMO_TASK_QUEUE, idle_close=DEMO_IDLE_CLOSE
    )
    conversation_id = conversation or f"demo-{uuid.uuid4().hex[:8]}"
    with ScriptedModelServer(playbook) as model:
        model_config = ModelConfig(base_url=model.url, api_key="scripted", default_model="scripted")
        async with create_agent(
            WORKFLOW, config=config, model=model_config, worker="inprocess"
        ) as agent:
            server = agent.runtime.server
            _say(
                f"temporal  {config.address}"
                + (" (started the embedded dev server)" if server and server.started else "")
            )
            _say(f"model     scripted, at {model.url}")
            _say()
            first = "About the thing we discussed on the phone — can you sort it out?"
            _say(f"1. email_received on conversation {conversation_id}:\n   “{first}”")
            parked = await agent.workflow.send(
                None,
                first,
                trigger="email_received",
                variables={"conversation_id": conversation_id},
            )
            reason = parked.pending.reason if isinstance(parked.pending, PendingInput) else ""
            _say(f"   → {parked.kind} in {parked.state}: {reason}")
            _say(f"   the agent asked: {parked.reply}")
            summary = await agent.sessions.get(conversation_id)
            _say(f"2. sessions.get → status {summary.status}, waiting for: {summary.wait_reason}")
            reply = "It's ORD-1001."
            _say(f"3. email_reply delivered with reply_body “{reply}”")
            resumed = await agent.workflow.deliver(
                conversation_id, trigger="email_reply", variables={"reply_body": reply}
            )
            whole = (await agent.sessions.view(conversation_id)).trail
            flow = " → ".join(f"{s.to}" for s in whole)
            _say(f"   → {resumed.kind} in {resumed.state} (trail: {flow})")
            print(resumed.reply, flush=True)
            closed = await _run_closed(agent, conversation_id)
            _say(
                "4. finished and idle: its run closed (Completed), its state checkpointed; a "
                "next firing reopens it"
                if closed
                else "4. its run is still open (a finished session closes once idle)"
            )
            ui = server.ui_url if server and server.ui_url else "http://localhost:8233"
            _say()
            _say(
                f"See it in the Temporal UI: {ui}/namespaces/{config.namespace}/workflows/"
                f"{conversation_id}"
            )
            _say(f"Artifacts: {config.store_location}/{folder_name(conversation_id)}/artifacts")
            _say(
                f"Its events: ARCHMAX_TASK_QUEUE={DEMO_TASK_QUEUE} archmax events "
                f"{conversation_id}  (the demo's own task queue, never the default one)"
            )
            ok = resumed.kind == "completed" and "ORD-1001" in resumed.reply
            return 0 if ok else 1


async def _run_closed(agent: Agent, session_id: str) -> bool:
    """Wait (polling) until the session's run has closed through the idle close; whether it
    did within :data:`CLOSE_WAIT_SECONDS`."""
    handle = agent.handle(session_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CLOSE_WAIT_SECONDS
    while loop.time() < deadline:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return True
        await asyncio.sleep(0.1)
    return False
