"""One table of tool calls and the verdict each must get, whichever path decides it.

The guards are written once over a placeholder tool (:data:`TOOL`) and instantiated for a
built-in tool (``read_file``: the agent's own call, or a script's ``tools.readFile``) and for a
sub-workflow tool (``archmax_workflow_sink``, whose one parameter is ``file_path`` too), so the
very same guards, variables and mocks decide every path. Each row names the verdict for an
agent's call and, where a script's call is taken as written (no ``${{…}}`` substitution), the
verdict for a script's call.

Used by the pure function's unit tests (tests/workflows/test_governance.py) and by the end-to-end
runs through the turn engine, delegation and the sandbox bridge (tests/e2e/test_one_decision.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from archmax_temporal.workflows.models import ToolMock, Variable

TOOL: Final = "TOOL"
"""The placeholder the guards name, replaced by the tool under test."""

SINK: Final = "sink"
"""The sub-workflow the delegation path calls (``archmax_workflow_sink``)."""

ASSETS: Final = "skills/probe/assets"

MOCKED: Final = "from the mock"
"""What a mocked call answers (never a file's content, never a child's reply)."""

STATE: Final = "work"

GUARDS: Final = f"""
    skills: {{ allow: [probe] }}
    tools:
      allow:
        - {{ tool: {TOOL}, args: {{ file_path: "{ASSETS}/${{{{customer}}}}-*.json" }} }}
        - {{ tool: archmax_run, paths: ["skills/probe/scripts/**"] }}
      forbid:
        - {{ tool: {TOOL}, args: {{ file_path: "**/*secret*" }} }}
        - {{ tool: {TOOL}, args: {{ file_path: "**/${{{{banned}}}}.json" }} }}
"""
"""The state's governance block: a grant guarded by a variable, a literal denial and a denial
guarded by a variable; ``archmax_run`` may run the probe script."""

VARIABLES: Final[dict[str, str]] = {"customer": "acme", "banned": "acme-9"}

Kind = Literal["run", "mock", "blocked"]


@dataclass(frozen=True)
class Expected:
    """A verdict as every path shows it: run, mocked, or blocked by ``rule``."""

    kind: Kind
    rule: str | None = None


RUN: Final = Expected("run")
MOCK: Final = Expected("mock")


def blocked(rule: str) -> Expected:
    return Expected("blocked", rule)


@dataclass(frozen=True)
class Row:
    """One call (its ``file_path``), whether a mock is declared for it, and its verdicts."""

    name: str
    file_path: str
    agent: Expected
    script: Expected | None = None
    """A script's call where it differs from the agent's (only a ``${{…}}`` argument)."""
    mocked: bool = False

    def expected(self, origin: Literal["agent", "script"]) -> Expected:
        return self.script if origin == "script" and self.script is not None else self.agent


ROWS: Final[tuple[Row, ...]] = (
    Row("granted", f"{ASSETS}/acme-1.json", RUN),
    Row("outside the grant", f"{ASSETS}/globex-1.json", blocked("tool.not-allowed")),
    Row("denied beats granted", f"{ASSETS}/acme-secret.json", blocked("tool.forbidden-here")),
    Row("denied by a variable", f"{ASSETS}/acme-9.json", blocked("tool.forbidden-here")),
    Row("mocked", f"{ASSETS}/acme-2.json", MOCK, mocked=True),
    Row(
        "a mock never masks a refusal",
        f"{ASSETS}/globex-2.json",
        blocked("tool.not-allowed"),
        mocked=True,
    ),
    Row(
        "a reference in an argument",
        f"{ASSETS}/${{{{customer}}}}-1.json",
        RUN,
        script=blocked("tool.not-allowed"),
    ),
    Row(
        "an unresolved reference",
        f"{ASSETS}/${{{{nope}}}}-1.json",
        blocked("tool.unresolved-reference"),
        script=blocked("tool.not-allowed"),
    ),
)
"""For a script, ``${{…}}`` in an argument is the literal text (archmax: script and hook calls
are not substituted), which the grant's glob does not match."""


def spec_block(tool: str) -> str:
    """:data:`GUARDS` over ``tool``."""
    return GUARDS.replace(TOOL, tool)


def mocks(tool: str) -> list[ToolMock]:
    """The rows' mocks, declared for ``tool``."""
    return [
        ToolMock(tool=tool, when_input={"file_path": row.file_path}, result=MOCKED)
        for row in ROWS
        if row.mocked
    ]


def variables() -> dict[str, Variable]:
    return {name: Variable(value=value, locked=True) for name, value in VARIABLES.items()}


def arguments(row: Row) -> dict[str, str]:
    return {"file_path": row.file_path}
