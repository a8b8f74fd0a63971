"""The ``archmax`` command (``python -m archmax_temporal``)."""

from archmax_temporal.client.cli.app import main

__all__ = ["main"]
