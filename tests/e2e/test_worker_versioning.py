"""Worker Versioning on the dev server: a session parked under build A wakes, while build B is
the deployment's current version, continues as new onto B (upgrade on continue-as-new), and
B runs the resumed turn. The run that parked stays pinned to A until then."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError
from temporalio.worker import Worker, WorkerDeploymentVersion

from archmax_temporal.worker import build_worker, deployment_from_env
from tests.support.agents import Scripted, model_config, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.golden import replayer

DESK = """
title: Desk
states:
  intake:
    triggers: { manual: }
    instructions: Ask, wait for the answer, then thank.
"""

PLAYBOOK = json.dumps(
    {
        "rules": [
            {"name": "thank", "when": {"last_user": "/ORD-/"}, "reply": {"content": "Thanks."}},
            {
                "name": "park",
                "when": {},
                "reply": {
                    "content": "Which order?",
                    "tool_calls": [call("archmax_wait", reason="the order id")],
                },
            },
        ]
    }
)


async def _make_current(client: Client, version: WorkerDeploymentVersion) -> None:
    """Set ``version`` current, once its worker has registered it (retried until then)."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace,
        deployment_name=version.deployment_name,
        build_id=version.build_id,
    )
    for _ in range(100):
        try:
            await client.workflow_service.set_worker_deployment_current_version(request)
            return
        except RPCError:
            await asyncio.sleep(0.2)
    raise AssertionError(f"version {version} never became current")


async def _build_id(client: Client, sid: str) -> tuple[str, str]:
    described = await client.get_workflow_handle(sid).describe()
    info = described.raw_description.workflow_execution_info.versioning_info
    return described.run_id, info.deployment_version.build_id


def test_the_deployment_comes_from_the_environment() -> None:
    """ARCHMAX_DEPLOYMENT names the deployment, ARCHMAX_BUILD_ID the build (default: the
    package version); without a name, no Worker Versioning."""
    assert deployment_from_env({}) is None
    named = deployment_from_env({"ARCHMAX_DEPLOYMENT": "archmax", "ARCHMAX_BUILD_ID": "b7"})
    assert named == WorkerDeploymentVersion(deployment_name="archmax", build_id="b7")
    default = deployment_from_env({"ARCHMAX_DEPLOYMENT": "archmax"})
    assert default is not None and default.build_id[0].isdigit()


async def test_a_parked_session_wakes_onto_the_current_build(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Parked under build A; B becomes current; the delivery continues the session as new
    onto B before the resumed turn, whose caller gets its outcome; A's run replays."""
    write_workflow(tmp_path, "desk", DESK)
    server = scripted(PLAYBOOK)
    deployment = f"archmax-{uuid.uuid4().hex[:8]}"
    a = WorkerDeploymentVersion(deployment_name=deployment, build_id="build-a")
    b = WorkerDeploymentVersion(deployment_name=deployment, build_id="build-b")
    store = tmp_path / "sessions"

    def worker(version: WorkerDeploymentVersion) -> Worker:
        return build_worker(
            client,
            task_queue=task_queue,
            model=model_config(server),
            store_dir=store,
            authoring_root=tmp_path,
            max_cached_workflows=0,
            deployment=version,
        )

    async with (
        running_agent(
            client, task_queue, tmp_path, "desk", server, store=store, worker=False
        ) as agent,
        worker(a),
    ):
        await _make_current(client, a)
        parked = await agent.workflow.send("versioned-1", "Where is my order?")
        parked_run, parked_build = await _build_id(client, "versioned-1")
        async with worker(b):
            await _make_current(client, b)
            outdated = await agent.sessions.list(outdated=True)
            resumed = await agent.workflow.deliver(
                "versioned-1", trigger="email", message="It's ORD-7."
            )
            resumed_run, resumed_build = await _build_id(client, "versioned-1")
            old = await client.get_workflow_handle("versioned-1", run_id=parked_run).fetch_history()
            summary = await agent.sessions.get("versioned-1")
            outdated_after = await agent.sessions.list(outdated=True)
    assert (parked.kind, parked_build) == ("parked", "build-a")
    assert [(o.session_id, o.build_id) for o in outdated] == [("versioned-1", "build-a")]
    assert outdated_after == []
    assert (resumed.kind, resumed.disposition, resumed.reply) == ("completed", "deliver", "Thanks.")
    assert resumed_run != parked_run and resumed_build == "build-b"
    assert old.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert summary.status == "completed" and summary.turns == 1
    assert [r.rule for r in server.requests] == ["park", "thank"]
    replayed = await replayer().replay_workflow(old, raise_on_replay_failure=False)
    assert replayed.replay_failure is None
    described = await client.get_workflow_handle("versioned-1").describe()
    assert described.status == WorkflowExecutionStatus.RUNNING
