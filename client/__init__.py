"""The host API: ``create_agent`` (``agent``), its runtime and configuration, session events,
the workflow loader. The ``cli`` and ``testing`` wings live beside it; the public names are
re-exported, lazily, by the package root (``from archmax_temporal import create_agent``)."""

if __name__ != "archmax_temporal.client":  # pragma: no cover - a bare import stops here
    raise ImportError(
        "this folder is the package archmax_temporal.client: import archmax_temporal.client"
        f" (not {__name__}), so one file is one module"
    )
