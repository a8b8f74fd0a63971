"""The sandbox process: evaluates one prepared hook or script in QuickJS and talks JSON lines.

Run as ``python -I sandbox_child.py`` by :mod:`activities.sandbox`; it imports nothing of the
project, only ``quickjs`` and the standard library.

Protocol (one JSON object per line):

- parent → child, first: ``{prelude, source, candidates, probe, load, runner, memory_limit,
  stack_limit}`` (``load`` evaluates ``source`` as a plain script, or compiles the first of
  ``candidates``, async function bodies, that parses: a script with top-level ``await``);
- child → parent: ``{"call": {"tool", "args"}}`` for each ``tools.*`` call, answered by the
  parent's ``{"ok": true, "content"}`` or ``{"ok": false, "error"}``;
- child → parent, last: ``{"done": {ok, value?, undefined?, error?, kind?, logs}}``.

Why a process: the QuickJS binding's own time limit forbids calling back into Python (the
``tools.*`` bridge) and measures the whole process's CPU time, so a run is bounded by the
parent's wall clock instead and killed when it overruns; a crash in the engine then takes only
this process down, never the worker.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MAX_LOG_LINES = 200
MAX_LOG_CHARS = 2000


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
    """Whether a bare ``null`` exception came from an exhausted heap.

    When QuickJS cannot allocate even its own "out of memory" error it throws ``null``; the
    process's peak resident size having grown by half the limit tells that apart from a
    script's own ``throw null``.
    """
    bare = text.strip().removeprefix("Uncaught ").strip()
    return bare == "null" and grown >= limit // 2


def main() -> None:
    import quickjs  # type: ignore[import-untyped]

    request = json.loads(sys.stdin.readline())
    logs: list[str] = []
    baseline = _peak_rss_bytes()

    def call(name: str, payload: str) -> str:
        try:
            arguments = json.loads(payload)
        except ValueError:
            arguments = {}
        _send({"call": {"tool": name, "args": arguments}})
        reply = sys.stdin.readline()
        return reply if reply else json.dumps({"ok": False, "error": "the host went away"})

    def log(line: str) -> None:
        if len(logs) < MAX_LOG_LINES:
            logs.append(str(line)[:MAX_LOG_CHARS])

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
    done["logs"] = logs
    _send({"done": done})


if __name__ == "__main__":
    main()
