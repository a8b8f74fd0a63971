"""The sandbox activity: one hook or ``archmax_run`` script evaluated in QuickJS.

Each run gets a fresh QuickJS process (:mod:`archmax_temporal.activities.sandbox_child`, ~75 ms to
start) bounded by the wall clock of ``settings.timeoutMs`` (killed on overrun) and by QuickJS's heap
quota of ``settings.memoryLimitBytes``. The binding cannot bound time in-thread while the script
calls back into Python, and its clock is the whole process's CPU time, so the process is the unit
that can be stopped; an endless loop, a memory bomb or an engine crash ends that run with a typed
error and never takes the worker down.

The run's ``tools.*`` calls come back to this activity and are served here, in order: the
one decision (``governance.govern``: the kernel, on runtime authority for a hook, then the
mocks), then the workspace tool itself through the same code the tool activities run. The
n-th call of a run is keyed ``<the run's idempotency key>.<n>`` in the effect journal, so a
run retried after its worker died replays the writes it made rather than applying them again
(a script that takes another course on the retry is served afresh). The activity heartbeats
while the script runs, and a crashed process's stderr is quoted with host paths hidden.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from temporalio import activity
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.effects import idempotency_key
from archmax_temporal.activities.heartbeat import heartbeating
from archmax_temporal.activities.store_errors import (
    StoreIOError,
    WorkspaceError,
    hide_host_paths,
    unexpected,
)
from archmax_temporal.activities.stored_variables import fill_stored, resolve_variables
from archmax_temporal.activities.tool_text import truncate
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows import governance
from archmax_temporal.workflows.contracts.sandbox import (
    MAX_OUTPUT_LINE_CHARS,
    MAX_OUTPUT_LINES,
    OUTPUT_CUT,
    SANDBOX_ACTIVITY,
    SandboxDispatch,
    SandboxRunInput,
    SandboxRunResult,
)
from archmax_temporal.workflows.contracts.workspace import WorkspaceToolInput
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    ForbiddenSandboxImportError,
    SandboxCrashError,
    SandboxMemoryError,
    SandboxResultTooLargeError,
    SandboxScriptError,
    SandboxTimeoutError,
)
from archmax_temporal.workflows.models import SandboxToolCall, ScriptJournal
from archmax_temporal.workflows.sandbox_source import (
    ASYNC_LOAD,
    EVAL_RUNNER,
    PLAIN_LOAD,
    RUNNER,
    camel,
    prelude,
    prepare,
)
from archmax_temporal.workflows.script_body import loading
from archmax_temporal.workflows.tools import BRIDGE_TOOLS, READ_FILE
from archmax_temporal.workflows.zones import CHECKPOINTS

CHILD: Final = Path(__file__).with_name("sandbox_child.py")
STACK_LIMIT: Final = 1024 * 1024
"""QuickJS's stack bound: a runaway recursion is a RangeError, not a crashed process."""
STREAM_LIMIT: Final = 32 * 1024 * 1024
"""Longest protocol line (a large ``writeFile`` content, a big result)."""
_LINE: Final = re.compile(r"<input>:(\d+)")
"""The first frame of a QuickJS stack: the author's line (imports are blanked, not removed)."""


JOURNALS: Final = f"{CHECKPOINTS}/scripts"
"""Where a stopped script's journals live in its session (runtime-internal: never listed)."""

FAILED_CONTENT_CHARS: Final = 2000
"""How much of a failed call's answer a run's result keeps (a hook's veto quotes it)."""


def _slim(calls: list[SandboxToolCall]) -> list[SandboxToolCall]:
    """The calls as a result carries them: statuses, and only failures' answers, cut short."""
    return [
        c.model_copy(
            update={"content": "" if c.status == "ok" else c.content[:FAILED_CONTENT_CHARS]}
        )
        for c in calls
    ]


class _DispatchNeeded(Exception):
    """A script's sub-workflow call: the run stops here and the workflow dispatches it."""

    def __init__(self, dispatch: SandboxDispatch) -> None:
        super().__init__(dispatch.tool)
        self.dispatch = dispatch


class _Terminal(Exception):
    """A call governance refused for good (an unresolvable guard): the run stops here."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SandboxActivities:
    """The sandbox activity over the worker's workspace (store and authoring root)."""

    def __init__(
        self, workspace: WorkspaceActivities, runtime: Sequence[str] | None = None
    ) -> None:
        self._workspace = workspace
        self._command = tuple(runtime or (sys.executable, "-I", str(CHILD)))
        """The sandbox runtime: the command line that starts one run's process."""

    @activity.defn(name=SANDBOX_ACTIVITY)
    async def run(self, request: SandboxRunInput) -> SandboxRunResult:
        """Evaluate the run (heartbeating); a script's failure is a typed, non-retryable
        error, a failing store a retryable one."""
        output: list[str] = []
        try:
            await asyncio.to_thread(self._workspace.sweep_after_crash, request.session_id)
            return await heartbeating(self.evaluate(request, key=idempotency_key(), output=output))
        except ArchmaxError as exc:
            raise _with_output(exc.to_application_error(), output) from exc
        except WorkspaceError as exc:
            raise exc.to_application_error() from None
        except Exception as exc:  # a process that could not start, a bug: retried
            raise unexpected(exc) from None

    def _with_stored_values(self, request: SandboxRunInput) -> SandboxRunInput:
        """``request`` with the session's values by reference read back from the store (the
        workflow sends them as None), into ``variables`` and ``args.variables``."""
        if not any(v.ref is not None and v.value is None for v in request.variables.values()):
            return request
        store = self._workspace.store
        whole = resolve_variables(store, request.session_id, request.variables)
        args = fill_stored(store, request.session_id, request.args, request.variables)
        return request.model_copy(update={"variables": whole, "args": args})

    async def evaluate(
        self,
        request: SandboxRunInput,
        *,
        key: str | None = None,
        output: list[str] | None = None,
    ) -> SandboxRunResult:
        """The run itself, raising the typed :class:`SandboxError` subclasses. ``key`` is the
        run's idempotency key (its ``tools.*`` writes are journaled under it); ``output``
        receives its console lines as they are written (a failed run's included)."""
        output = [] if output is None else output
        request = await asyncio.to_thread(self._with_stored_values, request)
        source = await self._source(request)
        program = prepare(source, request.label)
        arguments = dict(request.args)
        bridge = (
            [*BRIDGE_TOOLS, *request.workflow_tools]
            if request.kind == "script"
            else [*BRIDGE_TOOLS]
        )
        load = loading(program)
        replay = await asyncio.to_thread(self._load_journal, request)
        payload = {
            "prelude": prelude([camel(t) for t in bridge], arguments),
            "source": program,
            "candidates": load.candidates,
            "probe": load.probe,
            "load": ASYNC_LOAD if load.candidates else PLAIN_LOAD,
            "runner": EVAL_RUNNER if request.kind == "eval" else RUNNER,
            "memory_limit": request.limits.memory_limit_bytes,
            "stack_limit": STACK_LIMIT,
            "output": {
                "lines": MAX_OUTPUT_LINES,
                "line_chars": MAX_OUTPUT_LINE_CHARS,
                "cut": OUTPUT_CUT,
                "skip_before_calls": len(replay),
            },
        }
        calls: list[SandboxToolCall] = []
        process = await asyncio.create_subprocess_exec(
            *self._command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=STREAM_LIMIT,
        )
        try:
            done = await asyncio.wait_for(
                self._converse(
                    process,
                    payload,
                    request,
                    calls,
                    {camel(t): t for t in bridge},
                    replay,
                    key,
                    output,
                ),
                timeout=request.limits.timeout_ms / 1000,
            )
        except _DispatchNeeded as needed:
            journal = await asyncio.to_thread(self._store_journal, request.session_id, calls)
            return SandboxRunResult(
                calls=_slim(calls), dispatch=needed.dispatch, journal=journal, logs=output
            )
        except _Terminal as stop:
            return SandboxRunResult(calls=_slim(calls), terminal=stop.reason, logs=output)
        except TimeoutError:
            raise SandboxTimeoutError(
                f"{request.label}: timed out after {request.limits.timeout_ms} ms "
                "(settings.timeoutMs); the run was stopped"
            ) from None
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()
        return self._result(request, done, calls, output)

    async def _source(self, request: SandboxRunInput) -> str:
        if request.source is not None:
            return request.source
        if request.script_path is None:
            raise SandboxScriptError(f"{request.label}: no source to run")
        try:
            return await asyncio.to_thread(
                self._workspace.read_text,
                request.session_id,
                request.script_path,
                request.visible_skills,
            )
        except WorkspaceError as exc:
            raise SandboxScriptError(f"{request.label}: cannot read the script: {exc}") from None

    async def _converse(
        self,
        process: asyncio.subprocess.Process,
        payload: dict[str, Any],
        request: SandboxRunInput,
        calls: list[SandboxToolCall],
        names: dict[str, str],
        replay: list[SandboxToolCall],
        key: str | None,
        output: list[str],
    ) -> dict[str, Any]:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(payload, ensure_ascii=False) + "\n").encode())
        await process.stdin.drain()
        while True:
            line = await process.stdout.readline()
            if not line:
                stderr = b""
                if process.stderr is not None:
                    stderr = await process.stderr.read()
                await process.wait()
                tail = hide_host_paths(stderr.decode(errors="replace")).strip().splitlines()[-3:]
                raise SandboxCrashError(
                    f"{request.label}: the sandbox process exited ({process.returncode}) "
                    f"without a result{': ' + ' | '.join(tail) if tail else ''}"
                )
            message = json.loads(line)
            if "done" in message:
                return dict(message["done"])
            if "log" in message:
                output.append(str(message["log"]))
                continue
            call = message.get("call") or {}
            reply = await asyncio.to_thread(self._serve, request, call, calls, names, replay, key)
            process.stdin.write((json.dumps(reply, ensure_ascii=False) + "\n").encode())
            await process.stdin.drain()

    def _serve(
        self,
        request: SandboxRunInput,
        call: dict[str, Any],
        calls: list[SandboxToolCall],
        names: dict[str, str],
        replay: list[SandboxToolCall],
        key: str | None = None,
    ) -> dict[str, Any]:
        """One ``tools.*`` call: replay, cap, govern, mock, run. An answer, or (for a
        sub-workflow call past the journal) :class:`_DispatchNeeded`."""
        tool = names.get(str(call.get("tool")), str(call.get("tool")))
        raw = call.get("args")
        arguments: dict[str, Any] = raw if isinstance(raw, dict) else {}

        def record(
            status: Any, content: str, mocked: bool = False, replayed: bool = False
        ) -> dict[str, Any]:
            calls.append(
                SandboxToolCall(
                    tool=tool,
                    arguments=arguments,
                    status=status,
                    content=content,
                    mocked=mocked,
                    replayed=replayed,
                )
            )
            return (
                {"ok": True, "content": content}
                if status == "ok"
                else {
                    "ok": False,
                    "error": content,
                }
            )

        position = len(calls)
        if position < len(replay):
            entry = replay[position]
            if entry.tool != tool or entry.arguments != arguments:
                raise SandboxScriptError(
                    f"{request.label}: the script changed course when resumed after a "
                    f"sub-workflow call: call {position + 1} was {entry.tool} "
                    f"{json.dumps(entry.arguments, default=str)[:120]} and is now {tool} "
                    f"{json.dumps(arguments, default=str)[:120]}; a script that calls "
                    "sub-workflows must make the same calls in the same order each run"
                )
            return record(entry.status, entry.content, entry.mocked, replayed=True)
        cap = request.limits.max_ptc_calls
        if cap is not None and len(calls) >= cap:
            return record(
                "blocked",
                f"{tool} refused: this run made its {cap} tool calls (settings.maxPtcCalls)",
            )
        if tool in names.values() and tool in request.workflow_tools:
            raise _DispatchNeeded(SandboxDispatch(tool=tool, arguments=arguments))
        if tool not in BRIDGE_TOOLS:
            return record("blocked", f"tools.{call.get('tool')} is not on the sandbox bridge")
        verdict = governance.govern(
            request.spec,
            request.state,
            tool,
            arguments,
            request.variables,
            request.mocks,
            origin="hook" if request.kind == "hook" else "script",
        )
        if isinstance(verdict, governance.Blocked | governance.Unresolved):
            refused = record("blocked", verdict.text)
            if verdict.terminal:  # the run goes no further: the turn fails, as for the agent
                raise _Terminal(verdict.reason)
            return refused
        if isinstance(verdict, governance.Mocked):
            return record(*verdict.answer(), mocked=True)
        if tool == READ_FILE:
            return record(*self._read_raw(request, verdict.arguments))
        answer = self._workspace.run_tool(
            WorkspaceToolInput(
                session_id=request.session_id,
                tool=tool,
                arguments=verdict.arguments,
                max_result_chars=request.limits.max_result_chars,
                visible_skills=request.visible_skills,
            ),
            key=None if key is None else f"{key}.{position}",
        )
        return record(answer.status, answer.content)

    def _read_raw(self, request: SandboxRunInput, arguments: dict[str, Any]) -> tuple[str, str]:
        """``tools.readFile`` answers the file's text as it is (a script parses it), not the
        model's numbered view; ``offset``/``limit`` still page by lines."""
        path = arguments.get("file_path")
        if not isinstance(path, str):
            return "error", "Error: readFile needs a file_path string"
        try:
            text = self._workspace.read_text(request.session_id, path, request.visible_skills)
        except StoreIOError:
            raise
        except WorkspaceError as exc:
            message = str(exc)
            return "error", message if message.startswith("Error:") else f"Error: {message}"
        offset, limit = arguments.get("offset"), arguments.get("limit")
        if isinstance(offset, int) or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = offset if isinstance(offset, int) and offset > 0 else 0
            end = start + limit if isinstance(limit, int) and limit > 0 else len(lines)
            text = "".join(lines[start:end])
        return "ok", truncate(text, request.limits.max_result_chars)[0]

    def _load_journal(self, request: SandboxRunInput) -> list[SandboxToolCall]:
        """The answers a resumed run replays: the stored calls of its last run, then the
        tail; a stored journal that is missing or altered fails the run."""
        journal = request.journal
        entries: list[SandboxToolCall] = []
        if journal.stored is not None:
            try:
                text = self._workspace.store.read_text(request.session_id, journal.stored)
            except (OSError, WorkspaceError) as exc:
                raise SandboxScriptError(
                    f"{request.label}: cannot resume: its journal {journal.stored} is gone "
                    f"({hide_host_paths(str(exc))})"
                ) from None
            if hashlib.sha256(text.encode()).hexdigest() != journal.digest:
                raise SandboxScriptError(
                    f"{request.label}: cannot resume: its journal {journal.stored} was altered"
                )
            entries = [SandboxToolCall.model_validate(entry) for entry in json.loads(text)]
        return [*entries, *journal.tail]

    def _store_journal(self, session_id: str, calls: list[SandboxToolCall]) -> ScriptJournal:
        """Keep a stopped run's calls (contents and all) in the session store, named by their
        digest: the history carries the reference, not the files the script read."""
        text = json.dumps(
            [c.model_dump(mode="json", exclude={"replayed"}) for c in calls], ensure_ascii=False
        )
        digest = hashlib.sha256(text.encode()).hexdigest()
        path = f"{JOURNALS}/{digest}.json"
        self._workspace.store.write_text(session_id, path, text)
        return ScriptJournal(stored=path, digest=digest, count=len(calls))

    @staticmethod
    def _result(
        request: SandboxRunInput,
        done: dict[str, Any],
        calls: list[SandboxToolCall],
        output: list[str],
    ) -> SandboxRunResult:
        if not done.get("ok"):
            error = str(done.get("error") or "the script failed")
            kind = done.get("kind")
            if kind == "memory":
                raise SandboxMemoryError(
                    f"{request.label}: out of memory (settings.memoryLimitBytes = "
                    f"{request.limits.memory_limit_bytes} bytes)"
                )
            first = error.strip().splitlines()[0] if error.strip() else error
            frames = [f for f in error.splitlines() if f.strip().startswith("at ")]
            line = _LINE.search(frames[0]) if frames else None
            where = f" (line {line.group(1)})" if line else ""
            raise SandboxScriptError(f"{request.label}{where}: {first}")
        value = done.get("value")
        size = len(json.dumps(value, ensure_ascii=False, default=str))
        if size > request.limits.max_result_chars:
            raise SandboxResultTooLargeError(
                f"{request.label}: the result is {size} chars, over settings.maxResultChars "
                f"({request.limits.max_result_chars})"
            )
        return SandboxRunResult(
            value=value,
            returned_nothing=bool(done.get("undefined")),
            logs=output,
            output_dropped=int(done.get("dropped") or 0),
            calls=_slim(calls),
        )


def _with_output(error: ApplicationError, output: list[str]) -> ApplicationError:
    """A failed run's error carrying the console lines it wrote before it failed (its
    ``details``: ``{"logs": [...]}``), so they reach the ``hook-output`` events too."""
    if not output:
        return error
    return ApplicationError(
        error.message, {"logs": output}, type=error.type, non_retryable=error.non_retryable
    )


__all__ = ["ForbiddenSandboxImportError", "SandboxActivities"]
