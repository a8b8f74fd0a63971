"""The workflow side: deterministic code, checked in Temporal's sandbox by CI's replays (the
session workflow, its turn engine, governance, and the contracts of every activity it schedules)."""

if __name__ != "archmax_temporal.workflows":  # pragma: no cover - a bare import stops here
    raise ImportError(
        "this folder is the package archmax_temporal.workflows: import archmax_temporal.workflows"
        f" (not {__name__}), so one file is one module"
    )
