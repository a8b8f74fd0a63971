"""Loading an authored workflow: ``workflow.yaml`` (strict), ``WORKFLOW.md`` and ``AGENTS.md``.

Parse before you start: the YAML becomes a typed, hashed :class:`WorkflowSpec` on the host,
and the session workflow receives that. The spec hash is key-order insensitive and excludes
``metadata``, so moving a node on a canvas does not change the spec a session runs under; the
order of ``states`` is the one order it keeps, because it decides the machine's entry.

YAML is read fail closed: a key repeated in one mapping is a load error, not "last one wins".
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode

from archmax_temporal.workflows.delegation import granted_targets
from archmax_temporal.workflows.errors import SpecValidationError, UnknownWorkflowError
from archmax_temporal.workflows.hooks import script_path_problem, source_key
from archmax_temporal.workflows.models import DelegateSpec, PromptParts
from archmax_temporal.workflows.spec import SLUG, WorkflowSpec, parse_spec

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_MERGE_TAGS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})


class DuplicateKeyError(ConstructorError):
    """A mapping in the YAML repeats a key (``problem_mark`` points at the repetition)."""

    def __init__(self, key: Any, first: Node, again: Node, mapping: MappingNode) -> None:
        super().__init__(
            "while constructing a mapping",
            mapping.start_mark,
            f"duplicate key {key!r} (first at line {first.start_mark.line + 1}, "
            f"column {first.start_mark.column + 1})",
            again.start_mark,
        )
        self.key = key


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key repeated within one mapping.

    The check runs in ``flatten_mapping``, which sees every mapping once before merge keys
    (``<<: *base``) are folded in, so a key that overrides a merged one is no duplicate.
    """

    def flatten_mapping(self, node: MappingNode) -> None:
        checked: set[int] = self.__dict__.setdefault("_checked_mappings", set())
        if id(node) not in checked:
            checked.add(id(node))
            seen: dict[Any, Node] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag in _MERGE_TAGS:
                    continue
                key = self.construct_object(key_node)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue
                if first is not key_node:
                    raise DuplicateKeyError(key, first, key_node, node)
        super().flatten_mapping(node)


def _read_yaml(text: str) -> Any:
    """One YAML document read with :class:`_UniqueKeyLoader`."""
    loader = _UniqueKeyLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


@dataclass(frozen=True)
class LoadedWorkflow:
    """A workflow ready to run: its slug, typed spec, hash and prompt prose."""

    slug: str
    spec: WorkflowSpec
    spec_hash: str
    prompt: PromptParts
    directory: Path
    hook_sources: dict[str, str] = field(default_factory=dict)
    """Every hook script the spec names and the directory holds: path → source."""


def workflow_slugs(root: Path) -> list[str]:
    """Every ``workflows/<slug>/`` under ``root`` that holds a ``workflow.yaml``, sorted."""
    base = root / "workflows"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / "workflow.yaml").is_file())


def spec_hash(spec: WorkflowSpec) -> str:
    """A stable hash of the governing spec: canonical JSON, sorted keys, no ``metadata``.

    ``states`` is hashed as an ordered list of ``[slug, state]`` pairs: its order decides the
    machine's entry, so it survives the key sorting that makes every other mapping's order moot.
    """
    governing = spec.model_dump(mode="json", by_alias=True, exclude={"metadata"})
    states = governing.pop("states", {})
    for state in states.values():
        state.pop("metadata", None)
    governing["states"] = [[slug, state] for slug, state in states.items()]
    canonical = json.dumps(governing, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def load_workflow(root: Path, slug: str) -> LoadedWorkflow:
    """Load ``workflows/<slug>/`` under ``root``, or raise a typed error naming the problem."""
    source = f"workflows/{slug}/workflow.yaml"
    # Before any filesystem access: a slug such as ``../x`` never probes outside workflows/.
    if not isinstance(slug, str) or not SLUG.match(slug):
        raise SpecValidationError(
            source, [f"<workflow>: workflow slug {slug!r} must be kebab-case"]
        )
    directory = root / "workflows" / slug
    spec_file = directory / "workflow.yaml"
    if not spec_file.is_file():
        known = ", ".join(workflow_slugs(root)) or "(none)"
        raise UnknownWorkflowError(
            f"no workflow {slug!r} under {root / 'workflows'} (workflows: {known})"
        )
    try:
        data = _read_yaml(spec_file.read_text(encoding="utf-8"))
    except DuplicateKeyError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "<root>"
        raise SpecValidationError(source, [f"{where}: {exc.problem}"]) from None
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
            skills=skill_catalog(root),
        ),
        directory=directory,
        hook_sources=hook_sources(spec, directory),
    )


def hook_sources(spec: WorkflowSpec, directory: Path) -> dict[str, str]:
    """The ``script:`` hooks of ``spec`` read from ``directory``, keyed by normal path.

    Snapshotted at load, with the spec, so a session runs the hooks it started with. A path
    that is refused (outside ``hooks/``) or missing is simply absent: the hook vetoes at run.
    """
    sources: dict[str, str] = {}
    base = directory.resolve()
    for state in spec.states.values():
        for hook in [*state.before, *state.after]:
            if hook.script is None or script_path_problem(hook.script) is not None:
                continue
            key = source_key(hook.script)
            path = (directory / key).resolve()
            if key in sources or not path.is_relative_to(base) or not path.is_file():
                continue
            try:
                sources[key] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
    return sources


def load_delegates(root: Path, loaded: LoadedWorkflow) -> dict[str, DelegateSpec]:
    """Every workflow ``loaded`` can reach through ``archmax_workflow_<slug>`` grants,
    transitively and cycle-safe, pinned for the session's whole life.

    Workflow code reads no files, so the session carries its callees' specs the way it
    carries its own. A target that is absent stays out (the call is refused as an unknown
    workflow); one that does not load is kept with its error (refused naming it).
    """
    delegates: dict[str, DelegateSpec] = {}
    queue = granted_targets(loaded.spec)
    while queue:
        slug = queue.pop(0)
        if slug in delegates or slug == loaded.slug:
            continue
        try:
            target = load_workflow(root, slug)
        except UnknownWorkflowError:
            continue
        except SpecValidationError as exc:
            delegates[slug] = DelegateSpec(workflow=slug, load_error=str(exc))
            continue
        delegates[slug] = DelegateSpec(
            workflow=slug, spec=target.spec, spec_hash=target.spec_hash, prompt=target.prompt
        )
        queue.extend(granted_targets(target.spec))
    return delegates


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


def skill_catalog(root: Path) -> dict[str, str]:
    """Every ``skills/<slug>/SKILL.md`` under ``root``: slug → its front matter description."""
    catalog: dict[str, str] = {}
    base = root / "skills"
    if not base.is_dir():
        return catalog
    for skill_md in sorted(base.glob("*/SKILL.md")):
        text = skill_md.read_text(encoding="utf-8")
        description = ""
        if text.startswith("---"):
            front, _, _ = text[3:].partition("\n---")
            try:
                meta = yaml.safe_load(front)
            except yaml.YAMLError:
                meta = None
            if isinstance(meta, dict) and isinstance(meta.get("description"), str):
                description = meta["description"].strip()
        catalog[skill_md.parent.name] = description or "(no description)"
    return catalog
