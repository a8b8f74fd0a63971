"""One run of the sandbox activity through Temporal's ``ActivityEnvironment`` and the real
QuickJS process, under a spec with a forbidden skill and a forbidden path."""

from __future__ import annotations

from typing import Any

from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.workflows.sandbox import SandboxLimits, SandboxRunInput, SandboxRunResult
from archmax_temporal.workflows.spec import parse_spec

SPEC = parse_spec(
    {
        "skills": {"forbid_always": ["secret"]},
        "tools": {"forbid_always": [{"tool": "read_file", "paths": ["scratchpad/private/**"]}]},
        "states": {
            "intake": {
                "triggers": {"manual": None},
                "tools": {"forbid": ["read_file"]},  # hooks are exempt from this
            }
        },
    }
)


def run_input(source: str, **overrides: Any) -> SandboxRunInput:
    fields: dict[str, Any] = {
        "session_id": "sb-1",
        "label": "hooks/test.js",
        "kind": "hook",
        "source": source,
        "spec": SPEC,
        "state": "intake",
        "visible_skills": ["orders"],
        "limits": SandboxLimits(timeout_ms=2000, memory_limit_bytes=32 * 1024 * 1024),
        **overrides,
    }
    return SandboxRunInput(**fields)


async def run(sandbox: SandboxActivities, source: str, **overrides: Any) -> SandboxRunResult:
    return await ActivityEnvironment().run(sandbox.run, run_input(source, **overrides))
