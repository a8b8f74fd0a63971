"""The session store on disk: spec snapshots and per-session artifacts.

Layout (the seed's, under ``ARCHMAX_STORE``, default ``<root>/sessions``)::

    _specs/<specHash>.json          the spec a session runs under (content-addressed)
    <sessionId>/artifacts/          trail.json, variables.json, metadata.json, graph.json
    <sessionId>/scratchpad/         the session's working area

Checkpoints are Temporal's history; the store holds files. Every write is atomic (write to a
temporary file, then rename), so a killed worker never leaves a half-written artifact.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from temporalio import activity

from archmax_temporal.workflows.contracts.store import PERSIST_ACTIVITY
from archmax_temporal.workflows.identity import folder_name
from archmax_temporal.workflows.models import PersistTurnInput
from archmax_temporal.workflows.spec import WorkflowSpec
from archmax_temporal.workflows.zones import ARTIFACTS, SCRATCHPAD, SPECS

PACKAGE_VERSION = "0.1.0"


def atomic_write(path: Path, data: str | bytes, *, tmp_dir: Path | None = None) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half.

    The temporary file is written in ``tmp_dir`` (which must be on the same file system,
    so the rename is atomic), by default beside ``path``. A write killed before its rename
    leaves it there: a store passes a folder nobody lists and sweeps it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if tmp_dir is None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    else:
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmp_dir, prefix="w-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n"


def spec_snapshot(spec: WorkflowSpec) -> dict[str, Any]:
    """The governing spec as JSON (``metadata`` excluded, as from the hash)."""
    return spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"metadata"})


def graph(spec: WorkflowSpec) -> dict[str, Any]:
    """The machine topology: states, edges, ``on_error`` routes and one start edge per trigger."""
    return {
        "states": [
            {
                "id": slug,
                "type": state.type,
                "title": state.title,
                "terminal": state.is_terminal,
            }
            for slug, state in spec.states.items()
        ],
        "edges": [
            {"from": slug, "to": t.to, "kind": "transition", "type": t.type}
            for slug, state in spec.states.items()
            for t in state.transitions
        ]
        + [
            {"from": slug, "to": state.on_error, "kind": "on_error"}
            for slug, state in spec.states.items()
            if state.on_error
        ],
        "starts": [
            {"trigger": trigger_id, "to": slug}
            for slug, state in spec.states.items()
            for trigger_id in state.triggers
        ],
    }


class StoreActivities:
    """Activities that write the session store of this worker."""

    def __init__(self, store_dir: Path) -> None:
        self._dir = store_dir

    @activity.defn(name=PERSIST_ACTIVITY)
    async def persist_turn(self, turn: PersistTurnInput) -> None:
        """Rewrite the session's artifacts (and its spec snapshot once) at the end of a turn."""
        snapshot = self._dir / SPECS / f"{turn.spec_hash}.json"
        if not snapshot.exists():
            atomic_write(snapshot, _json(spec_snapshot(turn.spec)))
        session_dir = self._dir / folder_name(turn.session_id)
        (session_dir / SCRATCHPAD).mkdir(parents=True, exist_ok=True)
        artifacts = session_dir / ARTIFACTS
        head = {"sessionId": turn.session_id, "workflow": turn.workflow}
        atomic_write(
            artifacts / "trail.json",
            _json({**head, "steps": [s.model_dump(mode="json") for s in turn.trail]}),
        )
        atomic_write(
            artifacts / "variables.json",
            _json(
                {
                    **head,
                    "variables": {
                        name: v.model_dump(mode="json") for name, v in turn.variables.items()
                    },
                }
            ),
        )
        atomic_write(
            artifacts / "metadata.json",
            _json(
                {
                    **head,
                    "runtimeContract": f"{turn.spec.runtime.engine}@{turn.spec.runtime.version}",
                    "packageVersion": PACKAGE_VERSION,
                    "specHash": turn.spec_hash,
                    "status": turn.status,
                    "state": turn.state,
                    "usage": turn.usage.model_dump(),
                }
            ),
        )
        atomic_write(artifacts / "graph.json", _json(graph(turn.spec)))
        atomic_write(
            artifacts / "trajectory.json",
            _json(
                {
                    **head,
                    "messages": [
                        m.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
                        for m in turn.transcript
                    ],
                }
            ),
        )
