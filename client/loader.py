"""Loading an authored workflow: ``workflow.yaml`` (strict), ``WORKFLOW.md`` and ``AGENTS.md``.

Parse before you start: the YAML becomes a typed, hashed :class:`WorkflowSpec` on the host,
and the session workflow receives that. The spec hash is key-order insensitive and excludes
``metadata``, so moving a node on a canvas does not change the spec a session runs under.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from workflows.errors import SpecValidationError, UnknownWorkflowError
from workflows.models import PromptParts
from workflows.spec import SLUG, WorkflowSpec, parse_spec

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True)
class LoadedWorkflow:
    """A workflow ready to run: its slug, typed spec, hash and prompt prose."""

    slug: str
    spec: WorkflowSpec
    spec_hash: str
    prompt: PromptParts
    directory: Path


def workflow_slugs(root: Path) -> list[str]:
    """Every ``workflows/<slug>/`` under ``root`` that holds a ``workflow.yaml``, sorted."""
    base = root / "workflows"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / "workflow.yaml").is_file())


def spec_hash(spec: WorkflowSpec) -> str:
    """A stable hash of the governing spec: canonical JSON, sorted keys, no ``metadata``."""
    governing = spec.model_dump(mode="json", by_alias=True, exclude={"metadata"})
    for state in governing.get("states", {}).values():
        state.pop("metadata", None)
    canonical = json.dumps(governing, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def load_workflow(root: Path, slug: str) -> LoadedWorkflow:
    """Load ``workflows/<slug>/`` under ``root``, or raise a typed error naming the problem."""
    directory = root / "workflows" / slug
    spec_file = directory / "workflow.yaml"
    if not spec_file.is_file():
        known = ", ".join(workflow_slugs(root)) or "(none)"
        raise UnknownWorkflowError(
            f"no workflow {slug!r} under {root / 'workflows'} (workflows: {known})"
        )
    source = f"workflows/{slug}/workflow.yaml"
    if not SLUG.match(slug):
        raise SpecValidationError(
            source, [f"<workflow>: workflow slug {slug!r} must be kebab-case"]
        )
    try:
        data = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "<root>"
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecValidationError(source, [f"{where}: YAML does not parse: {problem}"]) from None
    except UnicodeDecodeError as exc:
        raise SpecValidationError(source, [f"<file>: not UTF-8 text ({exc.reason})"]) from None
    spec = parse_spec(data, source)
    return LoadedWorkflow(
        slug=slug,
        spec=spec,
        spec_hash=spec_hash(spec),
        prompt=PromptParts(
            workflow_md=_workflow_md(directory / "WORKFLOW.md", slug),
            agents_md=_read_optional(root / "AGENTS.md"),
        ),
        directory=directory,
    )


def _read_optional(path: Path) -> str | None:
    if not path.is_file():
        return None
    text = _HTML_COMMENT.sub("", path.read_text(encoding="utf-8")).strip()
    return text or None


def _workflow_md(path: Path, slug: str) -> str | None:
    text = _read_optional(path)
    if text is not None and text.startswith("---"):
        raise SpecValidationError(
            f"workflows/{slug}/WORKFLOW.md",
            [
                "<front matter>: WORKFLOW.md is prose only; the machine lives in workflow.yaml "
                "(competing machines)"
            ],
        )
    return text
