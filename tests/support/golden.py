"""Golden histories: sessions recorded by one release, replayed by every later one.

``tests/histories/<version>/<name>.json`` holds the histories a release recorded, ``<version>``
being the package version that recorded them. They are never overwritten: a history is a
promise to the sessions that release left in flight, so :func:`record` refuses a name that
exists. ``tests/e2e/test_replay.py`` replays every one of them against the current code.

Each :data:`SCENARIOS` entry runs a session on a real dev server and returns the histories to
keep. Several stop while the session is parked (on a timer, at a human state, on a parked
sub-workflow): that is the history a new worker inherits from an old one.

Record the current release's missing histories (existing files are skipped, never
rewritten)::

    python -m tests.support.golden            # every scenario
    python -m tests.support.golden bank-parked-on-timer
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.client.host import Agent
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.runner import run_tests
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.worker import (
    DATA_CONVERTER,
    checking_runner,
    workflow_interceptors,
    workflow_runner,
)
from archmax_temporal.workflows.session import ArchmaxSession
from tests.support.agents import copy_example, model_config, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.paths import EXAMPLES, HISTORIES

RELEASE = version("archmax-temporal")
"""The version this code records under (``tests/histories/<RELEASE>/``)."""


def replayer(*, checking: bool = False) -> Replayer:
    """A replayer of the session workflow as the worker runs it (same converter, runner,
    and the interceptors that decide commands); ``checking``: in Temporal's sandbox with
    archmax's workflow code inside it, where a nondeterministic call fails the replay
    (:func:`archmax_temporal.worker.checking_runner`)."""
    return Replayer(
        workflows=[ArchmaxSession],
        data_converter=DATA_CONVERTER,
        workflow_runner=checking_runner() if checking else workflow_runner(),
        interceptors=workflow_interceptors(),
    )


@dataclass(frozen=True)
class Golden:
    """One committed history: the release that recorded it and its file."""

    release: str
    path: Path

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def id(self) -> str:
        return f"{self.release}/{self.name}"

    def history(self) -> WorkflowHistory:
        return WorkflowHistory.from_json(self.name, self.path.read_text(encoding="utf-8"))


def goldens() -> list[Golden]:
    """Every committed history, oldest release first."""
    found = [
        Golden(directory.name, path)
        for directory in HISTORIES.iterdir()
        if directory.is_dir()
        for path in directory.glob("*.json")
    ]
    return sorted(found, key=lambda g: (_release_key(g.release), g.name))


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in release.split("."))


def record(name: str, history: WorkflowHistory, *, release: str = RELEASE) -> Path | None:
    """Write ``history`` as ``<release>/<name>.json``; None (nothing written) when that file
    exists: a golden history is never overwritten."""
    target = HISTORIES / release / f"{name}.json"
    if target.exists():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(history.to_json(), encoding="utf-8")
    return target


# --- scenarios ------------------------------------------------------------------------------


@dataclass
class Bench:
    """What a scenario runs against: a client, a fresh task queue, a private directory."""

    client: Client
    workdir: Path
    servers: list[ScriptedModelServer]

    def queue(self) -> str:
        return f"golden-{uuid.uuid4().hex[:12]}"

    def model(self, playbook: str | Path) -> ScriptedModelServer:
        book = (
            Playbook.load(playbook) if isinstance(playbook, Path) else Playbook.from_yaml(playbook)
        )
        server = ScriptedModelServer(book).start()
        self.servers.append(server)
        return server

    def root(self) -> Path:
        path = self.workdir / uuid.uuid4().hex[:8]
        path.mkdir()
        return path


Scenario = Callable[[Bench], Awaitable[dict[str, WorkflowHistory]]]


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def support_inbox_park_deliver(bench: Bench) -> dict[str, WorkflowHistory]:
    """Parks in clarify for the customer's reply; the delivery resumes it to an answer."""
    root = EXAMPLES / "support-inbox"
    server = bench.model(root / "workflows" / "support-inbox" / "playbook.yaml")
    sid = _unique("replay")
    async with running_agent(
        bench.client, bench.queue(), root, "support-inbox", server, store=bench.root()
    ) as agent:
        await agent.workflow.send(
            None, "About my order", trigger="email_received", variables={"conversation_id": sid}
        )
        await agent.workflow.deliver(
            sid, trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
        )
        return {"support-inbox-park-deliver": await agent.handle(sid).fetch_history()}


async def order_lookup_cases(bench: Bench) -> dict[str, WorkflowHistory]:
    """Before hooks vetoing at entry with a judge's grade; a script's two mocked sub-workflow
    calls with its journal replayed."""
    root = copy_example("customer-support", bench.root())
    server = bench.model(root / "workflows" / "order-lookup" / "playbook.yaml")
    run = uuid.uuid4().hex[:8]
    kept: dict[str, WorkflowHistory] = {}
    async with running_agent(bench.client, bench.queue(), root, "order-lookup", server) as agent:

        async def target(_workflow: str, _root: Path) -> Agent:
            return agent

        for case in ("cross-company-veto", "enrichment-fan-out"):
            result = await run_tests(
                "order-lookup",
                root,
                filter=case,
                create_target=target,
                model=model_config(server),
                session_id_for_case=lambda c: f"golden-{run}-{c.id}",
            )
            verdicts = [r.verdict.status for r in result.results]
            if verdicts != ["passed"]:
                raise AssertionError(f"case {case}: {verdicts}")
            history = await agent.handle(f"golden-{run}-{case}").fetch_history()
            kept[f"order-lookup-{case}"] = history
    return kept


BANK = """
title: Bank check
states:
  check-bank:
    triggers: { manual: }
    instructions: Look for the transaction; wait and retry if it has not posted.
    transitions:
      - { to: reconcile, description: The transaction was found. }
  reconcile:
    instructions: Confirm the reconciliation.
"""


def bank_playbook(until: str) -> str:
    """The bank check's model: waits ``until``; woken by the timer, advances and confirms."""
    return json.dumps(
        {
            "rules": [
                {
                    "name": "woken-by-the-timer",
                    "when": {
                        "state": "check-bank",
                        "last_tool": "archmax_note",
                        "last_tool_result": "/trigger 'timer'/",
                    },
                    "reply": {"tool_calls": [call("archmax_advance", to="reconcile")]},
                },
                {
                    "name": "wait",
                    "when": {"state": "check-bank"},
                    "reply": {
                        "content": "Not posted yet; I will look again later.",
                        "tool_calls": [call("archmax_wait", reason="posting", until=until)],
                    },
                },
                {
                    "when": {"state": "desk", "last_tool": "archmax_workflow_bank"},
                    "reply": {"content": "The bank check is done."},
                },
                {
                    "name": "desk-dispatches",
                    "when": {"state": "desk"},
                    "reply": {"tool_calls": [call("archmax_workflow_bank")]},
                },
                {"when": {"state": "reconcile"}, "reply": {"content": "Reconciled."}},
            ]
        }
    )


async def bank_parked_on_timer(bench: Bench) -> dict[str, WorkflowHistory]:
    """Parked by ``archmax_wait({until: 3d})``: the history ends with the durable timer
    started and the session awaiting input."""
    root = bench.root()
    write_workflow(root, "bank", BANK)
    server = bench.model(bank_playbook("3d"))
    sid = _unique("golden-bank")
    async with running_agent(bench.client, bench.queue(), root, "bank", server) as agent:
        parked = await agent.workflow.send(sid, "Has the payment posted?")
        if parked.kind != "parked":
            raise AssertionError(f"expected a park, got {parked.kind}")
        return {"bank-parked-on-timer": await agent.handle(sid).fetch_history()}


async def bank_woken_by_timer(bench: Bench) -> dict[str, WorkflowHistory]:
    """Parked on a 2-second timer that fires: the session wakes itself (trigger ``timer``)
    and completes."""
    root = bench.root()
    write_workflow(root, "bank", BANK)
    server = bench.model(bank_playbook("2s"))
    sid = _unique("golden-bank-wake")
    async with running_agent(bench.client, bench.queue(), root, "bank", server) as agent:
        await agent.workflow.send(sid, "Has the payment posted?")
        for _ in range(100):
            if (await agent.sessions.get(sid)).status == "completed":
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError("the timer did not wake the session")
        return {"bank-woken-by-timer": await agent.handle(sid).fetch_history()}


async def refund_parked_for_decision(bench: Bench) -> dict[str, WorkflowHistory]:
    """Parked at a human state (awaiting a finance decision), a reply answered while parked;
    then a second session decided along an edge to completion."""
    root = copy_example("refund-review", bench.root())
    server = bench.model(root / "workflows" / "refund-review" / "playbook.yaml")
    parked_id, decided_id = _unique("golden-refund"), _unique("golden-refund")
    async with running_agent(bench.client, bench.queue(), root, "refund-review", server) as agent:
        for sid in (parked_id, decided_id):
            outcome = await agent.workflow.send(sid, "Please refund order ORD-1001.")
            if outcome.parked_channel != "decision":
                raise AssertionError(f"expected a decision park, got {outcome.kind}")
        await agent.workflow.reply(parked_id, "Any news? Did finance approve it yet?")
        await agent.workflow.decide(decided_id, to="refund-closed", comment="policy ok")
        return {
            "refund-parked-for-decision": await agent.handle(parked_id).fetch_history(),
            "refund-decided": await agent.handle(decided_id).fetch_history(),
        }


DESK = """
title: Desk
states:
  desk:
    triggers: { manual: }
    instructions: Run the bank check as a sub-workflow.
    tools: { allow: [archmax_workflow_bank] }
"""


async def desk_parked_on_sub_workflow(bench: Bench) -> dict[str, WorkflowHistory]:
    """A caller parked on its sub-workflow, which is parked on a 3-day timer: both
    histories, as a deploy finds them."""
    root = bench.root()
    write_workflow(root, "bank", BANK)
    write_workflow(root, "desk", DESK)
    server = bench.model(bank_playbook("3d"))
    sid = _unique("golden-desk")
    async with running_agent(bench.client, bench.queue(), root, "desk", server) as agent:
        parked = await agent.workflow.send(sid, "Check the bank.")
        if parked.delegation is None:
            raise AssertionError(f"expected a park on the child, got {parked.kind}")
        child = parked.delegation.session_id
        return {
            "desk-parked-on-sub-workflow": await agent.handle(sid).fetch_history(),
            "desk-sub-workflow-parked-child": await agent.handle(child).fetch_history(),
        }


EDITED_V1 = """
title: Edited
states:
  intake:
    triggers: { manual: }
    instructions: Answer in place.
"""

EDITED_V2 = """
title: Edited
states:
  front-desk:
    triggers: { manual: {}, chat: {} }
    instructions: Answer in place, politely.
"""


async def spec_edited_between_turns(bench: Bench) -> dict[str, WorkflowHistory]:
    """A turn under one workflow.yaml; the next, on the same id, under an edit that renamed
    its state and added a trigger (the spec travels with the firing; an [error] note)."""
    root = bench.root()
    write_workflow(root, "edited", EDITED_V1)
    server = bench.model(json.dumps({"rules": [{"when": {}, "reply": {"content": "Done."}}]}))
    sid = _unique("golden-edited")
    async with running_agent(bench.client, bench.queue(), root, "edited", server) as agent:
        await agent.workflow.send(sid, "Hello")
        write_workflow(root, "edited", EDITED_V2)
        agent.reload()
        second = await agent.workflow.send(sid, "Hello again", trigger="chat")
        if second.state != "front-desk" or second.spec_hash != agent.loaded.spec_hash:
            raise AssertionError(f"the edit did not reach the turn: {second.state}")
        return {"spec-edited-between-turns": await agent.handle(sid).fetch_history()}


SCENARIOS: dict[str, Scenario] = {
    "support-inbox-park-deliver": support_inbox_park_deliver,
    "order-lookup-cases": order_lookup_cases,
    "bank-parked-on-timer": bank_parked_on_timer,
    "bank-woken-by-timer": bank_woken_by_timer,
    "refund-parked-for-decision": refund_parked_for_decision,
    "desk-parked-on-sub-workflow": desk_parked_on_sub_workflow,
    "spec-edited-between-turns": spec_edited_between_turns,
}
"""Scenario name → the session it runs; each returns history name → history."""


@contextmanager
def bench_on(client: Client) -> Iterator[Bench]:
    """A bench over ``client`` whose directories and model servers go when it closes."""
    with tempfile.TemporaryDirectory(prefix="archmax-golden-") as workdir:
        bench = Bench(client=client, workdir=Path(workdir), servers=[])
        try:
            yield bench
        finally:
            for server in bench.servers:
                server.stop()


async def _record(names: list[str]) -> int:
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenarios: {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
        return 2
    env = await start_local_environment(DATA_CONVERTER)
    try:
        with bench_on(env.client) as bench:
            for name in names or list(SCENARIOS):
                for history_name, history in (await SCENARIOS[name](bench)).items():
                    replayed = await replayer().replay_workflow(
                        history, raise_on_replay_failure=False
                    )
                    if replayed.replay_failure is not None:
                        print(f"{history_name}: does not replay: {replayed.replay_failure}")
                        return 1
                    written = record(history_name, history)
                    where = f"{RELEASE}/{history_name}.json"
                    print(f"{where}: {'recorded' if written else 'exists, kept'}")
    finally:
        await env.shutdown()
    return 0


def main() -> None:
    code = asyncio.run(_record(sys.argv[1:]))
    sys.stdout.flush()
    os._exit(code)  # temporalio/sdk-python#300: no abort at interpreter exit


if __name__ == "__main__":
    main()
