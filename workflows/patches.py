"""One patch marker a run instead of one per patch: the generation.

A ``workflow.patched`` id costs every run that asks it a marker and an upsert of Temporal's
``TemporalChangeVersion`` search attribute in its history (about 300 bytes) and about 10 KiB of
worker memory for as long as the run is cached (``bench.patches``). A new session used to ask
five of them on its first turn, and a parked one held them all.

So a run asks one id first thing, :data:`GENERATION_PATCH`, and a run that records it takes
the new path of every patch in :data:`BEFORE_GENERATION` without asking it:

- **A run that began on this code** records the generation marker in its first workflow task
  and no other marker for those patches. Its replays find the marker and take the same paths.
- **A run that began on earlier code** (its history has no generation marker, maybe some of
  those patches' own markers) replays on this code with the generation not found, so every
  patch is asked as before, marker by marker: the path each took then, and the new path once
  the replay catches up. The golden histories of ``tests/histories/`` hold such runs.

Only ids that existed before the generation may be in :data:`BEFORE_GENERATION`, and none is
ever added to it: a run of this code records the generation, and a later change replayed on
that history must still find whether its own patch was asked. A change after this one asks its
own id with :func:`patched` (which asks it individually) until the next generation, an id of
its own whose set holds everything before it, replaces this one at a run's start.

What this changes for operators: a query for the runs that still lack a patch
(``TemporalChangeVersion``) must also exclude the runs that record the generation.

Changes that came with the generation itself and need no id of their own ask
:func:`generation`: a run that records it is of this code, whatever else it asks.
"""

from __future__ import annotations

from typing import Final

from temporalio import workflow

GENERATION_PATCH: Final = "archmax-0.2.0-patches"
"""``workflow.patched`` id asked first in every run (:func:`generation`): the run began on code
that takes the new path of every patch of :data:`BEFORE_GENERATION` (those of release 0.2.0)."""

BEFORE_GENERATION: Final = frozenset(
    {
        "archmax-agent-variable-limits",
        "archmax-answer-logged",
        "archmax-continue-as-new-mid-turn",
        "archmax-first-firing-grace",
        "archmax-idle-close",
        "archmax-listed-memo",
        "archmax-local-activities",
        "archmax-refused-signal-memo",
        "archmax-rubric-unreadable-bounded",
        "archmax-script-terminal-block",
        "archmax-store-wait",
        "archmax-tool-result-refs",
        "archmax-turn-spec",
        "archmax-unheld-prompt-sent-again",
        "archmax-upgrade-on-wake",
        "archmax-variables-by-reference",
    }
)
"""The patch ids a run that records :data:`GENERATION_PATCH` takes without asking. Never
changed: it is what the generation marker means in every history that holds it."""


def generation() -> bool:
    """Whether this run records :data:`GENERATION_PATCH`: it began on this code or later.

    The session asks it first thing in its run, so the marker is in the run's first workflow
    task, with the run's start. (A marker first asked in the task that completes an update
    makes Temporal keep the workflow task of the next refused update in the history instead of
    dropping it.) Later calls read the run's answer back: ``workflow.patched`` keeps it."""
    return workflow.patched(GENERATION_PATCH)


def patched(patch_id: str) -> bool:
    """``workflow.patched(patch_id)``, but True without a marker of its own in a run that
    records the generation when ``patch_id`` is one of :data:`BEFORE_GENERATION`."""
    if patch_id in BEFORE_GENERATION and generation():
        return True
    return workflow.patched(patch_id)
