"""Bare-Temporal floors for bench.history: no archmax, no agent framework.

* :class:`BareSteps` runs K activities in sequence, each returning the same ~2 KB text an
  agent's tool step returns, then returns: one activity per step.
* :class:`BareModelToolSteps` runs, per step, a model activity (its stand-in answers the tool
  call: the tool's name and arguments) and a tool activity returning the ~2 KB text, then one
  more model activity answering ``done``: K + 1 model activities and K tool activities, the
  activity pattern of every contender's K-step turn (the floor the others are held to).
* :class:`BareWaiting` waits on a signal: the smallest parked workflow, for the memory
  and listing figures.
* :class:`BareAgentWaiting` asks the model once (:class:`BareAgentModel`: the ``openai``
  client archmax's model activity uses, streamed, against the same scripted model), keeps the
  conversation and waits on a signal: a parked session's activity pattern (one model call,
  then the wait), the floor its parking rate, CPU and memory are held to.
* :class:`BareLoad` (bench.load) waits until an update releases it; the update runs one
  activity, the model call's stand-in, and returns its result.

Every bare worker runs its workflows unsandboxed (:func:`bare_runner`), as archmax's worker
runs its own: each side's floor is Temporal without the sandbox's cost per activation.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.worker import UnsandboxedWorkflowRunner

BARE_STEP_ACTIVITY = "bench.history.step"
BARE_MODEL_ACTIVITY = "bench.history.model"
BARE_AGENT_MODEL_ACTIVITY = "bench.history.agent_model"
PARK_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "## Current state: `wait`"},
    {"role": "user", "content": "park"},
]
"""What the bare agent sends (bench.history's playbook answers it with ``archmax_wait``, as
it answers a parked session's first call)."""
STEP_TIMEOUT = timedelta(seconds=60)


def bare_runner() -> UnsandboxedWorkflowRunner:
    """The runner of every bare worker: unsandboxed, as archmax's worker runs its sessions
    (:func:`archmax_temporal.worker.workflow_runner`)."""
    return UnsandboxedWorkflowRunner()


def numbered(text: str) -> str:
    """``text`` as ``cat -n`` shows it: archmax's ``read_file`` result, for every contender."""
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(text.splitlines(), 1))


def chain_file(index: int, total: int, prefix: str) -> str:
    """The ``index``-th file (1-based) of a chain of ``total``: ~2 KB of text whose last
    line names the next file (``NEXT <name>``), or ``CHAIN END`` on the last one."""
    filler = [
        f"{prefix} step {index:04d} line {line:02d}: "
        + "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod"
        for line in range(1, 21)
    ]
    last = f"NEXT {chain_name(index + 1, prefix)}" if index < total else "CHAIN END"
    return "\n".join([*filler, last]) + "\n"


def chain_name(index: int, prefix: str) -> str:
    return f"{prefix}-{index:04d}.txt"


@activity.defn(name=BARE_STEP_ACTIVITY)
async def bare_step(index: int, total: int, prefix: str) -> str:
    """One step of :class:`BareSteps`: the step's ~2 KB text, as the tool would return it."""
    return numbered(chain_file(index, total, prefix))


@workflow.defn(name="BenchHistoryBareSteps")
class BareSteps:
    """K activities in sequence, each returning ~2 KB; returns how many ran."""

    @workflow.run
    async def run(self, steps: int) -> int:
        for index in range(1, steps + 1):
            await workflow.execute_activity(
                bare_step,
                args=[index, steps, "bare"],
                start_to_close_timeout=STEP_TIMEOUT,
            )
        return steps


@activity.defn(name=BARE_MODEL_ACTIVITY)
async def bare_model(index: int, total: int, prefix: str) -> str:
    """A model step's stand-in: the next tool call (name and arguments, as JSON), or ``done``
    after the last file. It is given only the step's index: the floor sends nothing back."""
    if index > total:
        return "done"
    return json.dumps(
        {"name": "read_file", "arguments": {"file_path": f"scratchpad/{chain_name(index, prefix)}"}}
    )


@workflow.defn(name="BenchHistoryBareModelToolSteps")
class BareModelToolSteps:
    """Per step a model activity and a tool activity (~2 KB), then a last model activity:
    the activity pattern of an agent's K-step turn; returns how many steps ran."""

    @workflow.run
    async def run(self, steps: int) -> int:
        for index in range(1, steps + 2):
            answer = await workflow.execute_activity(
                bare_model, args=[index, steps, "pair"], start_to_close_timeout=STEP_TIMEOUT
            )
            if answer == "done":
                break
            await workflow.execute_activity(
                bare_step, args=[index, steps, "pair"], start_to_close_timeout=STEP_TIMEOUT
            )
        return steps


@workflow.defn(name="BenchHistoryBareWaiting")
class BareWaiting:
    """Parked on a signal until ``release``; ``ready`` (an update) answers once its first
    workflow task ran, so the caller knows it is parked."""

    def __init__(self) -> None:
        self._released = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self._released)

    @workflow.signal
    def release(self) -> None:
        self._released = True

    @workflow.update
    def ready(self) -> bool:
        return True


async def stream_answer(client: Any, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A bare agent's model call: one streamed chat completion of ``messages`` through the
    ``openai`` client ``client`` (the conversation sent in ``extra_body``, plain JSON, as
    archmax sends it); the answer as the assistant message (its text and tool calls)."""
    stream = await client.chat.completions.create(
        model=model,
        messages=[],
        extra_body={"messages": messages},
        stream=True,
        stream_options={"include_usage": True},
    )
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    async for chunk in stream:
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is None:
            continue
        if delta.content:
            text.append(delta.content)
        for call in delta.tool_calls or ():
            held = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            held["id"] += call.id or ""
            if call.function is not None:
                held["name"] += call.function.name or ""
                held["arguments"] += call.function.arguments or ""
    answer: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if calls:
        answer["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(calls.items())
        ]
    return answer


class BareAgentModel:
    """The bare agent's model call: one streamed chat completion of the conversation through
    the ``openai`` client (no retries), to the scripted model at ``url``; the answer as the
    assistant message (its text and tool calls). The client is made on first use, in the
    worker's event loop."""

    def __init__(self, url: str, api_key: str, model: str) -> None:
        self._url, self._api_key, self._model = url, api_key, model
        self._client: Any = None

    @activity.defn(name=BARE_AGENT_MODEL_ACTIVITY)
    async def call(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                base_url=self._url, api_key=self._api_key, max_retries=0
            )
        return await stream_answer(self._client, self._model, messages)


@workflow.defn(name="BenchHistoryBareAgentWaiting")
class BareAgentWaiting:
    """A bare agent parked after one model call: it asks the model (:class:`BareAgentModel`),
    keeps the conversation and waits on a signal until ``release``; ``ready`` (an update)
    answers once it waits."""

    def __init__(self) -> None:
        self._messages = [dict(m) for m in PARK_CONVERSATION]
        self._parked = False
        self._released = False

    @workflow.run
    async def run(self) -> int:
        answer: dict[str, Any] = await workflow.execute_activity(
            BARE_AGENT_MODEL_ACTIVITY, self._messages, start_to_close_timeout=STEP_TIMEOUT
        )
        self._messages.append(answer)
        self._parked = True
        await workflow.wait_condition(lambda: self._released)
        return len(self._messages)

    @workflow.signal
    def release(self) -> None:
        self._released = True

    @workflow.update
    async def ready(self) -> bool:
        await workflow.wait_condition(lambda: self._parked)
        return True


@activity.defn(name="BenchLoadStep")
async def bare_load_step() -> str:
    return "released"


@workflow.defn(name="BenchLoadBare")
class BareLoad:
    """bench.load's floor: parked until ``release``, an update that runs one activity and
    returns its result."""

    def __init__(self) -> None:
        self._released = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self._released and workflow.all_handlers_finished())

    @workflow.update
    def ready(self) -> bool:
        return True

    @workflow.update
    async def release(self) -> str:
        self._released = True
        return await workflow.execute_activity(
            bare_load_step, start_to_close_timeout=timedelta(seconds=30)
        )
