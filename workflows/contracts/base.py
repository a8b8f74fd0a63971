"""What one activity contract is: its name, its wire types and what it does."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel


@dataclass(frozen=True)
class ActivityContract:
    """One activity as every history records it.

    ``name`` is a contract: renaming it breaks every session in flight. ``input`` and
    ``result`` are the wire types both sides import (``result`` None: the activity answers
    nothing).
    """

    name: str
    input: type[BaseModel]
    result: type[BaseModel] | None
    does: str
    """One line for the reader: what the activity does."""
