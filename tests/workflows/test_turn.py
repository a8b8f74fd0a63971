"""The session workflow's turn loop on the real dev server: runtime tools, variables, raise,
invalid advances, budgets, model errors, and what the history records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.contracts import MODEL_ACTIVITY
from archmax_temporal.workflows.errors import (
    InvalidSessionIdError,
    InvalidVariableNameError,
    SessionNotAwaitingInputError,
    UnknownTriggerError,
)
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as tool

ORDERS = """
title: Orders
instructions: Help with orders.
states:
  triage:
    triggers:
      manual:
      web_chat: { session: chat.id }
    instructions: Decide where the request goes.
    budget: { maxTurns: 3 }
    transitions:
      - { to: lookup, description: The customer asks about an order. }
  lookup:
    instructions: Look the order up.
    transitions:
      - { to: done, description: The answer is ready. }
  done:
    instructions: Answer.
"""


def playbook(*rules: dict[str, object]) -> str:
    return json.dumps({"rules": list(rules)})


@pytest.fixture
def orders_root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "orders", ORDERS)
    return tmp_path


async def _model_calls(agent: Agent, session_id: str) -> int:
    history = await agent.handle(session_id).fetch_history()
    return sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == MODEL_ACTIVITY
    )


class TestAdvance:
    async def test_advance_along_declared_edges_completes_in_the_terminal_state(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """Each archmax_advance commits an agent trail step; text alone in `done` completes."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "triage"},
                    "reply": {"tool_calls": [tool("archmax_advance", to="lookup", reason="order")]},
                },
                {
                    "when": {"state": "lookup"},
                    "reply": {"tool_calls": [tool("archmax_advance", to="done")]},
                },
                {"when": {"state": "done"}, "reply": {"content": "ORD-1 is on its way."}},
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send("adv-1", "Where is ORD-1?")
        assert outcome.kind == "completed"
        assert outcome.exit is not None and outcome.exit.success
        assert outcome.state == "done"
        assert [(s.kind, s.to) for s in outcome.trail] == [
            ("trigger", "triage"),
            ("agent", "lookup"),
            ("agent", "done"),
        ]
        assert outcome.reply == "ORD-1 is on its way."

    async def test_an_invalid_target_is_a_refusal_the_model_reads(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """Advancing to a state that is not an edge commits nothing; the model reads why."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "triage", "last_tool_result": "/rejected/"},
                    "reply": {"content": "Sorry, I cannot skip ahead."},
                },
                {
                    "when": {"state": "triage"},
                    "reply": {"tool_calls": [tool("archmax_advance", to="done")]},
                },
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send("adv-2", "Just answer.")
            view = await agent.sessions.view("adv-2")
        assert outcome.kind == "completed"
        assert outcome.state == "triage"
        assert [s.kind for s in outcome.trail] == ["trigger"]
        refusal = next(m for m in view.transcript if m.role == "tool")
        assert refusal.status == "error"
        assert "'done' is not a transition of 'triage'" in (refusal.content or "")
        assert "Valid targets: lookup" in (refusal.content or "")

    async def test_terminal_state_hides_advance_from_the_model(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """The tools a model call discloses in a terminal state do not include archmax_advance."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "triage"},
                    "reply": {"tool_calls": [tool("archmax_advance", to="lookup")]},
                },
                {
                    "when": {"state": "lookup"},
                    "reply": {"tool_calls": [tool("archmax_advance", to="done")]},
                },
                {"when": {"state": "done"}, "reply": {"content": "Done."}},
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            await agent.workflow.send("adv-3", "hi")
        tools_by_call = [{t["function"]["name"] for t in r.body["tools"]} for r in server.requests]
        assert "archmax_advance" in tools_by_call[0]
        assert "archmax_advance" not in tools_by_call[-1]
        assert all("archmax_note" not in names for names in tools_by_call)


class TestRaise:
    async def test_raise_ends_the_turn_failed_without_another_model_call(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """archmax_raise: status failed, exit carries code and reason, one model call in all."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "triage"},
                    "reply": {
                        "tool_calls": [
                            tool(
                                "archmax_raise",
                                code="orders-unavailable",
                                reason="The order system is down.",
                            )
                        ]
                    },
                }
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send("raise-1", "Where is ORD-1?")
            summary = await agent.sessions.get("raise-1")
            calls = await _model_calls(agent, "raise-1")
        assert outcome.kind == "failed"
        assert outcome.exit is not None
        assert (outcome.exit.success, outcome.exit.code) == (False, "orders-unavailable")
        assert outcome.exit.reason == "The order system is down."
        assert summary.status == "failed" and summary.classification == "finished"
        assert summary.exit == outcome.exit
        assert calls == 1
        assert len(server.requests) == 1

    async def test_raise_beside_another_call_is_refused(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """archmax_raise must be the only call of its message; otherwise nothing is raised."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "triage", "last_tool_result": "/only tool call/"},
                    "reply": {"content": "ok"},
                },
                {
                    "when": {"state": "triage"},
                    "reply": {
                        "tool_calls": [
                            tool("archmax_get_variables"),
                            tool("archmax_raise", code="x", reason="y"),
                        ]
                    },
                },
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send("raise-2", "hi")
        assert outcome.kind == "completed"


class TestVariables:
    async def test_host_seeds_are_locked_and_the_agent_cannot_overwrite_them(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """Start variables and `trigger` are locked; a write naming one is refused whole."""
        server = scripted(
            playbook(
                {
                    "when": {
                        "state": "triage",
                        "last_tool": "archmax_set_variables",
                        "last_tool_result": "/refused/",
                    },
                    "reply": {
                        "tool_calls": [
                            tool("archmax_set_variables", variables={"note": "agent wrote this"})
                        ]
                    },
                },
                {
                    "when": {"state": "triage", "last_tool": "archmax_set_variables"},
                    "reply": {"content": "recorded"},
                },
                {
                    "when": {"state": "triage"},
                    "reply": {
                        "tool_calls": [
                            tool(
                                "archmax_set_variables", variables={"company": "Evil", "note": "x"}
                            )
                        ]
                    },
                },
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send("vars-1", "hi", variables={"company": "Acme"})
        variables = outcome.variables
        assert variables["company"].value == "Acme" and variables["company"].locked
        assert variables["trigger"].value == "manual" and variables["trigger"].locked
        assert variables["note"].value == "agent wrote this"
        assert variables["note"].locked is False

    async def test_get_variables_reads_a_path(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """archmax_get_variables with a dotted path and a negative index returns that value."""
        server = scripted(
            playbook(
                {
                    "when": {
                        "state": "triage",
                        "last_tool": "archmax_get_variables",
                        "last_tool_result": "/(?P<sku>SKU-\\d+)/",
                    },
                    "reply": {"content": "last item is {sku}"},
                },
                {
                    "when": {"state": "triage"},
                    "reply": {
                        "tool_calls": [
                            tool("archmax_get_variables", name="cart", path="items.-1.sku")
                        ]
                    },
                },
            )
        )
        cart = {"items": [{"sku": "SKU-1"}, {"sku": "SKU-2"}]}
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send("vars-2", "hi", variables={"cart": cart})
        assert outcome.reply == "last item is SKU-2"

    async def test_an_invalid_seed_name_is_refused_before_the_session_exists(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """A variable named like no variable can be never reaches the workflow."""
        server = scripted(playbook({"when": {}, "reply": {"content": "x"}}))
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            with pytest.raises(InvalidVariableNameError):
                await agent.workflow.send("vars-3", "hi", variables={"Bad-Name": 1})
        assert server.requests == []


class TestTriggersAndIds:
    async def test_unknown_trigger_fails_before_any_model_call_listing_declared_ones(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """An undeclared trigger id: UnknownTriggerError naming the declared triggers."""
        server = scripted(playbook({"when": {}, "reply": {"content": "x"}}))
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            with pytest.raises(UnknownTriggerError, match="manual, web_chat"):
                await agent.workflow.send("trig-1", "hi", trigger="email")
        assert server.requests == []

    async def test_trigger_session_path_names_the_session(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """`session: chat.id` reads the id from the firing's variables."""
        server = scripted(playbook({"when": {}, "reply": {"content": "hello"}}))
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send(
                None, "hi", trigger="web_chat", variables={"chat": {"id": "chat-42"}}
            )
            resolved = await agent.workflow.resolve_session(
                trigger="web_chat", variables={"chat": {"id": "chat-42"}}
            )
        assert outcome.session_id == "chat-42"
        assert [s.reason for s in outcome.trail] == ["web_chat"]
        assert (resolved.session_id, resolved.disposition) == ("chat-42", "turn")

    async def test_an_unusable_session_id_is_refused(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """A session id that cannot name a folder is refused before anything starts."""
        server = scripted(playbook({"when": {}, "reply": {"content": "x"}}))
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            with pytest.raises(InvalidSessionIdError):
                await agent.workflow.send("bad\x07id", "hi")

    async def test_a_follow_up_continues_in_the_state_the_last_turn_ended_in(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """A finished session's next message is its next turn on the same id and position."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "triage", "last_user": "/first/"},
                    "reply": {"tool_calls": [tool("archmax_advance", to="lookup")]},
                },
                {
                    "when": {"state": "lookup", "last_user": "/first/"},
                    "reply": {"content": "found it"},
                },
                {
                    "when": {"state": "lookup", "last_user": "/second/"},
                    "reply": {"content": "still in lookup"},
                },
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            first = await agent.workflow.send("follow-1", "first")
            second = await agent.workflow.send("follow-1", "second")
        assert first.state == "lookup" and second.state == "lookup"
        assert second.reply == "still in lookup"
        assert [s.kind for s in second.trail] == ["trigger"]
        assert second.trail_offset == 2  # after the first turn's trigger and advance


class TestBudgetsAndModelErrors:
    async def test_max_turns_exhausted_without_on_error_rejects(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """budget.maxTurns bounds model calls per visit; with no on_error the turn is rejected."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "triage"},
                    "reply": {"tool_calls": [tool("archmax_get_variables")]},
                }
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send("budget-1", "loop")
        assert outcome.kind == "rejected"
        assert outcome.exit is None
        assert outcome.rejected is not None and "maxTurns (3)" in outcome.rejected
        assert len(server.requests) == 3

    async def test_a_model_call_over_budget_timeout_ms_routes_through_on_error(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """budget.timeoutMs races each model call; expiry is a turn failure routed by on_error
        with an [error] note and an on_error trail step."""
        write_workflow(
            tmp_path,
            "slow",
            """
states:
  think:
    triggers: { manual: }
    budget: { timeoutMs: 300 }
    on_error: apologise
    transitions:
      - { to: apologise, description: Nothing else works. }
  apologise:
    instructions: Apologise.
""",
        )
        server = scripted(
            playbook(
                {"when": {"state": "think"}, "delay_ms": 1500, "reply": {"content": "too late"}},
                {"when": {"state": "apologise"}, "reply": {"content": "Sorry for the wait."}},
            )
        )
        async with running_agent(client, task_queue, tmp_path, "slow", server) as agent:
            outcome = await agent.workflow.send("slow-1", "hi")
            view = await agent.sessions.view("slow-1")
        assert outcome.kind == "completed"
        assert outcome.state == "apologise"
        assert outcome.reply == "Sorry for the wait."
        assert [(s.kind, s.to) for s in outcome.trail] == [
            ("trigger", "think"),
            ("on_error", "apologise"),
        ]
        errors = [m for m in view.transcript if m.note == "error" and m.role == "tool"]
        assert len(
            errors
        ) == 1 and "[error] budget.timeoutMs (300 ms) exhausted in state 'think'" in (
            errors[0].content or ""
        )

    async def test_rate_limits_are_retried_by_temporal(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """A 429 with Retry-After is retried as a new activity attempt, then succeeds."""
        server = scripted(
            playbook(
                {
                    "when": {},
                    "times": 2,
                    "error": {"status": 429, "retry_after": 0.05, "message": "slow down"},
                },
                {"when": {}, "reply": {"content": "answered after retries"}},
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send("retry-1", "hi")
        assert outcome.reply == "answered after retries"
        assert len(server.requests) == 3

    async def test_a_400_is_not_retried_and_rejects_the_turn(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """A 4xx other than 408/409/429 is final: one attempt, the turn ends rejected."""
        server = scripted(
            playbook({"when": {}, "error": {"status": 400, "message": "bad request"}})
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            outcome = await agent.workflow.send("retry-2", "hi")
        assert outcome.kind == "rejected"
        assert outcome.rejected is not None and "400" in outcome.rejected
        assert len(server.requests) == 1

    async def test_no_api_key_reaches_the_history(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """The worker's key is sent to the endpoint but never written to the workflow history."""
        server = scripted(playbook({"when": {}, "reply": {"content": "hi"}}))
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            await agent.workflow.send("secret-1", "hi")
            history = await agent.handle("secret-1").fetch_history()
        assert server.requests[0].had_authorization
        assert "sk-test-not-a-secret" not in history.to_json()


class TestVisibility:
    async def test_search_attributes_follow_the_session(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """ArchmaxWorkflow, ArchmaxStatus and ArchmaxState are kept current."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "triage"},
                    "reply": {"tool_calls": [tool("archmax_advance", to="lookup")]},
                },
                {"when": {"state": "lookup"}, "reply": {"content": "done"}},
            )
        )
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            await agent.workflow.send("sa-1", "hi")
            described = await agent.handle("sa-1").describe()
        attributes = described.typed_search_attributes
        assert attributes.get(sa.WORKFLOW) == "orders"
        assert attributes.get(sa.STATUS) == "completed"
        assert attributes.get(sa.STATE) == "lookup"
        assert attributes.get(sa.RESUME_AT) is None

    async def test_delivery_to_a_session_that_never_parked_is_refused(
        self, client: Client, task_queue: str, scripted: Scripted, orders_root: Path
    ) -> None:
        """A completed session is not awaiting input."""
        server = scripted(playbook({"when": {}, "reply": {"content": "hi"}}))
        async with running_agent(client, task_queue, orders_root, "orders", server) as agent:
            await agent.workflow.send("vis-2", "hi")
            with pytest.raises(SessionNotAwaitingInputError):
                await agent.workflow.deliver("vis-2", trigger="email_reply")
