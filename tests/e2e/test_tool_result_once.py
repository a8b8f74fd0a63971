"""Each tool result enters the history once: the tool's activity keeps a long result in the
store under its digest, and the next model call names it instead of carrying it again; the
model activity (on any worker) reads it back before the call, so the model, the log and the
host see exactly what they saw before."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.model import ModelActivities
from archmax_temporal.activities.object_store import open_store
from archmax_temporal.activities.session_store import SessionStore, delete_file
from archmax_temporal.activities.transcript_log import (
    KEEP_RESULT_BYTES,
    PROMPTS_DIR,
    RESULTS_DIR,
    TranscriptLogs,
)
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.client.host import Agent
from archmax_temporal.client.repair import session_runs
from archmax_temporal.worker import DATA_CONVERTER, build_worker
from archmax_temporal.workflows import turn as turn_module
from archmax_temporal.workflows.contracts import MODEL_ACTIVITY
from archmax_temporal.workflows.contracts.workspace import WorkspaceToolInput
from archmax_temporal.workflows.known_texts import KNOWN_TEXTS, KNOWN_TEXTS_SIZE, Kept
from archmax_temporal.workflows.models import (
    Message,
    ModelCallInput,
    ToolCall,
    ToolSchema,
    TranscriptLog,
)
from archmax_temporal.workflows.patches import BEFORE_GENERATION, GENERATION_PATCH
from archmax_temporal.workflows.transcript import (
    LOG_DIVERGED,
    PROMPT_MISSING,
    RESULT_MISSING,
    SHORT_NAME,
    UNHELD_PROMPT,
    digest_of,
    schemas_text,
)
from archmax_temporal.workflows.turn import UNHELD_PROMPT_PATCH
from tests.support.activity_events import failed_activities, patch_ids
from tests.support.agents import Scripted, model_config, running_agent, tool_call, write_workflow

READER = """
title: Reader
states:
  read:
    triggers: { manual: {} }
    instructions: Read the files you are asked to, then say done.
    tools:
      allow: [read_file, wipe_results, wipe_prompts]
"""


def _marked(marker: str) -> str:
    """A file of ~2 KB holding ``marker`` once."""
    filler = "\n".join(f"line {n:02d}: lorem ipsum dolor sit amet consectetur" for n in range(40))
    return f"{marker}\n{filler}\n"


def _path(n: int) -> str:
    """The n-th file a chain reads (its name never holds the marker its text holds)."""
    return f"scratchpad/step-{n}.txt"


def _chain(markers: list[str], said: str | None = None) -> str:
    """A playbook reading :func:`_path` ``(n)`` for each marker, one step each: the first on
    the user's message (saying ``said`` with it), each next one on the previous file's
    marker."""
    rules: list[dict[str, Any]] = []
    previous: str | None = None
    for n, marker in enumerate(markers):
        when = {"last_user": "/^read/"}
        reply: dict[str, Any] = {"tool_calls": [tool_call("read_file", file_path=_path(n))]}
        if previous is not None:
            when = {"last_tool_result": f"/{previous}/"}
        elif said is not None:
            reply["content"] = said
        rules.append({"when": when, "reply": reply})
        previous = marker
    rules.append({"when": {"last_tool_result": f"/{previous}/"}, "reply": {"content": "done"}})
    return json.dumps({"rules": rules[::-1], "default": {"content": "unexpected"}})


class Wipe(BaseModel):
    """``wipe_results`` takes no arguments."""


def _occurrences(history: WorkflowHistory, text: str) -> int:
    """How often ``text`` occurs in the history's events, as the server stores them."""
    needle = text.encode("utf-8")
    return sum(event.SerializeToString().count(needle) for event in history.events)


def _model_inputs(history: WorkflowHistory) -> list[ModelCallInput]:
    inputs: list[ModelCallInput] = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attributes = event.activity_task_scheduled_event_attributes
        if attributes.activity_type.name == MODEL_ACTIVITY:
            (decoded,) = DATA_CONVERTER.payload_converter.from_payloads(
                list(attributes.input.payloads), [ModelCallInput]
            )
            inputs.append(decoded)
    return inputs


async def _read_chain(agent: Agent, sid: str, markers: list[str]) -> WorkflowHistory:
    """Seed one file per marker into ``sid``, have the session read them in one turn that
    ends ``done``, and return its history."""
    await agent.sessions.seed(sid, {_path(n): _marked(marker) for n, marker in enumerate(markers)})
    outcome = await agent.workflow.send(sid, "read the chain")
    assert (outcome.kind, outcome.reply) == ("completed", "done")
    return await agent.handle(sid).fetch_history()


def _kept_tools(root: Path, sid: str, digest: str | None) -> list[str]:
    """The names of the tool list the session's store keeps under ``digest`` (the first 128
    bits of the file's SHA-256)."""
    assert digest is not None
    text = FilesystemSessionStore(root / "sessions").read_text(sid, f"{PROMPTS_DIR}/{digest}")
    assert digest == digest_of(text)[:SHORT_NAME]
    return [schema["name"] for schema in json.loads(text)]


async def _one_read(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> tuple[str, WorkflowHistory, Any]:
    """A new session of the reader that reads one file and answers: its id, its history and
    the scripted model it ran against."""
    write_workflow(root, "reader", READER)
    markers = [f"MARK-{uuid.uuid4().hex}"]
    server = scripted(_chain(markers))
    sid = f"one-read-{uuid.uuid4().hex[:8]}"
    async with running_agent(client, task_queue, root, "reader", server) as agent:
        history = await _read_chain(agent, sid, markers)
    return sid, history, server


def _sent(server: Any) -> str:
    """Everything the model was sent, as one text."""
    return json.dumps([request.body for request in server.requests])


async def test_a_tool_result_is_in_the_real_history_once(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Three read_file steps on 2 KB files, each holding a unique marker: each marker occurs
    once in the history the dev server holds (the tool's result; it occurred twice when the
    next model call carried it too), the model was sent each result whole, and the session's
    conversation holds each whole. So does the text the model said with its first tool call
    (its call's result; the next call carried it too before the call logged its answer)."""
    write_workflow(tmp_path, "reader", READER)
    markers = [f"MARK-{uuid.uuid4().hex}" for _ in range(3)]
    said = f"SAID-{uuid.uuid4().hex}"
    server = scripted(_chain(markers, said))
    sid = f"once-{uuid.uuid4().hex[:8]}"
    async with running_agent(client, task_queue, tmp_path, "reader", server) as agent:
        history = await _read_chain(agent, sid, markers)
        view = await agent.sessions.view(sid)
    for marker in [*markers, said]:
        assert _occurrences(history, marker) == 1, marker
        assert marker in _sent(server)
    assert said in json.dumps([m.content for m in view.transcript])
    answers = [m.content or "" for m in view.transcript if m.role == "tool"]
    assert [markers[n] in answer for n, answer in enumerate(answers)] == [True] * 3
    named = [call for call in _model_inputs(history) if call.refs]
    assert len(named) == 3
    assert all(call.messages[i].content is None for call in named for i in call.refs)
    names = [name for call in named for name in call.refs.values()]  # 128 bits, kept so
    kept = FilesystemSessionStore(tmp_path / "sessions").walk(sid, RESULTS_DIR)
    assert sorted(names) == sorted(kept) and {len(name) for name in names} == {SHORT_NAME}


async def test_a_prompt_is_sent_once_and_named_by_its_digest_after(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """The run's first model call carries the system prompt, named by the first 128 bits of
    its SHA-256, and names the tool schemas by theirs alone (alike in every session: the
    worker knows them, and keeps them in the session's store); the later calls carry the names
    alone, and the model is sent the whole prompt and every schema on each."""
    write_workflow(tmp_path, "reader", READER)
    markers = [f"MARK-{uuid.uuid4().hex}" for _ in range(2)]
    server = scripted(_chain(markers))
    sid = f"named-{uuid.uuid4().hex[:8]}"
    async with running_agent(client, task_queue, tmp_path, "reader", server) as agent:
        history = await _read_chain(agent, sid, markers)
    first, *later = _model_inputs(history)
    assert first.system is not None and first.tools == []
    assert first.system_digest == digest_of(first.system)[:SHORT_NAME]
    names = _kept_tools(tmp_path, sid, first.tools_digest)
    assert "read_file" in names
    assert len(later) == 2
    for call in later:
        assert (call.system, call.tools) == (None, [])
        assert (call.system_digest, call.tools_digest) == (first.system_digest, first.tools_digest)
    assert not failed_activities(history.events)  # the worker knew the list: no fallback
    sent = [request.body for request in server.requests]
    assert len(sent) == 3
    for body in sent:
        assert body["messages"][0] == {"role": "system", "content": first.system}
        assert [t["function"]["name"] for t in body["tools"]] == names


async def test_a_worker_that_does_not_know_a_tool_list_has_the_call_sent_with_it(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first call of a session whose workflow task ran on another worker (the tool list
    is in that worker's memory, not this one's, nor in the session's store): it fails once
    as PromptMissing, the workflow sends it again with the schemas, the model gets them, and
    the worker knows the list from then on."""
    elsewhere: Kept[str, str] = Kept(KNOWN_TEXTS_SIZE)
    monkeypatch.setattr(turn_module, "KNOWN_TEXTS", elsewhere)  # the workflow's worker
    KNOWN_TEXTS.clear()  # this worker's model activity knows nothing
    sid, history, server = await _one_read(client, task_queue, scripted, tmp_path)
    failures = failed_activities(history.events)
    assert [f.application_failure_info.type for f in failures] == [PROMPT_MISSING]
    # what the Temporal UI shows: a worker new to the list, not a store to fix
    assert "tool list" in failures[0].message and "known to this worker" in failures[0].message
    assert "must share" not in failures[0].message
    named, again, *later = _model_inputs(history)
    assert named.tools == [] and named.tools_digest is not None
    assert again.tools and digest_of(schemas_text(again.tools))[:SHORT_NAME] == named.tools_digest
    assert again.messages == named.messages and again.log == named.log
    assert [call.tools for call in later] == [[]]  # named by digest again: the store keeps it
    names = [t.name for t in again.tools]
    assert _kept_tools(tmp_path, sid, named.tools_digest) == names
    assert KNOWN_TEXTS.get(named.tools_digest) == schemas_text(again.tools)
    sent = [request.body for request in server.requests]
    assert len(sent) == 2  # the failed call never reached the model
    assert all([t["function"]["name"] for t in body["tools"]] == names for body in sent)


async def test_a_worker_of_an_earlier_version_that_lacks_a_prompt_has_the_call_sent_with_it(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fleet being upgraded: a model activity of a version before PromptMissing, handed a
    call that names a tool list its store lacks, fails it as TranscriptLogDiverged (detail
    ``prompt``), as those versions did; the workflow sends the call again with the texts, as
    for a PromptMissing, and the turn completes."""
    real_tools = TranscriptLogs.tools
    refused: list[str] = []

    def earlier_version(
        self: TranscriptLogs, session_id: str, digest: str | None, tools: list[ToolSchema]
    ) -> list[ToolSchema]:
        if digest is not None and not tools and not refused:
            refused.append(digest)
            raise ApplicationError(
                f"prompt {digest[:12]}… of session {session_id!r} is not in the store",
                UNHELD_PROMPT,
                type=LOG_DIVERGED,
                non_retryable=True,
            )
        return real_tools(self, session_id, digest, tools)

    monkeypatch.setattr(TranscriptLogs, "tools", earlier_version)
    _, history, server = await _one_read(client, task_queue, scripted, tmp_path)
    failures = failed_activities(history.events)
    assert [f.application_failure_info.type for f in failures] == [LOG_DIVERGED]
    named, again, _ = _model_inputs(history)
    assert refused == [named.tools_digest]
    assert named.tools == [] and again.tools
    assert (again.system, again.system_digest) == (named.system, named.system_digest)
    assert len(server.requests) == 2
    # the path is patched: a run of this code takes it under the generation, no marker more
    assert UNHELD_PROMPT_PATCH in BEFORE_GENERATION
    assert patch_ids(history.events) == [GENERATION_PATCH]


async def test_a_new_run_names_the_prompts_an_earlier_run_sent(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """A turn of five calls continued as new every two: only the first run's first call
    carries the system prompt and the tool schemas; the later runs' first calls name them by
    digest (the store keeps them), and the model is sent the whole prompt on every call."""
    write_workflow(tmp_path, "reader", READER)
    markers = [f"MARK-{uuid.uuid4().hex}" for _ in range(4)]
    server = scripted(_chain(markers))
    sid = f"runs-{uuid.uuid4().hex[:8]}"
    async with running_agent(
        client, task_queue, tmp_path, "reader", server, model_calls_per_run=2
    ) as agent:
        await _read_chain(agent, sid, markers)
        runs = await session_runs(client, sid)
        calls = [
            call
            for run in runs
            for call in _model_inputs(
                await client.get_workflow_handle(sid, run_id=run).fetch_history()
            )
        ]
    assert len(runs) == 3 and len(calls) == 5
    first, *later = calls
    assert first.system is not None and first.tools == []
    for call in later:
        assert (call.system, call.tools) == (None, [])
        assert (call.system_digest, call.tools_digest) == (first.system_digest, first.tools_digest)
    names = _kept_tools(tmp_path, sid, first.tools_digest)
    for request in server.requests:
        assert request.body["messages"][0] == {"role": "system", "content": first.system}
        assert [t["function"]["name"] for t in request.body["tools"]] == names


async def test_a_model_call_failed_over_to_another_worker_reads_the_result_from_the_store(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Worker A runs the tool (keeping its result) and its model call fails (a 503 asking
    to retry in 3 s); A stops, and worker B, which never saw the result, runs the retry:
    it reads the result from the shared store and the model gets it whole."""
    write_workflow(tmp_path, "reader", READER)
    marker = f"MARK-{uuid.uuid4().hex}"
    book = json.loads(_chain([marker]))
    book["rules"].insert(
        0,
        {
            "when": {"last_tool_result": f"/{marker}/"},
            "times": 1,
            "error": {"status": 503, "retry_after": 3, "message": "busy"},
        },
    )
    server = scripted(json.dumps(book))
    sid = f"failover-{uuid.uuid4().hex[:8]}"
    async with running_agent(client, task_queue, tmp_path, "reader", server, worker=False) as agent:
        await agent.sessions.seed(sid, {_path(0): _marked(marker)})

        def worker() -> Any:
            return build_worker(
                client,
                task_queue=task_queue,
                model=model_config(server),
                store_dir=tmp_path / "sessions",
                max_cached_workflows=0,
                authoring_root=tmp_path,
            )

        async with worker():
            turn = asyncio.ensure_future(agent.workflow.send(sid, "read the chain"))
            for _ in range(600):  # worker A's model call after the tool was refused
                if len(server.requests) >= 2 or turn.done():
                    break
                await asyncio.sleep(0.05)
            assert len(server.requests) == 2
        async with worker():  # worker B: fresh caches, the same store
            outcome = await asyncio.wait_for(turn, 60)
        history = await agent.handle(sid).fetch_history()
    assert (outcome.kind, outcome.reply) == ("completed", "done")
    assert len(server.requests) == 3
    assert all(marker in json.dumps(server.requests[n].body) for n in (1, 2))
    assert _occurrences(history, marker) == 1
    assert [bool(call.refs) for call in _model_inputs(history)] == [False, True]


async def test_a_result_the_store_lost_is_sent_again_with_its_text(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host tool deletes the kept results between the tool and the next model call (on a
    worker that keeps none in memory, as another worker would): the call fails for good as
    ToolResultMissing and the workflow sends it again with the text; the turn completes."""
    monkeypatch.setattr(TranscriptLogs, "_keep_result", lambda *args: None)
    write_workflow(tmp_path, "reader", READER)
    marker = f"MARK-{uuid.uuid4().hex}"
    read = tool_call("read_file", file_path=_path(0))
    book = {
        "rules": [
            {"when": {"last_tool": "wipe_results"}, "reply": {"content": "done"}},
            {
                "when": {"last_user": "/^read/"},
                "reply": {"tool_calls": [read, tool_call("wipe_results")]},
            },
        ],
        "default": {"content": "unexpected"},
    }
    server = scripted(json.dumps(book))
    store = FilesystemSessionStore(tmp_path / "sessions")
    sid = f"lost-{uuid.uuid4().hex[:8]}"

    def wipe_results(request: Wipe) -> str:
        """Delete the session's kept tool results."""
        for name in store.walk(sid, RESULTS_DIR):
            delete_file(store, sid, f"{RESULTS_DIR}/{name}")
        return "wiped"

    async with running_agent(
        client, task_queue, tmp_path, "reader", server, tools=[wipe_results]
    ) as agent:
        await agent.sessions.seed(sid, {_path(0): _marked(marker)})
        outcome = await agent.workflow.send(sid, "read the chain")
        history = await agent.handle(sid).fetch_history()
    assert (outcome.kind, outcome.reply) == ("completed", "done")
    failures = failed_activities(history.events)
    assert [f.application_failure_info.type for f in failures] == [RESULT_MISSING]
    calls = _model_inputs(history)
    assert [bool(call.refs) for call in calls] == [False, True, False]
    assert any(marker in (m.content or "") for m in calls[2].messages)
    assert marker in json.dumps(server.requests[-1].body)


async def test_a_prompt_the_store_lost_is_sent_again_with_its_text(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host tool deletes the kept prompts between the run's first model call and its
    second (on a worker that keeps none in memory, as another worker would): the second call
    fails for good as PromptMissing and the workflow sends it again with the system prompt
    and the tool schemas; the model is sent the whole prompt each time, and the turn
    completes."""
    monkeypatch.setattr(TranscriptLogs, "_keep_prompt", lambda *args: None)
    write_workflow(tmp_path, "reader", READER)
    book = {
        "rules": [
            {"when": {"last_tool": "wipe_prompts"}, "reply": {"content": "done"}},
            {
                "when": {"last_user": "/^read/"},
                "reply": {"tool_calls": [tool_call("wipe_prompts")]},
            },
        ],
        "default": {"content": "unexpected"},
    }
    server = scripted(json.dumps(book))
    store = FilesystemSessionStore(tmp_path / "sessions")
    sid = f"lost-prompt-{uuid.uuid4().hex[:8]}"
    wiped: list[str] = []

    def wipe_prompts(request: Wipe) -> str:
        """Delete the session's kept prompts."""
        for name in store.walk(sid, PROMPTS_DIR):
            delete_file(store, sid, f"{PROMPTS_DIR}/{name}")
            wiped.append(name)
        return "wiped"

    async with running_agent(
        client, task_queue, tmp_path, "reader", server, tools=[wipe_prompts]
    ) as agent:
        outcome = await agent.workflow.send(sid, "read the chain")
        history = await agent.handle(sid).fetch_history()
    assert (outcome.kind, outcome.reply) == ("completed", "done")
    failures = failed_activities(history.events)
    assert [f.application_failure_info.type for f in failures] == [PROMPT_MISSING]
    first, named, again = _model_inputs(history)
    assert first.system is not None and first.tools == []
    assert sorted(wiped) == sorted(d for d in (first.system_digest, first.tools_digest) if d)
    assert (named.system, named.tools) == (None, [])
    assert again.system == first.system
    assert again.tools and digest_of(schemas_text(again.tools))[:SHORT_NAME] == first.tools_digest
    assert (again.system_digest, again.tools_digest) == (first.system_digest, first.tools_digest)
    assert again.messages == named.messages and again.log == named.log
    sent = [request.body for request in server.requests]
    assert len(sent) == 2  # the failed call never reached the model
    for body in sent:
        assert body["messages"][0] == {"role": "system", "content": first.system}
        assert [t["function"]["name"] for t in body["tools"]] == [t.name for t in again.tools]
    assert sorted(store.walk(sid, PROMPTS_DIR)) == sorted(wiped)  # kept again


# --- the store's side, on the folder and the S3 backends ---------------------------------


@pytest.fixture(params=["folder", "s3"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> SessionStore:
    """The folder store, and an S3 bucket's (moto over HTTP)."""
    if request.param == "s3":
        return open_store(request.getfixturevalue("s3_url"))
    return FilesystemSessionStore(tmp_path / "sessions")


async def test_a_tool_activity_keeps_a_long_result_for_any_worker(
    store: SessionStore, tmp_path: Path, scripted: Scripted
) -> None:
    """The read_file activity keeps a long result (put once, under its digest), a short
    one not; a model activity with its own (empty) caches, as on another worker, reads the
    kept one back and sends it whole, and a retry of that call sends the same."""
    sid = f"s-{uuid.uuid4().hex[:8]}"
    marker = f"MARK-{uuid.uuid4().hex}"
    store.write_text(sid, "scratchpad/long.txt", _marked(marker))
    store.write_text(sid, "scratchpad/short.txt", "tiny\n")
    tools = WorkspaceActivities(store, tmp_path, TranscriptLogs(store))
    env = ActivityEnvironment()

    async def read(path: str) -> Any:
        call = WorkspaceToolInput(session_id=sid, tool="read_file", arguments={"file_path": path})
        return await env.run(tools.read_file, call)

    long, short = await read("scratchpad/long.txt"), await read("scratchpad/short.txt")
    assert long.kept and not short.kept
    assert len(long.content.encode()) >= KEEP_RESULT_BYTES
    digest = digest_of(long.content)
    name = digest[:SHORT_NAME]
    assert store.walk(sid, RESULTS_DIR) == [name]
    assert store.read_bytes(sid, f"{RESULTS_DIR}/{name}") == long.content.encode()
    assert (await read("scratchpad/long.txt")).kept  # again: nothing new written
    assert store.walk(sid, RESULTS_DIR) == [name]

    server = scripted(json.dumps({"rules": [], "default": {"content": "ok"}}))
    other = ModelActivities(model_config(server), logs=TranscriptLogs(store))
    asked = ToolCall(id="c1", name="read_file", arguments="{}")
    call = ModelCallInput(
        session_id=sid,
        state="read",
        messages=[
            Message(role="user", content="read"),
            Message(role="assistant", tool_calls=[asked]),
            Message(role="tool", tool_call_id="c1", name="read_file", status="ok"),
        ],
        log=TranscriptLog(),
        system="be brief",
        system_digest=digest_of("be brief"),
        refs={2: digest},  # in full, as a run begun before the generation names it
    )
    first = await env.run(other.complete, call)
    retried = ModelActivities(model_config(server), logs=TranscriptLogs(store))
    again = await env.run(retried.complete, call)
    assert (first.logged, first.log_hash) == (again.logged, again.log_hash) == (3, first.log_hash)
    sent = [json.dumps(r.body) for r in server.requests]
    assert len(sent) == 2 and sent[0] == sent[1] and marker in sent[0]
    held = TranscriptLogs(store).read(sid, TranscriptLog(base=3, base_hash=first.log_hash or ""))
    assert held[2].content == long.content


def test_a_result_the_store_lost_or_damaged_is_a_final_error(store: SessionStore) -> None:
    """A digest the store does not hold, or whose bytes hash otherwise, is the final
    ToolResultMissing (the workflow then sends the text)."""
    sid = f"s-{uuid.uuid4().hex[:8]}"
    text = "x" * KEEP_RESULT_BYTES
    assert TranscriptLogs(store).keep_result(sid, text)
    assert not TranscriptLogs(store).keep_result(sid, "short")
    digest = digest_of(text)
    assert TranscriptLogs(store).result(sid, digest) == text
    with pytest.raises(ApplicationError) as missing:
        TranscriptLogs(store).result(sid, digest_of("never kept"))
    store.write_bytes(sid, f"{RESULTS_DIR}/{digest[:SHORT_NAME]}", b"y" * KEEP_RESULT_BYTES)
    with pytest.raises(ApplicationError) as damaged:
        TranscriptLogs(store).result(sid, digest)
    with pytest.raises(ApplicationError) as damaged_short:
        TranscriptLogs(store).result(sid, digest[:SHORT_NAME])
    for error in (missing.value, damaged.value, damaged_short.value):
        assert (error.type, error.non_retryable) == (RESULT_MISSING, True)


def test_a_result_is_found_by_either_name_and_where_earlier_versions_kept_it(
    store: SessionStore,
) -> None:
    """A result is kept under the first 128 bits of its SHA-256 and read by those or by its
    whole digest (a run begun before the generation names it so). One an earlier version kept
    under its whole digest is read by that name; a short name does not find it (a fleet being
    upgraded): the final ToolResultMissing, and the call is sent again with the text."""
    sid = f"s-{uuid.uuid4().hex[:8]}"
    text, earlier = "x" * KEEP_RESULT_BYTES, "e" * KEEP_RESULT_BYTES
    assert TranscriptLogs(store).keep_result(sid, text)
    digest = digest_of(text)
    assert store.walk(sid, RESULTS_DIR) == [digest[:SHORT_NAME]]
    for name in (digest, digest[:SHORT_NAME]):
        assert TranscriptLogs(store).result(sid, name) == text  # a fresh worker: from the store
    store.write_bytes(sid, f"{RESULTS_DIR}/{digest_of(earlier)}", earlier.encode())
    assert TranscriptLogs(store).result(sid, digest_of(earlier)) == earlier
    with pytest.raises(ApplicationError) as short:
        TranscriptLogs(store).result(sid, digest_of(earlier)[:SHORT_NAME])
    assert short.value.type == RESULT_MISSING


def test_a_prompt_the_store_lost_or_damaged_is_a_final_error(store: SessionStore) -> None:
    """The same for a prompt or tool list named by digest: kept by one worker, read back by
    another; one the store does not hold, or whose bytes hash otherwise, is the final
    PromptMissing (the workflow then sends the texts)."""
    sid = f"s-{uuid.uuid4().hex[:8]}"
    text = "You answer customers about their orders."
    digest = digest_of(text)
    assert TranscriptLogs(store).prompt(sid, digest, text) == text
    assert TranscriptLogs(store).prompt(sid, digest, None) == text
    with pytest.raises(ApplicationError) as missing:
        TranscriptLogs(store).prompt(sid, digest_of("never kept"), None)
    store.write_bytes(sid, f"{PROMPTS_DIR}/{digest}", text.encode()[:12])
    with pytest.raises(ApplicationError) as damaged:
        TranscriptLogs(store).prompt(sid, digest, None)
    for error in (missing.value, damaged.value):
        assert (error.type, error.non_retryable) == (PROMPT_MISSING, True)


def test_a_tool_list_the_process_knows_is_kept_in_the_session_store(store: SessionStore) -> None:
    """A tool list named by digest that the session's store lacks but the worker process knows
    (its workflow code rendered it, or another session's call carried it) is served from
    memory and kept in the session's store for any other worker; a system prompt (one
    session's) is never looked up there."""
    sid = f"s-{uuid.uuid4().hex[:8]}"
    text = json.dumps(
        [{"name": f"tool_{uuid.uuid4().hex[:6]}", "description": "", "parameters": {}}]
    )
    digest = digest_of(text)
    KNOWN_TEXTS.put(digest, text)
    assert TranscriptLogs(store).prompt(sid, digest, None, shared=True) == text
    assert store.read_text(sid, f"{PROMPTS_DIR}/{digest}") == text
    other = f"s-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ApplicationError) as missing:
        TranscriptLogs(store).prompt(other, digest, None)  # not shared: the store only
    assert missing.value.type == PROMPT_MISSING
    carried = json.dumps([{"name": "carried", "description": "", "parameters": {}}])
    TranscriptLogs(store).prompt(other, digest_of(carried), carried, shared=True)
    assert KNOWN_TEXTS.get(digest_of(carried)) == carried  # a carried list is known after


async def test_repair_rebuilds_a_log_whose_calls_name_results(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """With the log and the kept results gone from the store, repair rebuilds the log from
    the history: the named results' text comes from the tool activities' results there."""
    write_workflow(tmp_path, "reader", READER)
    markers = [f"MARK-{uuid.uuid4().hex}" for _ in range(2)]
    server = scripted(_chain(markers))
    sid = f"repair-{uuid.uuid4().hex[:8]}"
    async with running_agent(client, task_queue, tmp_path, "reader", server) as agent:
        await agent.sessions.seed(
            sid, {_path(n): _marked(marker) for n, marker in enumerate(markers)}
        )
        assert (await agent.workflow.send(sid, "read the chain")).kind == "completed"
        before = (await agent.sessions.view(sid)).transcript
        checkpoints = tmp_path / "sessions" / sid / "checkpoints"
        for folder in ("transcript", "results"):
            for path in (checkpoints / folder).iterdir():
                path.unlink()
        report = await agent.sessions.repair(sid)
        after = (await agent.sessions.view(sid)).transcript
    assert report.log == "missing" and report.messages == len(before)  # the answer too
    assert [m.model_dump_json() for m in after] == [m.model_dump_json() for m in before]
    assert all(marker in json.dumps([m.content for m in after]) for marker in markers)
