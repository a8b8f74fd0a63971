"""Scenarios more than one test module runs: the support-inbox example's park and delivery,
a workflow gated by a before hook, a review with two human states, and what a session's
existence looks like to Temporal. One copy each, so a change to a scenario is made once."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.client.host import Agent
from archmax_temporal.workflows.models import Outcome
from tests.support.agents import tool_call as call
from tests.support.paths import EXAMPLES

# --- support-inbox: a vague email parks in clarify; the customer's reply resumes it --------------

SUPPORT_INBOX = EXAMPLES / "support-inbox"
SUPPORT_INBOX_PLAYBOOK = SUPPORT_INBOX / "workflows" / "support-inbox" / "playbook.yaml"
VAGUE = "About the thing we discussed on the phone — can you sort it out?"
"""An email naming no order: the session asks and parks in ``clarify``."""
REPLY = "It's ORD-1001."
"""The customer's reply that names the order: the delivery answers and completes."""


async def park_in_clarify(agent: Agent, session_id: str, text: str = VAGUE) -> Outcome:
    """The vague email, as the ``email_received`` trigger sends it: the turn parks."""
    return await agent.workflow.send(
        session_id, text, trigger="email_received", variables={"conversation_id": session_id}
    )


async def deliver_reply(agent: Agent, session_id: str, reply: str = REPLY) -> Outcome:
    """The customer's reply, delivered to the parked session."""
    return await agent.workflow.deliver(
        session_id, trigger="email_reply", variables={"reply_body": reply}
    )


# --- gated: a before hook on ``review`` vetoes until ``approved`` is set -------------------------

GATED = """
title: Gated
states:
  intake:
    triggers: { manual: }
    instructions: Collect approval, then advance.
    transitions:
      - { to: review, description: Approval is recorded. }
  review:
    before: { script: hooks/gate.js }
    skills: { allow: [order-data] }
    instructions: Review and answer.
"""

GATE = """import { ok, veto } from "@archmax-ai/harness/sandbox";
/** Gate: review needs an approval. */
export default function gate({ variables, from, to }) {
  if (!variables.approved) return veto(`no approval yet (${from} -> ${to})`);
  return ok();
}
"""

ORDERS = "skills/order-data/assets/orders.json"
"""The order-data skill's asset, readable in ``review`` only."""


def write_gated(root: Path, orders: Iterable[object] = ()) -> Path:
    """The ``gated`` workflow under ``root``: its gate hook and the order-data skill holding
    ``orders``. Returns the workflow's folder."""
    directory = root / "workflows" / "gated"
    (directory / "hooks").mkdir(parents=True, exist_ok=True)
    (directory / "workflow.yaml").write_text(GATED, encoding="utf-8")
    (directory / "hooks" / "gate.js").write_text(GATE, encoding="utf-8")
    write_order_skill(root, orders)
    return directory


def write_order_skill(root: Path, orders: Iterable[object] = ()) -> Path:
    """The order-data skill under ``root``, its asset :data:`ORDERS` holding ``orders``.
    Returns the skill's folder."""
    skill = root / "skills" / "order-data"
    (skill / "assets").mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text("---\nname: order-data\ndescription: Orders.\n---\n")
    (root / ORDERS).write_text(json.dumps(list(orders)), encoding="utf-8")
    return skill


# --- review: a draft handed to one human state, then maybe a second ------------------------------

REVIEW = """
title: Review
states:
  draft:
    triggers: { manual: }
    instructions: Draft, then send it to review.
    transitions: [{ to: review, description: Ready for review. }]
  review:
    type: human
    instructions: Approve, or send it to the second reviewer.
    transitions:
      - { to: done, type: approve, description: Approved. }
      - { to: second-review, description: A second look is needed. }
  second-review:
    type: human
    instructions: Approve or send back.
    transitions:
      - { to: done, type: approve, description: Approved. }
  done:
    instructions: Close.
"""

REVIEW_PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"handoff": True, "last_user": "/ready/"},
                "reply": {"content": "It is waiting for you."},
            },
            {"when": {"handoff": True}, "reply": {"content": "Please review the draft."}},
            {"reply": {"tool_calls": [call("archmax_advance", to="review")]}},
        ]
    }
)


# --- the environment a command reads its model from ----------------------------------------------

MODEL_VARIABLES = (
    "ARCHMAX_API_BASE_URL",
    "ARCHMAX_API_KEY",
    "ARCHMAX_MODEL",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "ARCHMAX_WORKER",
)


# --- Temporal's view -----------------------------------------------------------------------------


async def session_exists(client: Client, session_id: str) -> bool:
    """Whether any workflow (so any session) with this id was ever started."""
    try:
        await client.get_workflow_handle(session_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True
