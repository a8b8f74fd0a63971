"""``python -m client ...`` is ``archmax ...``."""

from client.cli import main

main()
