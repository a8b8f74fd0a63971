"""The workspace tests' shared ground: an authoring root with a visible and a hidden skill,
and one tool call through :class:`WorkspaceActivities` with its answer checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.contracts.workspace import WorkspaceToolInput, WorkspaceToolResult

SID = "chat-42"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


def make_authoring(tmp_path: Path) -> Path:
    """An authoring root: skills ``pricing`` (with a script) and ``secret``, and ``AGENTS.md``."""
    root = tmp_path / "authoring"
    (root / "skills" / "pricing" / "scripts").mkdir(parents=True)
    (root / "skills" / "pricing" / "SKILL.md").write_text("---\nname: pricing\n---\nPrice it.\n")
    (root / "skills" / "pricing" / "scripts" / "calc.js").write_text("return 1;\n")
    (root / "skills" / "secret").mkdir()
    (root / "skills" / "secret" / "SKILL.md").write_text("---\nname: secret\n---\nHidden.\n")
    (root / "AGENTS.md").write_text("# Agents\nBe kind.\n")
    return root


async def call(
    ws: WorkspaceActivities,
    tool: str,
    visible: list[str] | None = None,
    max_chars: int = 20_000,
    **arguments: Any,
) -> WorkspaceToolResult:
    """One call of ``tool`` in session :data:`SID`, ``pricing`` visible unless told."""
    method = getattr(ws, tool)
    result: WorkspaceToolResult = await method(
        WorkspaceToolInput(
            session_id=SID,
            tool=tool,
            arguments=arguments,
            visible_skills=["pricing"] if visible is None else visible,
            max_result_chars=max_chars,
        )
    )
    return result


def ok(result: WorkspaceToolResult) -> str:
    """The answer of a call that succeeded."""
    assert result.status == "ok", result.content
    return result.content


def err(result: WorkspaceToolResult) -> str:
    """The answer of a call refused as a tool error."""
    assert result.status == "error", result.content
    assert result.content.startswith("Error: ")
    return result.content
