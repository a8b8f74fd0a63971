"""Top-level ``await`` in a sandboxed script or snippet: the script runs as an async function
body, its value is its last expression (awaited) or what it returns, and a syntax error names
the script's own line. A script with no top-level ``await`` runs as a plain script, as before.

The tokenizer (:mod:`archmax_temporal.workflows.script_body`) on its own, then each form through the
sandbox activity and the real QuickJS process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.sandbox import SandboxLimits, SandboxRunInput, SandboxRunResult
from archmax_temporal.workflows.sandbox_source import prepare
from archmax_temporal.workflows.script_body import async_candidates, read_top_level
from archmax_temporal.workflows.spec import parse_spec

SPEC = parse_spec(
    {"states": {"intake": {"triggers": {"manual": None}, "skills": {"allow": ["orders"]}}}}
)


@pytest.fixture
def sandbox(tmp_path: Path) -> SandboxActivities:
    assets = tmp_path / "skills" / "orders" / "assets"
    assets.mkdir(parents=True)
    (assets / "orders.json").write_text(
        '[{"id": "ORD-1", "total": 5}, {"id": "ORD-2", "total": 7}]'
    )
    return SandboxActivities(WorkspaceActivities(FilesystemSessionStore(tmp_path / "s"), tmp_path))


Kind = Literal["hook", "script", "eval"]


async def run(
    sandbox: SandboxActivities, source: str, kind: Kind = "script", **args: Any
) -> SandboxRunResult:
    request = SandboxRunInput(
        session_id="tla-1",
        label="skills/orders/scripts/x.js",
        kind=kind,
        source=source,
        args=args,
        spec=SPEC,
        state="intake",
        visible_skills=["orders"],
        limits=SandboxLimits(timeout_ms=3000, memory_limit_bytes=32 * 1024 * 1024),
    )
    return await ActivityEnvironment().run(sandbox.run, request)


async def failure(sandbox: SandboxActivities, source: str, kind: Kind = "script") -> str:
    with pytest.raises(ApplicationError) as caught:
        await run(sandbox, source, kind)
    assert caught.value.type == "SandboxScriptError"
    return caught.value.message


class TestTheTokenizer:
    @pytest.mark.parametrize(
        ("source", "tail"),
        [
            ("const r = await Promise.all([f()]); r;", "r"),
            ("const x = 1;\nawait x\n", "await x"),
            ("let a = 1\na\n  .b(await c) // trailing\n", "a\n  .b(await c)"),
            ("const t = `a ${await f({ k: '}' })} b`;\n/* done */ t /* end */", "t"),
            ("const v = 10 / 2 / 1\nawait /re\\/x/.test(v);;", "await /re\\/x/.test(v)"),
            ("x = await y\n++z", "++z"),
        ],
    )
    def test_the_last_expression_statement_is_found(self, source: str, tail: str) -> None:
        """The tail is found through comments, strings, templates, regexes and ASI."""
        top = read_top_level(source)
        assert top is not None and top.awaits and top.last_expression is not None
        start, end = top.last_expression
        assert source[start:end] == tail

    @pytest.mark.parametrize(
        "source",
        [
            "const answers = await Promise.all([])",
            "if (ready) { await go() }",
            "for await (const x of xs) { log(x) }",
            "await f(); return 3",
            "await f()\nlabel: while (1) break label",
        ],
    )
    def test_a_last_statement_that_is_no_expression_has_no_value(self, source: str) -> None:
        """A declaration, a block, a loop, a return or a labelled statement: nothing
        rewritten (a return still answers)."""
        top = read_top_level(source)
        assert top is not None and top.last_expression is None
        assert async_candidates(source) == [f"(async function () {{{source}\n}})"]

    @pytest.mark.parametrize(
        "source",
        [
            "1 + 2",
            "async function f() { await g() }\nf()",
            "const o = { m() { return 1 } }; o.m()",
            "const f = async (x) => { await x; return x }; f(1)",
            "const s = 'await x; return'; s",
            "class A { async m() { await this.n() } }",
        ],
    )
    def test_a_script_awaiting_only_inside_functions_stays_plain(self, source: str) -> None:
        """No ``await`` or ``return`` outside every function: no async candidates."""
        assert async_candidates(source) == []

    def test_the_wrapper_keeps_every_line_where_it_was(self) -> None:
        """The header shares the script's first line: line N of a candidate is line N of
        the script."""
        source = "const a = await f();\n\nconst b = a + 1;\nb"
        for candidate in async_candidates(source):
            lines = candidate.splitlines()
            assert lines[1:3] == source.splitlines()[1:3]
            assert lines[0].endswith("const a = await f();")


class TestTheForms:
    async def test_a_promise_all_then_its_name(self, sandbox: SandboxActivities) -> None:
        """``const r = await Promise.all(…); r;``: the value is the awaited array."""
        source = (
            "const orders = JSON.parse(await tools.readFile({ file_path: "
            "'skills/orders/assets/orders.json' }));\n"
            "const r = await Promise.all(orders.map(async (o) => o.total * 2));\n"
            "r;\n"
        )
        assert (await run(sandbox, source)).value == [10, 14]

    async def test_a_last_line_that_is_a_bare_await(self, sandbox: SandboxActivities) -> None:
        """The last line ``await x`` is the value, awaited."""
        source = "const x = Promise.resolve('done');\nawait x"
        result = await run(sandbox, source)
        assert result.value == "done" and not result.returned_nothing

    async def test_a_script_that_returns(self, sandbox: SandboxActivities) -> None:
        """A top-level ``return`` (with or without ``await``) is the value."""
        assert (await run(sandbox, "const n = await Promise.resolve(3);\nreturn n * 2;")).value == 6
        early = await run(sandbox, "if (args.early) return 'early';\n'late'", early=True)
        assert early.value == "early"

    async def test_a_declaration_last_returns_nothing(self, sandbox: SandboxActivities) -> None:
        """Ending in a declaration, as a plain script would: no value."""
        result = await run(
            sandbox, "const enriched = await Promise.all([1, 2].map(async (n) => n))"
        )
        assert result.returned_nothing

    async def test_a_script_without_await_is_unchanged(self, sandbox: SandboxActivities) -> None:
        """A plain script keeps a plain script's completion value (a block's included) and a
        function completion is still called with ``args``."""
        assert (await run(sandbox, "let a = 1\nif (a) { 'block' } else { 'other' }")).value == (
            "block"
        )
        assert (await run(sandbox, "(({ n }) => n + 1)", n=41)).value == 42

    async def test_a_hook_default_export_after_an_await(self, sandbox: SandboxActivities) -> None:
        """A hook file may await at its top level before its default export."""
        source = (
            'import { ok, veto } from "@archmax-ai/harness/sandbox";\n'
            "const orders = JSON.parse(await tools.readFile({ file_path: "
            "'skills/orders/assets/orders.json' }));\n"
            "export default ({ state }) => orders.length === 2 ? ok() : veto(state);\n"
        )
        assert (await run(sandbox, source, "hook", state="intake")).value == {"verdict": "ok"}

    async def test_an_eval_awaits_at_its_top_level(self, sandbox: SandboxActivities) -> None:
        """``archmax_eval`` takes the same forms; console output is kept."""
        source = "const t = await Promise.resolve(4);\nconsole.log('t is', t);\nt * 10"
        result = await run(sandbox, source, "eval")
        assert result.value == 40 and result.logs == ["log t is 4"]

    @pytest.mark.parametrize("kind", ["script", "eval"])
    async def test_a_syntax_error_names_the_scripts_own_line(
        self, sandbox: SandboxActivities, kind: Kind
    ) -> None:
        """A syntax error in a script that awaits is reported at its own line, not the
        wrapper's, and so is one in a script that does not."""
        awaiting = "const a = await f();\nconst b = 2;\nconst c = (;\nc"
        assert "(line 3): SyntaxError" in await failure(sandbox, awaiting, kind)
        plain = "const a = 1;\n\nconst b = 2 +;\n"
        assert "(line 3): SyntaxError" in await failure(sandbox, plain, kind)

    async def test_a_runtime_error_names_the_scripts_own_line(
        self, sandbox: SandboxActivities
    ) -> None:
        """A throw after an await points at the script's line."""
        source = "await null;\n\nthrow new Error('no orders');\n"
        message = await failure(sandbox, source)
        assert message == "skills/orders/scripts/x.js (line 3): Error: no orders"


def test_the_harness_import_and_an_await_together() -> None:
    """``prepare`` then the candidates: the stripped import keeps its blank line."""
    prepared = prepare('import { ok } from "@archmax-ai/harness/sandbox";\nawait 1;\nok()', "h.js")
    assert async_candidates(prepared)[0].splitlines()[1] == "await 1;"
