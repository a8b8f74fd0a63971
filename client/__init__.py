"""The host API: ``create_agent`` (``agent``), its runtime and configuration, session events,
the workflow loader. The ``cli`` and ``testing`` wings live beside it; the public names are
re-exported, lazily, by the package root (``from archmax_temporal import create_agent``)."""
