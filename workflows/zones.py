"""The workspace zones: the top-level areas of a session's workspace, defined once.

What an agent sees, by the first segment of a workspace-relative path (harness §4.3)::

    scratchpad/**          the session's own working area: the one writable zone
      attachments/         where every file handed to the session lands (seed, "Files
                           handed to a session")
    skills/<slug>/**       skill bundles mounted from the authoring root: read only, and
                           only the slugs the current state enables
    AGENTS.md              the authoring root's AGENTS.md, mounted: read only
    <other session files>  e.g. trigger.json seeded by the host: read only

    artifacts/, checkpoints/, _specs/
                           runtime-internal: never listed, never read, never written
    large_tool_results/, conversation_history/, workflows/
                           archmax's other runtime areas: a host or a case never seeds them

Governance (:mod:`archmax_temporal.workflows.governance`), the workspace activities
(:mod:`archmax_temporal.activities.workspace`), the store (:mod:`archmax_temporal.activities.store`)
and the case schema read these names from here; ``tests/test_registries.py`` fails when a copy
drifts. Pure.
"""

from __future__ import annotations

from typing import Final

SCRATCHPAD: Final = "scratchpad"
"""The one writable zone, open to the always-on tools in every state."""

ATTACHMENTS: Final = f"{SCRATCHPAD}/attachments"
"""Where placed files land (a host's files, a sub-workflow's file arguments and returns)."""

SKILLS: Final = "skills"
"""Skill bundles, ``skills/<slug>/``, mounted read-only from the authoring root."""

SKILL_SCRIPTS: Final = "scripts"
"""A bundle's runnable scripts (``skills/<slug>/scripts/…``): all ``archmax_run`` may run."""

AGENTS_MD: Final = "AGENTS.md"
"""The authoring root's guidance, mounted read-only at the workspace root."""

MOUNTS: Final[frozenset[str]] = frozenset({SKILLS, AGENTS_MD})
"""Top-level names served from the authoring root; they shadow the session's own folder."""

ARTIFACTS: Final = "artifacts"
"""The per-session observability files (trail, variables, trajectory, ...)."""

CHECKPOINTS: Final = "checkpoints"
"""The session's durable runtime records (a stopped script's journals among them)."""

SPECS: Final = "_specs"
"""The spec snapshots, ``_specs/<specHash>.json``, at the top of the session store."""

RUNTIME_INTERNAL: Final[frozenset[str]] = frozenset({ARTIFACTS, CHECKPOINTS, SPECS})
"""Areas the runtime owns: no agent access, hidden from listings and searches."""

RUNTIME_AREAS: Final[frozenset[str]] = RUNTIME_INTERNAL | frozenset(
    {"large_tool_results", "conversation_history", "workflows"}
)
"""Every area the runtime reserves: nothing is seeded into one (``agent.sessions.seed`` and
a case's ``workspace:``). Beyond the internal ones, archmax's offload areas and its
unroutable ``workflows/``, so a case file written for archmax is refused the same way here."""
