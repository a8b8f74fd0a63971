"""The contracts of everything the session workflow schedules, in one place.

For each activity: its name (``archmax.*``, recorded in every history: renaming one breaks
every session in flight), its input and result wire types, its timeouts and retry policy
(named constants with docstrings), and the typed call that schedules it, so workflow code
never calls ``workflow.execute_activity`` with literals:

====================================  =============================  ========================
activity                              module                         typed call
====================================  =============================  ========================
``archmax.model.complete``            :mod:`.model`                  :func:`.model.complete`
``archmax.store.persist_turn``        :mod:`.store`                  :func:`.store.persist_turn`
``archmax.store.checkpoint``          :mod:`.store`                  :func:`.store.checkpoint`
``archmax.store.put_variables``       :mod:`.store`                  :func:`.store.put_variables`
``archmax.store.load_variables``      :mod:`.store`                  :func:`.store.load_variables`
``archmax.workspace.<tool>`` (x9)     :mod:`.workspace`              :func:`.workspace.run_tool`
``archmax.workspace.place_files``     :mod:`.workspace`              :func:`.workspace.place_files`
``archmax.workspace.seed_files``      :mod:`.workspace`              (the host runs it itself)
``archmax.sandbox.run``               :mod:`.sandbox`                :func:`.sandbox.run`
``archmax.hook.custom``               :mod:`.sandbox`                :func:`.sandbox.custom_hook`
``archmax.tool.host``                 :mod:`.host_tools`             :func:`.host_tools.run`
``archmax.notify.send``               :mod:`.notify`                 :func:`.notify.send`
====================================  =============================  ========================

The short workspace tools (:data:`.workspace.LOCAL_TOOLS`) and the turn's save run as local
activities first, under the same names (:func:`.base.local_first`, behind
:data:`.base.LOCAL_PATCH`): no round trip through the server; anything that may be long stays
a regular activity with heartbeats.

:data:`ACTIVITIES` lists them all; the worker registers exactly :data:`ACTIVITY_NAMES`
(:func:`check_registered`). Also here: the workflow's own name and the bounds of its loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Final

from archmax_temporal.workflows.contracts import (
    host_tools,
    model,
    notify,
    sandbox,
    store,
    workspace,
)
from archmax_temporal.workflows.contracts.base import ActivityContract
from archmax_temporal.workflows.contracts.model import (
    BUDGET_EXHAUSTED,
    DEFAULT_MODEL_CALL_DEADLINE,
    DEFAULT_MODEL_CALL_TIMEOUT,
    MODEL_ACTIVITY,
    MODEL_RETRY,
)
from archmax_temporal.workflows.contracts.store import (
    PERSIST_ACTIVITY,
    PERSIST_RETRY,
    PERSIST_TIMEOUT,
)

__all__ = [
    "ACTIVITIES",
    "ACTIVITY_NAMES",
    "BUDGET_EXHAUSTED",
    "DEFAULT_MAX_MODEL_CALLS_PER_VISIT",
    "DEFAULT_MODEL_CALL_DEADLINE",
    "DEFAULT_MODEL_CALL_TIMEOUT",
    "DEFAULT_REQUESTS_PER_RUN",
    "FIRST_FIRING_GRACE",
    "LISTED_MEMO",
    "MAX_ERROR_ROUTES_PER_TURN",
    "MODEL_ACTIVITY",
    "MODEL_RETRY",
    "PERSIST_ACTIVITY",
    "PERSIST_RETRY",
    "PERSIST_TIMEOUT",
    "REFUSED_SIGNAL_MEMO",
    "WORKFLOW_NAME",
    "ActivityContract",
    "check_registered",
    "host_tools",
    "model",
    "notify",
    "sandbox",
    "store",
    "workspace",
]

WORKFLOW_NAME: Final = "ArchmaxSession"
"""The Temporal workflow type of a session."""

LISTED_MEMO: Final = "archmax.summary"
"""The memo key a session publishes its listing under at every settled turn (a
:class:`~archmax_temporal.workflows.models.ListedSession`): hosts list it with no worker."""

REFUSED_SIGNAL_MEMO: Final = "archmax.refused_signal"
"""The memo key a session records a refused ``deliver`` signal under (its number in the run,
the error type, the reason): the events read it as ``refused``."""

FIRST_FIRING_GRACE: Final = timedelta(seconds=60)
"""How long a run that has admitted no firing waits for one before it ends. An update-with-
start's update arrives with the run's first task; the grace covers a first task that timed
out under load and was retried with it."""

ACTIVITIES: Final[tuple[ActivityContract, ...]] = (
    model.CONTRACT,
    store.CONTRACT,
    store.CHECKPOINT_CONTRACT,
    store.PUT_VARIABLES_CONTRACT,
    store.LOAD_VARIABLES_CONTRACT,
    *workspace.CONTRACTS,
    *sandbox.CONTRACTS,
    host_tools.CONTRACT,
    notify.CONTRACT,
)
"""Every activity a worker serves, once."""

ACTIVITY_NAMES: Final[frozenset[str]] = frozenset(contract.name for contract in ACTIVITIES)
"""The activity names a worker registers: exactly these."""


def check_registered(names: Iterable[str]) -> None:
    """Raise ``ValueError`` unless ``names`` (what a worker registers) are exactly the
    contracts' activities: a missing one would leave sessions waiting on an activity no
    worker runs, an extra one is an activity no contract records."""
    registered = list(names)
    missing = sorted(ACTIVITY_NAMES - set(registered))
    extra = sorted(set(registered) - ACTIVITY_NAMES)
    twice = sorted({name for name in registered if registered.count(name) > 1})
    if missing or extra or twice:
        raise ValueError(
            "the worker's activities differ from the contracts: "
            f"missing {missing}, not in the contracts {extra}, registered twice {twice}"
        )


# --- the session loop ---------------------------------------------------------------------

DEFAULT_MAX_MODEL_CALLS_PER_VISIT: Final = 50
"""``budget.maxTurns`` when a state declares none: archmax's recursion limit."""

MAX_ERROR_ROUTES_PER_TURN: Final = 10
"""Backstop against ``on_error`` cycles: after this many routes in one turn it is rejected."""

DEFAULT_REQUESTS_PER_RUN: Final = 200
"""Turns and deliveries one run handles before it continues as new (Temporal may suggest it
earlier)."""
