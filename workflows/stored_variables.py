"""Large variable values by reference: kept in the session store, loaded when needed.

A value whose JSON is over :data:`~archmax_temporal.workflows.limits.INLINE_VARIABLE_BYTES` is
written to the store (``archmax.store.put_variables``) as soon as it arrives (a host's seed, an
agent's ``archmax_set_variables``), and from then on the session carries its digest and a preview
(:class:`~archmax_temporal.workflows.models.Variable`): the continue-as-new input, the checkpoint,
outcomes, every turn's save step and the hooks' input never carry it. The run that received it keeps
holding it; a later run loads it (``archmax.store.load_variables``) only when its workflow code
needs the value: a ``${{…}}`` reference in a tool call or a guard, an ``archmax_get_variables`` by
name, a sub-workflow's returns. Activities (hooks, scripts, the artifacts) and hosts read stored
values from the store themselves.

Sessions whose history predates this keep their values inline (``workflow.patched``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows import contracts, patches, variables
    from archmax_temporal.workflows.context import SessionContext
    from archmax_temporal.workflows.contracts.store import VARIABLES_PER_CALL
    from archmax_temporal.workflows.models import LoadVariablesInput, StoreVariablesInput
    from archmax_temporal.workflows.tools import GET_VARIABLES

VARIABLES_BY_REFERENCE_PATCH = "archmax-variables-by-reference"
"""``workflow.patched`` id: large variable values are stored and carried by reference."""


async def keep(ctx: SessionContext) -> None:
    """Store every value the session holds inline that is over the inline size, and carry
    it by reference from now on."""
    s = ctx.session
    moved, texts = variables.by_reference(s.variables)
    if not texts or not patches.patched(VARIABLES_BY_REFERENCE_PATCH):
        return
    refs = sorted(texts)
    for start in range(0, len(refs), VARIABLES_PER_CALL):
        batch = refs[start : start + VARIABLES_PER_CALL]
        await contracts.store.put_variables(
            StoreVariablesInput(session_id=ctx.session_id, texts={r: texts[r] for r in batch}),
            summary=f"store {len(batch)} large variable value(s)",
        )
    # values set meanwhile (none: nothing else runs between) keep their own entries
    s.variables = {**s.variables, **{n: v for n, v in moved.items() if n in s.variables}}


async def load(ctx: SessionContext, names: Iterable[str]) -> None:
    """Hold again the stored values of ``names`` this run does not hold."""
    wanted = variables.unloaded(ctx.session.variables, names)
    refs = sorted(set(wanted.values()))
    if not refs:
        return
    values: dict[str, Any] = {}
    for start in range(0, len(refs), VARIABLES_PER_CALL):
        batch = refs[start : start + VARIABLES_PER_CALL]
        loaded = await contracts.store.load_variables(
            LoadVariablesInput(session_id=ctx.session_id, refs=batch),
            summary=f"load {len(batch)} stored variable value(s)",
        )
        values.update({ref: json.loads(text) for ref, text in loaded.texts.items()})
    ctx.session.variables = variables.with_values(ctx.session.variables, values)


def needed_by_call(ctx: SessionContext, tool: str, arguments: dict[str, Any]) -> set[str]:
    """The variables a tool call may read whole: those its arguments and the spec's guards
    reference (``${{name…}}``), and the one ``archmax_get_variables`` names. Empty when
    every value is held (the common case costs nothing)."""
    if not any(v.ref is not None and v.value is None for v in ctx.session.variables.values()):
        return set()
    names = variables.referenced(json.dumps(arguments, default=str), ctx.spec.model_dump_json())
    if tool == GET_VARIABLES:
        target = arguments.get("name") or arguments.get("path")
        if isinstance(target, str) and target:
            names.add(target.split(".", 1)[0].split("[", 1)[0])
    return names
