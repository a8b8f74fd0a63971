"""Host tools a ``crash`` case's worker process can load (module-level, importable): the
ledger's ``charge``, each charge one line of the file ``ARCHMAX_TEST_CHARGES`` names (the
worker process inherits the test's environment), so a test reads what was charged in every
process that ran it."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from archmax_temporal.activities.host_tools import ToolContext

CHARGES_ENV = "ARCHMAX_TEST_CHARGES"


class Order(BaseModel):
    order_id: str


def _ledger() -> Path:
    return Path(os.environ[CHARGES_ENV])


def charges() -> list[tuple[str, str, int]]:
    """Every charge applied, in order: the order, the key (``-``: none) and the pid of the
    process that applied it."""
    path = _ledger()
    lines = path.read_text().splitlines() if path.exists() else []
    return [(order, key, int(pid)) for order, key, pid in (line.split() for line in lines)]


def charge(order: Order) -> str:
    """Charge an order (each call charges it again: not idempotent)."""
    with _ledger().open("a") as ledger:
        ledger.write(f"{order.order_id} - {os.getpid()}\n")
    return f"charged {order.order_id}"


def charge_once(order: Order, context: ToolContext) -> str:
    """Charge an order once per idempotency key."""
    if not any(key == context.idempotency_key for _, key, _ in charges()):
        with _ledger().open("a") as ledger:
            ledger.write(f"{order.order_id} {context.idempotency_key} {os.getpid()}\n")
    return f"charged {order.order_id}"
