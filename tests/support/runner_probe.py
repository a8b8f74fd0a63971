"""A workflow that reports how the runner it runs in treats archmax's workflow code
(``tests/test_worker.py``): whether the code is the worker's own module or a copy
imported for the run, and whether a clock read made through it is refused."""

from __future__ import annotations

from temporalio import workflow

from archmax_temporal.workflows import deadlines

with workflow.unsafe.imports_passed_through():
    from temporalio.worker.workflow_sandbox import RestrictedWorkflowAccessError


@workflow.defn(name="archmax-test-runner-probe")
class RunnerProbe:
    @workflow.run
    async def run(self, outside: int) -> list[str]:
        """``outside``: ``id`` of :mod:`archmax_temporal.workflows.deadlines` as the test
        process imported it."""
        found = ["shared module" if id(deadlines) == outside else "imported for the run"]
        try:
            deadlines.datetime.now()  # type: ignore[attr-defined]  # the module's own import
        except RestrictedWorkflowAccessError:
            found.append("clock refused")
        else:
            found.append("clock read")
        return found
