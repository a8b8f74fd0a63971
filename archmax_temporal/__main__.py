"""``python -m archmax_temporal``: the ``archmax`` command."""

from archmax_temporal.client.cli import main

main()
