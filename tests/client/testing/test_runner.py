"""``run_tests`` / ``run_case`` on the real dev server with the scripted model: the examples'
suites pass, and every halting, dying, skipping and start rule of the case format holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.host import Agent
from archmax_temporal.client.testing import runner
from archmax_temporal.client.testing.results import RunTestsResult
from archmax_temporal.client.testing.runner import run_tests
from archmax_temporal.workflows.errors import UnsupportedConcurrencyError
from tests.support.agents import Scripted, copy_example, model_config, write_workflow
from tests.support.agents import tool_call as call
from tests.support.suites import run_suite


def _statuses(result: RunTestsResult) -> dict[str, str]:
    return {r.id: r.verdict.status for r in result.results}


def _failures(result: RunTestsResult) -> dict[str, list[str]]:
    return {r.id: r.verdict.failures for r in result.results if r.verdict.failures}


@pytest.mark.parametrize(
    ("example", "workflow"),
    [
        ("support-inbox", "support-inbox"),
        ("refund-review", "refund-review"),
        ("customer-support", "order-lookup"),
    ],
)
async def test_each_examples_suite_passes_against_its_playbook(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path, example: str, workflow: str
) -> None:
    root = copy_example(example, tmp_path)
    playbook = root / "workflows" / workflow / "playbook.yaml"
    result, _ = await run_suite(client, task_queue, scripted, root, workflow, playbook)
    assert _failures(result) == {}
    assert result.exit_code == 0
    assert result.discovered == len(result.results) >= 2
    assert all(c.verdict.status == "passed" for c in result.results)
    assert all(c.session_id and c.session_id.startswith("test-") for c in result.results)
    assert all(r.status == "passed" for c in result.results for r in c.records)


async def test_a_passing_cases_session_ends_cancelled_never_terminated(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Once its case passed, the session the runner named is ended through Temporal's
    cancellation, which the session takes cleanly: the UI shows it Canceled, never
    Terminated (an operator's act), and its history ends with the cancellation."""
    root = copy_example("support-inbox", tmp_path)
    playbook = root / "workflows" / "support-inbox" / "playbook.yaml"
    result, _ = await run_suite(client, task_queue, scripted, root, "support-inbox", playbook)
    assert result.exit_code == 0 and result.results
    for case in result.results:
        assert case.verdict.status == "passed" and case.session_id
        described = await client.get_workflow_handle(case.session_id).describe()
        assert described.status == WorkflowExecutionStatus.CANCELED, case.id


async def test_the_suites_own_worker_is_shut_down_when_the_run_ends(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no target given (``archmax test``), the suite opens its own agent with an
    in-process worker for all its cases, and that worker is shut down once the run ends."""
    root = copy_example("support-inbox", tmp_path)
    server = scripted(root / "workflows" / "support-inbox" / "playbook.yaml")
    config = RuntimeConfig(
        root=root,
        store=root / "sessions",
        address="unused",
        task_queue=task_queue,
        address_configured=True,
    )
    opened: list[Agent] = []

    async def recording(workflow: str, **options: Any) -> Agent:
        agent = await create_agent(workflow, **options)
        opened.append(agent)
        return agent

    monkeypatch.setattr(runner, "create_agent", recording)
    result = await run_tests(
        "support-inbox",
        root,
        model=model_config(server),
        config=config,
        client=client,
        worker="inprocess",
    )
    assert result.exit_code == 0 and len(result.results) >= 2
    assert len(opened) == 1  # one agent, one worker, for every case
    worker = opened[0].runtime.worker
    assert worker is not None and worker.is_shutdown


DESK = """
title: Desk
states:
  intake:
    triggers: { manual: , report_requested: }
    skills: { allow: [order-data] }
    instructions: Answer.
    transitions: [{ to: done, description: Finished. }]
  done: {}
"""

DESK_PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"last_tool": "read_file", "last_tool_result": "/(?P<body>.+)/s"},
                "reply": {"content": "Read: {body}"},
            },
            {
                "when": {"last_user": "/seed/"},
                "reply": {"tool_calls": [call("read_file", file_path="scratchpad/in.json")]},
            },
            {
                "when": {"last_user": "/orders/"},
                "reply": {
                    "tool_calls": [
                        call("read_file", file_path="skills/order-data/assets/orders.json")
                    ]
                },
            },
        ],
        "default": {"content": "hello there"},
    }
)


def _case(root: Path, name: str, text: str) -> None:
    path = root / "workflows" / "desk" / "tests" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def desk(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "desk", DESK)
    skill = tmp_path / "skills" / "order-data"
    (skill / "assets").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: order-data\ndescription: Orders.\n---\n")
    (skill / "assets" / "orders.json").write_text('[{"id": "ORD-1001"}]')
    return tmp_path


HEAD = "title: {title}\ndescription: A rule of the runner.\n"


async def test_a_structural_miss_halts_and_reports_the_rest_not_executed(
    client: Client, task_queue: str, scripted: Scripted, desk: Path
) -> None:
    _case(
        desk,
        "halt.test.yaml",
        HEAD.format(title="halt")
        + "steps:\n  - send: hi\n  - reachedState: done\n  - reply: { includes: [a, b] }\n"
        "  - send: again\n  - succeeded: true\n",
    )
    result, server = await run_suite(client, task_queue, scripted, desk, "desk", DESK_PLAYBOOK)
    (case,) = result.results
    assert case.error is None and case.verdict.status == "failed"
    assert [(r.kind, r.status, r.step) for r in case.records] == [
        ("reachedState", "failed", 1),
        ("reply", "not-executed", 2),  # one record for an un-run multi-token reply
        ("succeeded", "not-executed", 4),
    ]
    detail = case.records[0].detail
    assert detail is not None
    assert case.verdict.failures == ["reachedState: " + detail]
    assert len(server.requests) == 1  # the second send was never driven
    assert result.exit_code == 1


async def test_a_content_miss_lets_the_case_carry_on(
    client: Client, task_queue: str, scripted: Scripted, desk: Path
) -> None:
    _case(
        desk,
        "content.test.yaml",
        HEAD.format(title="content")
        + "steps:\n  - send: hi\n  - reply: { includes: nope }\n  - succeeded: true\n"
        "  - usedNoTools: true\n",
    )
    result, _ = await run_suite(client, task_queue, scripted, desk, "desk", DESK_PLAYBOOK)
    (case,) = result.results
    assert [(r.kind, r.status) for r in case.records] == [
        ("reply", "failed"),
        ("succeeded", "passed"),
        ("usedNoTools", "passed"),
    ]
    assert case.verdict.failures == ["reply: no assistant message includes 'nope'"]


async def test_a_delivery_to_a_session_not_parked_kills_the_case_error_first(
    client: Client, task_queue: str, scripted: Scripted, desk: Path
) -> None:
    _case(
        desk,
        "died.test.yaml",
        HEAD.format(title="died") + "steps:\n  - send: hi\n  - reply: { includes: zzz }\n"
        "  - deliver: { trigger: email_reply }\n  - succeeded: true\n",
    )
    result, _ = await run_suite(client, task_queue, scripted, desk, "desk", DESK_PLAYBOOK)
    (case,) = result.results
    assert case.error is not None and case.error.startswith("steps[2] deliver: ")
    assert "not parked awaiting input" in case.error
    assert case.verdict.failures == [case.error, "reply: no assistant message includes 'zzz'"]
    assert [(r.status, r.step) for r in case.records] == [("failed", 1), ("not-executed", 3)]


async def test_skip_unknown_trigger_and_an_invalid_document(
    client: Client, task_queue: str, scripted: Scripted, desk: Path
) -> None:
    _case(desk, "a-skipped.test.yaml", HEAD.format(title="s") + "skip: flaky upstream\n")
    _case(
        desk,
        "b-trigger.test.yaml",
        HEAD.format(title="t") + "trigger: { id: nope }\nsteps:\n  - send: hi\n"
        "  - succeeded: true\n",
    )
    _case(desk, "c-broken.test.yaml", HEAD.format(title="b") + "steps:\n  - reachedstate: x\n")
    (desk / "workflows" / "desk" / "tests" / "notes.md").write_text("ignored")
    result, server = await run_suite(client, task_queue, scripted, desk, "desk", DESK_PLAYBOOK)
    skipped, trigger, broken = result.results
    assert (skipped.verdict.status, skipped.skip_reason, skipped.session_id) == (
        "skipped",
        "flaky upstream",
        None,
    )
    assert skipped.records == []
    assert trigger.error is not None
    assert "'nope'" in trigger.error and "declared triggers: manual, report_requested" in (
        trigger.error
    )
    assert [r.status for r in trigger.records] == ["not-executed"]
    assert broken.verdict.status == "failed" and "reachedstate" in broken.verdict.failures[0]
    assert result.discovered == 3 and server.requests == []
    assert result.model_dump(by_alias=True)["exitCode"] == 1


async def test_mocks_workspace_and_locked_variables(
    client: Client, task_queue: str, scripted: Scripted, desk: Path
) -> None:
    fixtures = desk / "workflows" / "desk" / "tests" / "fixtures"
    fixtures.mkdir(parents=True)
    (fixtures / "trigger.json").write_text('{"from": "file"}')
    _case(
        desk,
        "mocked.test.yaml",
        HEAD.format(title="mocked")
        + "mocks:\n  - tool: read_file\n    whenInput: { file_path: '/orders\\.json$/' }\n"
        "    result: '[]'\nsteps:\n  - send: which orders?\n  - reply: { includes: 'Read: []' }\n"
        "  - calledTool: { name: read_file, input: { file_path: '/orders/' } }\n",
    )
    _case(
        desk,
        "seeded.test.yaml",
        HEAD.format(title="seeded")
        + "trigger: { id: report_requested }\nvariables: { company: Acme Corp }\n"
        "workspace:\n  scratchpad/in.json: { total: 3 }\n"
        "  trigger.json: { from: fixtures/trigger.json }\n"
        "steps:\n  - send: read the seed\n  - reply: { includes: '\"total\": 3' }\n"
        "  - triggerArrival: report_requested\n"
        "  - variables: { expect: { company: Acme Corp }, locked: { company: true } }\n",
    )
    result, _ = await run_suite(client, task_queue, scripted, desk, "desk", DESK_PLAYBOOK)
    assert _failures(result) == {}
    seeded = result.results[1]
    trigger_file = desk / "sessions" / str(seeded.session_id) / "trigger.json"
    assert trigger_file.read_text() == '{"from": "file"}'


async def test_filter_disabled_and_concurrency(
    client: Client, task_queue: str, scripted: Scripted, desk: Path
) -> None:
    _case(desk, "one.test.yaml", HEAD.format(title="one") + "steps:\n  - send: hi\n")
    result, _ = await run_suite(
        client, task_queue, scripted, desk, "desk", DESK_PLAYBOOK, filter="zzz"
    )
    assert (result.results, result.exit_code, result.discovered) == ([], 1, 1)

    spec = desk / "workflows" / "desk" / "workflow.yaml"
    spec.write_text(DESK + "tests: { maxConcurrency: 2 }\n")
    with pytest.raises(UnsupportedConcurrencyError, match="maxConcurrency: 2"):
        await run_suite(client, task_queue, scripted, desk, "desk", DESK_PLAYBOOK)

    spec.write_text(DESK + "disabled: true\n")
    result, server = await run_suite(client, task_queue, scripted, desk, "desk", DESK_PLAYBOOK)
    assert (result.skipped, result.exit_code, result.results) == ("disabled", 0, [])
    assert server.requests == []


async def test_case_timeout_kills_the_case_and_keeps_its_records(
    client: Client, task_queue: str, scripted: Scripted, desk: Path
) -> None:
    spec = desk / "workflows" / "desk" / "workflow.yaml"
    spec.write_text(DESK + "tests: { caseTimeoutMs: 6000 }\n")
    _case(
        desk,
        "slow.test.yaml",
        HEAD.format(title="slow")
        + "steps:\n  - send: hi\n  - succeeded: true\n  - send: slow please\n"
        "  - succeeded: true\n",
    )
    playbook = json.dumps(
        {
            "rules": [
                {"when": {"last_user": "/slow/"}, "delay_ms": 60000, "reply": {"content": "late"}}
            ],
            "default": {"content": "quick"},
        }
    )
    result, _ = await run_suite(client, task_queue, scripted, desk, "desk", playbook)
    (case,) = result.results
    assert case.error == "case exceeded tests.caseTimeoutMs (6000 ms)"
    assert [(r.status, r.step) for r in case.records] == [("passed", 1), ("not-executed", 3)]


def test_the_host_api_exports_the_runner_and_the_shared_matcher() -> None:
    """DESIGN §4: a host imports the case runner's halves and ``partial_match`` from the
    package root; the matcher is the one mocks use."""
    import archmax_temporal as client
    from archmax_temporal.client.testing import runner
    from archmax_temporal.workflows import matching

    assert (client.run_tests, client.run_case, client.discover_cases) == (
        runner.run_tests,
        runner.run_case,
        runner.discover_cases,
    )
    assert client.partial_match is matching.partial_match
    assert client.partial_match({"order": {"id": "A"}}, {"order": {"id": "A", "x": 1}})
    assert not client.partial_match({"order": {"id": "B"}}, {"order": {"id": "A", "x": 1}})
