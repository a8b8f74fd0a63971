"""A session's variables cannot break it: what it carries stays bounded whatever it
accumulates, large values live in the store by reference, and the limits refuse growth with a
typed error before Temporal's 2 MB would (each test reproduces a failure seen on an earlier
main, where every outcome and every remembered firing carried the whole variable map)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.store_errors import StoreIOError
from archmax_temporal.activities.stored_variables import resolve_variables, write_stored_texts
from archmax_temporal.workflows import projections, prompt, runtime_calls, variables
from archmax_temporal.workflows.errors import PayloadTooLargeError
from archmax_temporal.workflows.firing import Admission, check_delivery, check_send
from archmax_temporal.workflows.limits import (
    INLINE_VARIABLE_BYTES,
    SESSION_VARIABLES_CEILING,
    Limits,
)
from archmax_temporal.workflows.models import (
    DeliverInput,
    SendInput,
    SessionInput,
    SessionState,
    Variable,
)
from archmax_temporal.workflows.spec import WorkflowSpec
from bench.variables import firing_variables, largest_event
from tests.support.agents import Scripted, running_agent, tool_call, write_workflow

DESK = """
title: Desk
states:
  intake:
    triggers: { manual: {} }
    instructions: Answer.
"""

SPEC = WorkflowSpec.model_validate(
    {"title": "Desk", "states": {"intake": {"triggers": {"manual": {}}, "instructions": "Hi."}}}
)


def _sid() -> str:
    return f"vars-{uuid.uuid4().hex[:10]}"


def _admission(held: dict[str, Variable], limits: Limits, status: str = "completed") -> Admission:
    return Admission(
        session_id="s",
        workflow="desk",
        spec=SPEC,
        status=status,  # type: ignore[arg-type]
        state="intake",
        variables=held,
        pending_decision=None,
        busy=False,
        waiting=None,
        limits=limits,
    )


def _many(count: int, start: int = 0) -> dict[str, Any]:
    return {f"v{i:05d}": i for i in range(start, start + count)}


@pytest.fixture
def desk_root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "desk", DESK)
    return tmp_path


class TestLimits:
    def test_the_limits_come_from_the_environment_with_ceilings(self) -> None:
        """``ARCHMAX_MAX_VARIABLES`` and ``ARCHMAX_MAX_SESSION_VARIABLE_BYTES`` set the
        limits; the byte limit cannot pass its ceiling (Temporal's 2 MB)."""
        assert Limits().variables == 1000
        limits = Limits.from_env(
            {"ARCHMAX_MAX_VARIABLES": "20000", "ARCHMAX_MAX_SESSION_VARIABLE_BYTES": "600000"}
        )
        assert (limits.variables, limits.session_variable_bytes) == (20_000, 600_000)
        with pytest.raises(ValueError, match="ARCHMAX_MAX_SESSION_VARIABLE_BYTES"):
            Limits.from_env({"ARCHMAX_MAX_SESSION_VARIABLE_BYTES": str(2 * 1024 * 1024)})
        with pytest.raises(ValueError, match="ARCHMAX_MAX_VARIABLES"):
            Limits.from_env({"ARCHMAX_MAX_VARIABLES": "many"})

    def test_a_firing_past_the_count_is_refused_naming_the_limit(self) -> None:
        """The validators' check: the session's variables and the firing's new ones count
        together; a refusal is a typed ``PayloadTooLargeError`` naming the variable."""
        held = {n: Variable(value=v, locked=True) for n, v in _many(990).items()}
        view = _admission(held, Limits())
        with pytest.raises(ApplicationError) as refused:
            check_send(view, SendInput(message="hi", variables=_many(20, start=990)))
        assert refused.value.type == "PayloadTooLargeError"
        assert "ARCHMAX_MAX_VARIABLES" in str(refused.value)
        check_send(view, SendInput(message="hi", variables=_many(5, start=990)))
        check_send(view, SendInput(message="hi", variables=_many(50)))  # rewrites, none new

    def test_a_delivery_past_the_byte_limit_is_refused_naming_it(self) -> None:
        """What the variables carry together is bounded as well (many mid-sized values)."""
        limits = Limits(session_variable_bytes=64 * 1024)
        held = {f"n{i}": Variable(value="x" * 900, locked=True) for i in range(70)}
        view = _admission(held, limits, status="awaiting_input")
        with pytest.raises(ApplicationError) as refused:
            check_delivery(view, DeliverInput(trigger="t", variables={"more": "y" * 900}))
        assert refused.value.type == "PayloadTooLargeError"
        assert "ARCHMAX_MAX_SESSION_VARIABLE_BYTES" in str(refused.value)

    def test_a_large_value_counts_as_its_reference(self) -> None:
        """A value kept by reference costs the session its digest and preview, not its size:
        60 KB values accumulate far past the byte limit."""
        held = {
            f"doc{i}": Variable(value="z" * 60_000, locked=True, ref="0" * 64, preview="…")
            for i in range(40)
        }
        check_send(_admission(held, Limits()), SendInput(variables={"doc40": "z" * 60_000}))

    def test_the_host_checks_a_firing_alone_before_sending(self) -> None:
        """More distinct variables than the limit in one firing is refused by the host's
        own check (the same function the validator runs first)."""
        from archmax_temporal.workflows.firing import check_send_size

        with pytest.raises(PayloadTooLargeError, match="ARCHMAX_MAX_VARIABLES"):
            check_send_size(Limits(variables=10), SendInput(variables=_many(10)))
        check_send_size(Limits(variables=10), SendInput(variables=_many(9)))

    def test_names_are_bounded(self) -> None:
        """A variable name is at most 64 characters, like the names a spec declares."""
        assert variables.invalid_names(["a" * 64, "b" * 65]) == ["b" * 65]

    def test_an_agent_write_past_a_limit_is_refused(self) -> None:
        """``archmax_set_variables`` is held to the same limits as a host's seeds."""
        held = {n: Variable(value=v) for n, v in _many(10).items()}
        with pytest.raises(PayloadTooLargeError, match="ARCHMAX_MAX_VARIABLES"):
            variables.check_agent_growth(Limits(variables=10), held, {"new_one": 1}, False)
        with pytest.raises(PayloadTooLargeError, match="ARCHMAX_MAX_VARIABLE_BYTES"):
            variables.check_agent_growth(Limits(), held, {"big": "q" * 70_000}, False)
        variables.check_agent_growth(Limits(variables=10), held, {"v00001": 2}, False)


class TestWhatTravels:
    def test_an_inline_variable_travels_as_it_always_did(self) -> None:
        """``{value, locked}``: old histories and old readers see the same record."""
        assert Variable(value=3, locked=True).model_dump(mode="json") == {
            "value": 3,
            "locked": True,
        }

    def test_a_large_value_travels_as_its_reference(self) -> None:
        """Over the inline size a value is kept by reference: the wire carries its digest,
        size and preview, never the value; the workflow's own copy still holds it."""
        value = {"body": "w" * (2 * INLINE_VARIABLE_BYTES)}
        moved, texts = variables.by_reference({"doc": Variable(value=value, locked=True)})
        (ref,) = texts
        assert json.loads(texts[ref]) == value and variables.reference_of(texts[ref]) == ref
        assert moved["doc"].value == value and moved["doc"].ref == ref
        wire = moved["doc"].model_dump(mode="json")
        assert wire["value"] is None and wire["ref"] == ref
        assert len(json.dumps(wire)) < 600
        small, none = variables.by_reference({"id": Variable(value="ORD-1")})
        assert none == {} and small["id"].ref is None

    def test_a_value_read_back_from_the_store_travels_whole_from_there(
        self, tmp_path: Path
    ) -> None:
        """What a host (or an activity) reads back is a plain ``{value, locked}`` variable, so
        its JSON (an HTTP answer, ``--json``) carries the value, and an altered file is
        refused, never read as another value."""
        store = FilesystemSessionStore(tmp_path)
        value = ["row"] * 1000
        moved, texts = variables.by_reference({"rows": Variable(value=value, locked=True)})
        write_stored_texts(store, "s-1", texts)
        wire = Variable.model_validate(moved["rows"].model_dump(mode="json"))
        assert wire.value is None
        (whole,) = resolve_variables(store, "s-1", {"rows": wire}).values()
        assert whole.model_dump(mode="json") == {"value": value, "locked": True}
        (ref,) = texts
        store.write_text("s-1", f"{variables.STORED_VARIABLES}/{ref}.json", '["forged"]')
        with pytest.raises(StoreIOError):
            resolve_variables(store, "s-1", {"rows": wire})

    def test_the_prompt_shows_a_stored_value_as_it_showed_it_inline(self) -> None:
        """The system prompt's preview of a large value is the same, held or not."""
        value = "p" * 5000
        moved, _ = variables.by_reference({"doc": Variable(value=value)})
        shown = prompt.render_state_block(
            SPEC, "intake", entry_state=None, follow_up=False, variables=moved
        )
        unheld = {"doc": moved["doc"].model_copy(update={"value": None})}
        assert shown == prompt.render_state_block(
            SPEC, "intake", entry_state=None, follow_up=False, variables=unheld
        )
        assert "(+4802 chars)" in shown

    def test_an_outcome_carries_what_its_firing_changed(self) -> None:
        """Not the whole map: the new and changed variables, and how many there are."""
        before = {n: Variable(value=v, locked=True) for n, v in _many(5000).items()}
        after = {**before, "v00007": Variable(value="new"), "fresh": Variable(value=1)}
        s = SessionState(status="completed", state="intake", variables=after)
        session = SessionInput(session_id="s", workflow="desk", spec=SPEC, spec_hash="h")
        outcome = projections.outcome(s, session, None, "turn", variables_from=before)
        assert set(outcome.variables) == {"v00007", "fresh"}
        assert outcome.variables_delta and outcome.variable_count == 5001
        remembered = projections.remembered(outcome)
        assert remembered.variables == {} and remembered.variables_delta

    def test_the_prompt_and_the_all_variables_answer_are_bounded(self) -> None:
        """10,000 variables: the prompt's block and ``archmax_get_variables`` with no name
        stay small (each variable is read by name)."""
        held = {n: Variable(value=v, locked=True) for n, v in _many(10_000).items()}
        block = prompt.render_state_block(
            SPEC, "intake", entry_state=None, follow_up=False, variables=held
        )
        assert len(block) < 20_000 and "more: read them with `archmax_get_variables`" in block
        answer = runtime_calls.get_variables(held, {})
        assert len(answer.content) < 40_000 and "10000 variables" in answer.content
        one = runtime_calls.get_variables(held, {"name": "v09999"})
        assert one.content == "9999"


def _bounded_limits() -> Limits:
    return Limits(variables=20_000, session_variable_bytes=SESSION_VARIABLES_CEILING)


class TestAccumulation:
    async def test_ten_thousand_variables_over_many_firings_keep_the_session_working(
        self, client: Client, task_queue: str, scripted: Scripted, desk_root: Path
    ) -> None:
        """10,000 distinct variables arrive over 20 firings (500 each) and four continues-as-
        new, under a raised count limit: every firing completes, the session holds them all,
        and no event of any run comes near Temporal's 2 MB (each outcome carried the whole
        map before, and each of 32 remembered firings a copy: ~3,400 variables broke it)."""
        server = scripted('{"rules": [], "default": {"content": "Noted."}}')
        sid = _sid()
        async with running_agent(
            client,
            task_queue,
            desk_root,
            "desk",
            server,
            worker_cache=10,
            requests_per_run=5,
            limits=_bounded_limits(),
        ) as agent:
            for firing in range(20):
                seeds = firing_variables(firing, 20, 10_000, 0)
                outcome = await agent.workflow.send(sid, f"firing {firing}", variables=seeds)
                assert outcome.kind == "completed"
            assert len(outcome.variables) == 10_001  # the host completed the delta
            assert outcome.variables["v00042"].value == 42
            summary = await agent.sessions.get(sid)
            assert len(summary.variables) == 10_001
            largest, kind, runs = await largest_event(client, sid)
        assert runs >= 4
        assert largest < 1024 * 1024, (largest, kind)

    async def test_the_count_limit_refuses_a_firing_and_the_session_takes_the_next(
        self, client: Client, task_queue: str, scripted: Scripted, desk_root: Path
    ) -> None:
        """At the default limit (1,000), a firing that would pass it is a typed
        ``PayloadTooLargeError`` from the validator (nothing written), never a raw
        ``RPCError``; the next firing that fits is served."""
        server = scripted('{"rules": [], "default": {"content": "Noted."}}')
        sid = _sid()
        async with running_agent(client, task_queue, desk_root, "desk", server) as agent:
            await agent.workflow.send(sid, "first", variables=_many(990))
            before = len((await agent.handle(sid).fetch_history()).events)
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await agent.handle(sid).execute_update(
                    "send", SendInput(message="more", variables=_many(20, start=990))
                )
            cause = refused.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == "PayloadTooLargeError"
            assert "ARCHMAX_MAX_VARIABLES" in str(cause)
            assert len((await agent.handle(sid).fetch_history()).events) == before
            with pytest.raises(PayloadTooLargeError, match="ARCHMAX_MAX_VARIABLES"):
                await agent.workflow.send(sid, "more", variables=_many(20, start=990))
            outcome = await agent.workflow.send(sid, "fits", variables=_many(5, start=990))
        assert outcome.kind == "completed" and len(outcome.variables) == 996

    async def test_large_values_live_in_the_store_and_read_back_whole(
        self, client: Client, task_queue: str, scripted: Scripted, desk_root: Path
    ) -> None:
        """One new 60 KB variable per firing broke a session at firing 8; now twelve go by
        reference: every firing completes, no event carries more than one of them, and the
        values read back whole for the host, the artifacts and the model (in a later run,
        loaded from the store)."""
        book = {
            "rules": [
                {
                    "when": {"last_user": "read doc003"},
                    "times": 1,
                    "reply": {"tool_calls": [tool_call("archmax_get_variables", name="doc003")]},
                }
            ],
            "default": {"content": "Noted."},
        }
        server = scripted(json.dumps(book))
        sid = _sid()
        docs = {f"doc{i:03d}": f"{i:03d}" + "x" * 60_000 for i in range(12)}
        async with running_agent(
            client, task_queue, desk_root, "desk", server, requests_per_run=3
        ) as agent:
            for name, value in docs.items():
                outcome = await agent.workflow.send(sid, f"take {name}", variables={name: value})
                assert outcome.kind == "completed"
            assert outcome.variables["doc000"].value == docs["doc000"]
            read = await agent.workflow.send(sid, "read doc003")
            assert read.kind == "completed"
            view = await agent.sessions.view(sid)
            largest, kind, runs = await largest_event(client, sid)
        assert runs >= 4
        assert largest < 200 * 1024, (largest, kind)
        assert {n: view.summary.variables[n].value for n in docs} == docs
        answers = [m.content for m in view.transcript if m.role == "tool" and m.note is None]
        assert docs["doc003"] in [json.loads(a or "null") for a in answers]
        artifact = desk_root / "sessions" / sid / "artifacts" / "variables.json"
        stored = json.loads(artifact.read_text(encoding="utf-8"))["variables"]
        assert stored["doc011"] == {"value": docs["doc011"], "locked": True}


FILER = """
title: Filer
states:
  intake:
    triggers: { manual: {} }
    instructions: File the document.
    tools:
      allow: [write_file]
    transitions:
      - { to: filed, description: Filed. }
  filed:
    before: { script: hooks/check.js }
    instructions: Say done.
"""

CHECK = """import { ok, veto } from "@archmax-ai/harness/sandbox";
export default function check({ variables }) {
  const doc = variables.doc;
  if (typeof doc !== "string" || doc.length !== 60003) return veto(`doc: ${typeof doc}`);
  return ok();
}
"""


async def test_a_stored_value_reads_back_whole_in_a_reference_and_a_hook(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """In a later run (continued as new, so it never held the value), a ``${{doc}}``
    reference in a tool call substitutes the whole 60 KB value (loaded from the store), and a
    hook's ``args.variables`` has it whole (filled in by its activity)."""
    write_workflow(tmp_path, "filer", FILER)
    hook_file = tmp_path / "workflows" / "filer" / "hooks" / "check.js"
    hook_file.parent.mkdir(parents=True, exist_ok=True)
    hook_file.write_text(CHECK, encoding="utf-8")
    book = {
        "rules": [
            {"when": {"state": "intake", "last_user": "take it"}, "reply": {"content": "Taken."}},
            {
                "when": {"state": "intake", "last_tool": "write_file"},
                "reply": {"tool_calls": [tool_call("archmax_advance", to="filed", reason="ok")]},
            },
            {
                "when": {"state": "intake", "last_user": "file it"},
                # the scripted model reads ``{{``/``}}`` as literal braces: this is ${{doc}}
                "reply": {
                    "tool_calls": [
                        tool_call(
                            "write_file", file_path="scratchpad/doc.txt", content="${{{{doc}}}}"
                        )
                    ]
                },
            },
            {"when": {"state": "filed"}, "reply": {"content": "Filed."}},
        ]
    }
    server = scripted(json.dumps(book))
    sid = _sid()
    doc = "doc" + "d" * 60_000
    async with running_agent(
        client, task_queue, tmp_path, "filer", server, requests_per_run=1
    ) as agent:
        taken = await agent.workflow.send(sid, "take it", variables={"doc": doc})
        assert taken.kind == "completed"
        filed = await agent.workflow.send(sid, "file it")
    assert (filed.kind, filed.state) == ("completed", "filed"), filed.reply
    written = tmp_path / "sessions" / sid / "scratchpad" / "doc.txt"
    assert written.read_text(encoding="utf-8") == doc
