"""The activity side: every I/O a session performs (model calls, the session store,
workspace tools, hooks, host tools, notifications), run by the worker."""

if __name__ != "archmax_temporal.activities":  # pragma: no cover - a bare import stops here
    raise ImportError(
        "this folder is the package archmax_temporal.activities: import archmax_temporal.activities"
        f" (not {__name__}), so one file is one module"
    )
