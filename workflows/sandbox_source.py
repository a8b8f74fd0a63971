"""Preparing a hand-written hook or script for QuickJS: imports stripped, exports rewritten,
the prelude and the runner around it.

QuickJS runs the file as a plain script (there is no module loader in the sandbox), so:

- ``import … from "@archmax-ai/harness/sandbox"`` (or any ``@archmax-ai/harness`` subpath) is
  a type carrier only: the line is blanked, keeping the line count, so an error's line number
  still points into the author's file;
- any other import is :class:`ForbiddenSandboxImportError` (here, in ``validate`` and at run);
- ``export default <expr>`` becomes ``globalThis.__archmax_default = <expr>``; other ``export``
  keywords are dropped. A file with no default export is a plain script: its completion value
  is the entry (a function is called with ``args``, anything else is the result);
- a script that awaits (or returns) at its top level runs as an async function body instead
  (:mod:`archmax_temporal.workflows.script_body` prepares it, :data:`ASYNC_LOAD` compiles it): its
  entry is the awaited value of its last expression statement, or what it returns.

Pure text processing (no I/O): the workflow side, ``validate`` and the sandbox activity share it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from archmax_temporal.workflows.errors import ForbiddenSandboxImportError

ALLOWED_IMPORT: Final = "@archmax-ai/harness"
"""The one package a sandboxed file may name (itself or a subpath), as a type carrier."""

_IMPORT = re.compile(
    r"""^[ \t]*import\b(?:[^'";]*?\bfrom\b)?[ \t]*(['"])(?P<spec>[^'"]+)\1[ \t]*;?[ \t]*$""",
    re.MULTILINE,
)
_DYNAMIC_IMPORT = re.compile(r"""\bimport\s*\(""")
_REQUIRE = re.compile(r"""\brequire\s*\(\s*(['"])(?P<spec>[^'"]+)\1\s*\)""")
_EXPORT_DEFAULT = re.compile(r"^([ \t]*)export[ \t]+default[ \t]+", re.MULTILINE)
_EXPORT = re.compile(r"^([ \t]*)export[ \t]+(?=(?:async[ \t]+)?function|const|let|var|class)", re.M)

DEFAULT_GLOBAL: Final = "__archmax_default"


def _allowed(specifier: str) -> bool:
    return specifier == ALLOWED_IMPORT or specifier.startswith(ALLOWED_IMPORT + "/")


def forbidden_imports(source: str) -> list[str]:
    """The specifiers ``source`` imports that the sandbox refuses, in order of appearance."""
    found = [m.group("spec") for m in _IMPORT.finditer(source) if not _allowed(m.group("spec"))]
    found += [m.group("spec") for m in _REQUIRE.finditer(source) if not _allowed(m.group("spec"))]
    if _DYNAMIC_IMPORT.search(source):
        found.append("import()")
    return found


def prepare(source: str, label: str) -> str:
    """``source`` ready to evaluate as a plain script, or :class:`ForbiddenSandboxImportError`.

    The line count never changes: stripped imports become empty lines.
    """
    refused = forbidden_imports(source)
    if refused:
        raise ForbiddenSandboxImportError(
            f"{label}: cannot import {', '.join(repr(s) for s in refused)}; a hook or script "
            f"may import only from {ALLOWED_IMPORT!r} (its verdict helpers are globals)"
        )
    text = _IMPORT.sub("", source)
    text = _EXPORT_DEFAULT.sub(rf"\1globalThis.{DEFAULT_GLOBAL} = ", text)
    return _EXPORT.sub(r"\1", text)


PRELUDE: Final = r"""
"use strict";
globalThis.ok = () => ({ verdict: "ok" });
globalThis.veto = (reason) => ({ verdict: "veto", reason: String(reason ?? "vetoed") });
globalThis.correct = (reason) => ({ verdict: "correct", reason: String(reason ?? "correct") });
globalThis.defineHook = (fn) => fn;
const __archmax_text = (p) => {
  if (typeof p === "string") return p;
  try { return JSON.stringify(p); } catch (e) { return String(p); }
};
const __archmax_line = (level) => (...parts) =>
  __archmax_log(level + " " + parts.map(__archmax_text).join(" "));
globalThis.console = {
  log: __archmax_line("log"), info: __archmax_line("info"), warn: __archmax_line("warn"),
  error: __archmax_line("error"), debug: __archmax_line("debug"),
};
const __archmax_tool = (name) => (input) => {
  const reply = JSON.parse(__archmax_call(name, JSON.stringify(input ?? {})));
  if (!reply.ok) {
    const error = new Error(reply.error);
    error.stack = "";  // raised by the bridge, not at a line of the author's file
    return Promise.reject(error);
  }
  return Promise.resolve(reply.content);
};
const __archmax_bridge = Object.freeze(
  Object.fromEntries(__ARCHMAX_TOOLS__.map((name) => [name, __archmax_tool(name)])));
// A name the bridge does not offer answers a rejection naming what it does offer, rather than
// the engine's bare "not a function" (then/toJSON stay undefined: tools is no thenable).
globalThis.tools = new Proxy(__archmax_bridge, {
  get(target, name) {
    if (typeof name !== "string" || name in target || name === "then" || name === "toJSON") {
      return target[name];
    }
    const offered = Object.keys(target).join(", ");
    return () => Promise.reject(
      new Error(`tools.${name} is not available to this run; it may call: ${offered}`));
  },
});
globalThis.args = Object.freeze(Object.assign(__ARCHMAX_ARGS__, { tools: globalThis.tools }));
"""
"""Globals every run sees: the verdict helpers, ``defineHook``, ``console``, ``tools``, ``args``.

``__archmax_call`` and ``__archmax_log`` are the host functions the sandbox process installs.
"""

RUNNER: Final = r"""
(async () => {
  const completion = globalThis.__archmax_async
    ? await globalThis.__archmax_completion : globalThis.__archmax_completion;
  const entry = globalThis.__archmax_default !== undefined
    ? globalThis.__archmax_default : completion;
  return typeof entry === "function" ? await entry(globalThis.args) : await entry;
})().then(
  (value) => { globalThis.__archmax_outcome = { ok: true, undefined: value === undefined,
                                                value: value === undefined ? null : value }; },
  (error) => { globalThis.__archmax_outcome = { ok: false, error: (error && error.name)
      ? `${error.name}: ${error.message}${error.stack ? "\n" + error.stack : ""}`
      : `Uncaught ${String(error)}` }; },
);
"""
"""Calls the entry and records its settled outcome in ``__archmax_outcome``. A script run as an
async function body (top-level ``await``, :mod:`archmax_temporal.workflows.script_body`) is awaited
first: its ``export default`` may be assigned after an ``await``."""

PLAIN_LOAD: Final = "globalThis.__archmax_completion = (0, eval)(globalThis.__archmax_source);"
"""Evaluates a plain script: its completion value is the entry."""

ASYNC_LOAD: Final = r"""
globalThis.__archmax_completion = (() => {
  if (globalThis.__archmax_probe) {
    let plain = true;
    try {
      new Function(globalThis.__archmax_source);  // compiles, never runs
    } catch (error) {
      plain = false;
    }
    if (plain) return (0, eval)(globalThis.__archmax_source);
  }
  let refused;
  for (const text of globalThis.__archmax_candidates) {
    let body;
    try {
      body = (0, eval)(text);
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error;
      refused = error;
      continue;
    }
    globalThis.__archmax_async = true;
    return body();
  }
  throw refused;
})();
"""
"""Evaluates a script with top-level ``await`` or ``return``: compiles each candidate async function
body (:func:`archmax_temporal.workflows.script_body.async_candidates`) in turn, calls the first that
parses, and keeps its promise as the completion. When none parses, the last one's SyntaxError (the
script's own text, unrewritten) is raised, at the script's own line.

With ``__archmax_probe`` (a script the tokenizer could not read through, a syntax error most
likely), a script that compiles as a plain one runs as one, and only one that does not is
tried as an async body, so its error names the line an ``await`` would not mask."""

EVAL_RUNNER: Final = RUNNER.replace(
    'return typeof entry === "function" ? await entry(globalThis.args) : await entry;',
    "return await entry;",
)
"""For ``archmax_eval``: the completion value as it is (awaited, never called)."""


def prelude(tool_names: list[str], args: dict[str, Any]) -> str:
    """The prelude with the bridge's tool names and the run's ``args`` filled in."""
    return PRELUDE.replace("__ARCHMAX_TOOLS__", json.dumps(tool_names)).replace(
        "__ARCHMAX_ARGS__", json.dumps(args, ensure_ascii=False, default=str)
    )


def camel(tool: str) -> str:
    """``read_file`` → ``readFile``, ``archmax_workflow_enrich-order`` →
    ``archmaxWorkflowEnrichOrder``: the bridge's spelling of a tool name."""
    head, *rest = re.split(r"[_-]", tool)
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
