"""The sandbox process: evaluates one prepared hook or script in QuickJS and talks JSON lines.

Run as ``python -I sandbox_child.py`` by :mod:`archmax_temporal.activities.sandbox`; it imports
nothing of the project, only ``quickjs`` and the standard library.

Protocol (one JSON object per line):

- parent → child, first: ``{prelude, source, candidates, probe, load, runner, memory_limit,
  stack_limit}`` (``load`` evaluates ``source`` as a plain script, or compiles the first of
  ``candidates``, async function bodies, that parses: a script with top-level ``await``);
- child → parent: ``{"call": {"tool", "args"}}`` for each ``tools.*`` call, answered by the
  parent's ``{"ok": true, "content"}`` or ``{"ok": false, "error"}``;
- child → parent: ``{"log": "<method> <text>"}`` for each ``console.*`` line as it is
  written (so a run stopped, timed out or failed keeps what it wrote), bounded by the
  request's ``output`` (``lines``, ``line_chars``, ``cut``; lines logged before
  ``skip_before_calls`` tool calls were answered are a resumed script's replay: not sent);
- child → parent, last: ``{"done": {ok, value?, undefined?, error?, kind?, dropped}}``.

Why a process: the QuickJS binding's own time limit forbids calling back into Python (the
``tools.*`` bridge) and measures the whole process's CPU time, so a run is bounded by the
parent's wall clock instead and killed when it overruns; a crash in the engine then takes only
this process down, never the worker.
"""

from __future__ import annotations

import json
import sys
from typing import Any

UNREADABLE_ERROR = "(Failed obtaining QuickJS error string. Concurrency issue?)"
"""What the binding says when it cannot even read the error's text: on an exhausted heap,
that is the out-of-memory error itself."""


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _kind(text: str) -> str:
    lowered = text.lower()
    if "out of memory" in lowered:
        return "memory"
    if "stack overflow" in lowered:
        return "stack"
    return "throw"


def _peak_rss_bytes() -> int:
    """This process's peak resident size (``VmHWM``), 0 where ``/proc`` does not tell.

    Not ``getrusage``: its ``ru_maxrss`` survives ``exec`` and so holds the worker's own peak.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _null_from_exhaustion(text: str, grown: int, limit: int) -> bool:
    """Whether a bare ``null`` exception (or one whose text could not be read) came from an
    exhausted heap.

    When QuickJS cannot allocate even its own "out of memory" error it throws ``null``; the
    process's peak resident size having grown by half the limit tells that apart from a
    script's own ``throw null``.
    """
    bare = text.strip().removeprefix("Uncaught ").strip()
    return bare in ("null", UNREADABLE_ERROR) and grown >= limit // 2


def main() -> None:
    import quickjs  # type: ignore[import-untyped]

    request = json.loads(sys.stdin.readline())
    output = request.get("output") or {}
    skip = int(output.get("skip_before_calls", 0))
    kept_lines, line_chars = int(output.get("lines", 100)), int(output.get("line_chars", 1000))
    cut = str(output.get("cut", ""))
    baseline = _peak_rss_bytes()
    made = 0
    """Tool calls answered so far (a console line logged before ``skip`` of them was reported
    by the earlier run a resumed script replays)."""
    kept = 0
    dropped = 0

    def call(name: str, payload: str) -> str:
        nonlocal made
        try:
            arguments = json.loads(payload)
        except ValueError:
            arguments = {}
        _send({"call": {"tool": name, "args": arguments}})
        reply = sys.stdin.readline()
        made += 1
        return reply if reply else json.dumps({"ok": False, "error": "the host went away"})

    def log(line: str) -> None:
        nonlocal kept, dropped
        if made < skip:
            return
        if kept >= kept_lines:
            dropped += 1
            return
        text = str(line)
        kept += 1
        _send({"log": text if len(text) <= line_chars else text[:line_chars] + cut})

    context = quickjs.Context()
    context.set_memory_limit(int(request["memory_limit"]))
    context.set_max_stack_size(int(request["stack_limit"]))
    context.add_callable("__archmax_call", call)
    context.add_callable("__archmax_log", log)
    done: dict[str, Any]
    try:
        context.eval(request["prelude"])
        context.set("__archmax_source", request["source"])
        context.set("__archmax_candidates", json.dumps(request.get("candidates") or []))
        context.eval("globalThis.__archmax_candidates = JSON.parse(__archmax_candidates);")
        context.set("__archmax_probe", bool(request.get("probe")))
        context.eval(request["load"])
        context.eval(request["runner"])
        while context.execute_pending_job():
            pass
        outcome = context.eval(
            "globalThis.__archmax_outcome === undefined ? undefined : "
            "(() => { try { return JSON.stringify(globalThis.__archmax_outcome); } "
            "catch (e) { return JSON.stringify({ ok: false, error: "
            "'the result is not JSON-serialisable: ' + String(e) }); } })()"
        )
        if outcome is None:
            done = {"ok": False, "kind": "throw", "error": "the script's promise never settled"}
        else:
            done = json.loads(outcome)
            if not done.get("ok"):
                done["kind"] = _kind(str(done.get("error")))
    except quickjs.StackOverflow as exc:
        done = {"ok": False, "kind": "stack", "error": f"stack overflow: {exc}"}
    except quickjs.JSException as exc:
        text = str(exc)
        done = {"ok": False, "kind": _kind(text), "error": text}
    except MemoryError:
        done = {"ok": False, "kind": "memory", "error": "out of memory"}
    if done.get("kind") == "throw" and _null_from_exhaustion(
        str(done.get("error")), _peak_rss_bytes() - baseline, int(request["memory_limit"])
    ):
        done["kind"] = "memory"
    done["dropped"] = dropped
    _send({"done": done})


if __name__ == "__main__":
    main()
