"""Loading an authored workflow: ``workflow.yaml`` (strict), ``WORKFLOW.md`` and ``AGENTS.md``.

Parse before you start: the YAML becomes a typed, hashed :class:`WorkflowSpec` on the host,
and the session workflow receives that. The spec hash is key-order insensitive and excludes
``metadata``, so moving a node on a canvas does not change the spec a session runs under; the
order of ``states`` is the one order it keeps, because it decides the machine's entry.

YAML is read fail closed (:func:`read_yaml`, shared with the case files): a key repeated in one
mapping is a load error, not "last one wins"; so is a file over its size limit, nesting past
:data:`YAML_MAX_DEPTH`, a recursive alias, aliases that expand past :data:`YAML_MAX_NODES` or
the file's size, a Python tag and a lone surrogate. Each refusal is a typed error naming the
file, where in it and the limit.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic_core import to_json
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.error import Mark, MarkedYAMLError
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.reader import ReaderError

from archmax_temporal.workflows.delegation import granted_targets
from archmax_temporal.workflows.errors import SpecValidationError, UnknownWorkflowError
from archmax_temporal.workflows.hooks import script_path_problem, source_key
from archmax_temporal.workflows.models import (
    DelegateSpec,
    PromptParts,
    SessionInput,
    TurnSpec,
    spec_on_the_wire,
)
from archmax_temporal.workflows.spec import (
    MAX_SLUG_LENGTH,
    SLUG,
    WorkflowSpec,
    parse_spec,
    shown,
)

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


SESSION_START_MAX_BYTES: Final = 256 * 1024
"""What a session starts with, serialised: the workflow input that carries its spec, prompt
prose (``WORKFLOW.md``, ``AGENTS.md``, the skill catalog), hook sources and the specs of every
workflow it may call. Temporal refuses a payload over 2 MB and warns past 256 KiB; held to the
warning, the spec leaves the rest to what travels beside it (a firing's message, variables and
files, host tool schemas, a test case's mocks). The loader refuses a workflow past it, and
``archmax validate`` reports it, so whatever validates can start a session."""

SKILL_FRONT_MATTER_MAX_BYTES: Final = 64 * 1024
"""How much of the head of a ``SKILL.md`` the skill catalog reads for its front matter; a skill
whose front matter does not close within it, or does not parse, is ``(no description)``."""

SPEC_MAX_BYTES: Final = 1024 * 1024
"""The largest ``workflow.yaml`` the loader reads: 1 MiB. A bigger file is refused before it
is parsed (a spec that can start a session is far smaller: :data:`SESSION_START_MAX_BYTES`)."""

YAML_MAX_DEPTH: Final = 64
"""How deeply the collections of an authored YAML document (a spec, a case) may nest, aliases
expanded. Authored documents nest a dozen levels at most; the limit keeps every recursive walk
(parsing, validation, hashing, serialisation) far from Python's recursion limit."""

YAML_MAX_NODES: Final = 100_000
"""How many nodes an authored YAML document may hold once every alias is expanded. An alias is
cheap to write and expensive to expand: a billion-laughs tree (9 aliases of 9 aliases of ...)
is refused while it is read, long before anything expands it. Aliases may not expand the
document's text past its file size limit either, and a recursive alias is refused outright."""

_SURROGATE = re.compile(r"[\ud800-\udfff]")


class YamlDocumentError(Exception):
    """An authored YAML document that is refused: it does not parse, repeats a key, or passes
    a limit. ``issue`` reads ``"<where>: <problem>"``; the caller raises it as its own typed
    error naming the file (:class:`SpecValidationError`, ``CaseSchemaError``)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem

    @property
    def issue(self) -> str:
        """The refusal as one ``"<where>: <problem>"`` line."""
        return f"{self.where}: {self.problem}"


class _LimitError(MarkedYAMLError):
    """A document passes a limit of :func:`read_yaml` (``problem_mark`` is where)."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a repeated key and a document past the read limits.

    The duplicate check runs in ``flatten_mapping``, which sees every mapping once before merge
    keys (``<<: *base``) are folded in, so a key that overrides a merged one is no duplicate.

    The limits are checked while the document is composed, before anything is constructed:
    each node counts once, each alias counts as the whole node it names (its nodes, its text
    and its height), so an alias bomb fails at the alias that would pass a limit. An alias to
    a node still being composed is recursive and refused.
    """

    def __init__(self, stream: str, max_chars: int) -> None:
        super().__init__(stream)
        self._max_chars = max_chars
        self._depth = 0
        self._deepest = 0
        self._nodes = 0
        self._chars = 0
        self._sizes: dict[int, tuple[int, int, int]] = {}
        """id(anchored node) → (nodes, characters, height), recorded once it is composed."""

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent):
            target = self.anchors.get(event.anchor) if event.anchor is not None else None
            if target is not None:
                size = self._sizes.get(id(target))
                if size is None:
                    raise _LimitError(
                        f"alias *{event.anchor} names a node that contains it "
                        "(a recursive alias is refused)",
                        event.start_mark,
                    )
                nodes, chars, height = size
                self._count(nodes, chars, event.start_mark)
                self._reach(self._depth + height, event.start_mark)
            return super().compose_node(parent, index)
        collection = isinstance(event, SequenceStartEvent | MappingStartEvent)
        nodes, chars, depth, deepest = self._nodes, self._chars, self._depth, self._deepest
        if collection:
            self._depth += 1
            self._reach(self._depth, event.start_mark)
            self._count(1, 0, event.start_mark)
        self._deepest = self._depth
        node = super().compose_node(parent, index)
        if isinstance(node, ScalarNode):
            text = str(node.value)
            surrogate = _SURROGATE.search(text)
            if surrogate is not None:
                raise _LimitError(
                    f"a lone surrogate ({surrogate.group()!r}) is not text", node.start_mark
                )
            self._count(1, len(text), node.start_mark)
        if getattr(event, "anchor", None) is not None and node is not None:
            height = self._deepest - depth
            self._sizes[id(node)] = (self._nodes - nodes, self._chars - chars, height)
        self._depth = depth
        self._deepest = max(deepest, self._deepest)
        return node

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        # The scanner's cost grows with the square of flow nesting (each ``[`` may start a
        # key it keeps open): refuse while scanning, before the composer sees the depth.
        if self.flow_level >= YAML_MAX_DEPTH:
            raise _LimitError(
                f"collections nest deeper than the {YAML_MAX_DEPTH}-level limit", self.get_mark()
            )
        super().fetch_flow_collection_start(TokenClass)

    def _reach(self, depth: int, mark: Any) -> None:
        if depth > YAML_MAX_DEPTH:
            raise _LimitError(
                f"collections nest deeper than the {YAML_MAX_DEPTH}-level limit", mark
            )
        self._deepest = max(self._deepest, depth)

    def _count(self, nodes: int, chars: int, mark: Any) -> None:
        self._nodes += nodes
        self._chars += chars
        if self._nodes > YAML_MAX_NODES:
            raise _LimitError(
                f"more than {YAML_MAX_NODES:,} nodes with aliases expanded (the limit)", mark
            )
        if self._chars > self._max_chars:
            raise _LimitError(
                f"aliases expand the text past {self._max_chars:,} characters "
                "(the file's size limit)",
                mark,
            )

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


def _checked(construct: Callable[[Any, Any], Any], what: str) -> Callable[[Any, Any], Any]:
    """``construct`` with the ValueError it raises for an out-of-range scalar (a 13th month,
    a 5,000-digit integer) turned into a YAML error at the scalar."""

    def checked(loader: Any, node: Any) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(
                None, None, f"{shown(node.value)} is not a valid {what} ({exc})", node.start_mark
            ) from None

    return checked


for _tag, _construct, _what in (
    ("int", SafeConstructor.construct_yaml_int, "integer"),
    ("float", SafeConstructor.construct_yaml_float, "number"),
    ("timestamp", SafeConstructor.construct_yaml_timestamp, "date"),
):
    _UniqueKeyLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _checked(_construct, _what))


def _where(mark: Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "<root>"


def read_yaml(source: Path | bytes | str, *, max_bytes: int, kind: str) -> Any:
    """One authored YAML document (a spec, a case), read fail closed within the limits.

    ``source`` is the file (of which at most ``max_bytes`` + 1 bytes are read), its bytes or
    its text. Refused, as :class:`YamlDocumentError` naming where and the limit: a file over
    ``max_bytes`` (``kind`` names the file in the message: ``"a workflow.yaml"``), bytes that
    are not UTF-8, YAML that does not parse, a key repeated in one mapping, collections nested
    past :data:`YAML_MAX_DEPTH`, a recursive alias, aliases expanding past
    :data:`YAML_MAX_NODES` nodes or past ``max_bytes`` characters of text, a tag with no safe
    constructor (``!!python/...``), an out-of-range scalar and a lone surrogate. Nothing else
    escapes it: no RecursionError, no ValueError.
    """
    if isinstance(source, Path):
        source = _read_bounded(source, max_bytes, kind)
    if isinstance(source, bytes):
        size = len(source)
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise YamlDocumentError("<file>", f"not UTF-8 text ({exc.reason})") from None
    else:
        text = source
        size = len(text) if len(text) > max_bytes else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise YamlDocumentError("<file>", _too_big(f"{size:,}", max_bytes, kind))
    loader: _UniqueKeyLoader | None = None
    try:
        loader = _UniqueKeyLoader(text, max_bytes)  # its reader refuses control characters
        return loader.get_single_data()
    except (DuplicateKeyError, _LimitError) as exc:
        raise YamlDocumentError(_where(exc.problem_mark), str(exc.problem)) from None
    except ReaderError as exc:  # a character YAML does not allow: a position, no mark
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        character = f"#x{exc.character:04x}" if isinstance(exc.character, int) else "a byte"
        raise YamlDocumentError(
            f"line {line}, column {column}",
            f"YAML does not parse: unacceptable character {character}: {exc.reason}",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise YamlDocumentError(_where(mark), f"YAML does not parse: {problem}") from None
    except RecursionError:
        raise YamlDocumentError(
            "<root>", f"nests too deeply to read (the limit is {YAML_MAX_DEPTH} levels)"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def _read_bounded(path: Path, max_bytes: int, kind: str) -> bytes:
    """The bytes of ``path``, refused past ``max_bytes`` without reading the rest."""
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
        if len(data) <= max_bytes:
            return data
        size = f"{path.stat().st_size:,}"
    except OSError as exc:
        raise YamlDocumentError("<file>", f"cannot be read ({exc.strerror})") from None
    raise YamlDocumentError("<file>", _too_big(size, max_bytes, kind))


def _too_big(size: str, max_bytes: int, kind: str) -> str:
    return f"{size} bytes is over the {max_bytes:,}-byte limit of {kind}"


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


def workflow_slug_problem(slug: object) -> str | None:
    """Why ``slug`` cannot name a workflow (``<workflow>: ...``), or None: it is kebab-case and
    at most :data:`MAX_SLUG_LENGTH` characters, so it never probes outside ``workflows/`` nor
    makes a path the filesystem refuses."""
    if not isinstance(slug, str) or not SLUG.match(slug):
        return f"<workflow>: workflow slug {shown(slug)} must be kebab-case"
    if len(slug) > MAX_SLUG_LENGTH:
        return (
            f"<workflow>: workflow slug {shown(slug)} is {len(slug):,} characters; "
            f"the limit is {MAX_SLUG_LENGTH}"
        )
    return None


def load_workflow(root: Path, slug: str) -> LoadedWorkflow:
    """Load ``workflows/<slug>/`` under ``root``, or raise a typed error naming the problem."""
    named = str(slug) if len(str(slug)) <= MAX_SLUG_LENGTH else f"{str(slug)[:MAX_SLUG_LENGTH]}…"
    source = f"workflows/{named}/workflow.yaml"
    # Before any filesystem access: a slug such as ``../x`` never probes outside workflows/.
    problem = workflow_slug_problem(slug)
    if problem is not None:
        raise SpecValidationError(source, [problem])
    directory = root / "workflows" / slug
    spec_file = directory / "workflow.yaml"
    if not spec_file.is_file():
        known = ", ".join(workflow_slugs(root)) or "(none)"
        raise UnknownWorkflowError(
            f"no workflow {slug!r} under {root / 'workflows'} (workflows: {known})"
        )
    try:
        data = read_yaml(spec_file, max_bytes=SPEC_MAX_BYTES, kind="a workflow.yaml")
    except YamlDocumentError as exc:
        raise SpecValidationError(source, [exc.issue]) from None
    spec = parse_spec(data, source)
    loaded = LoadedWorkflow(
        slug=slug,
        spec=spec,
        spec_hash=spec_hash(spec),
        prompt=PromptParts(
            workflow_md=_workflow_md(directory / "WORKFLOW.md", slug),
            agents_md=_read_optional(root / "AGENTS.md", "AGENTS.md"),
            skills=skill_catalog(root),
        ),
        directory=directory,
        hook_sources=hook_sources(spec, directory),
    )
    problem = session_start_problem(loaded)
    if problem is not None:
        raise SpecValidationError(source, [problem])
    return loaded


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
            try:
                path = (directory / key).resolve()
                if key in sources or not path.is_relative_to(base) or not path.is_file():
                    continue
                sources[key] = path.read_text(encoding="utf-8")
            except (OSError, ValueError, RuntimeError):
                continue
    return sources


def load_delegates(
    root: Path, loaded: LoadedWorkflow, *, check_size: bool = True
) -> dict[str, DelegateSpec]:
    """Every workflow ``loaded`` can reach through ``archmax_workflow_<slug>`` grants,
    transitively and cycle-safe, pinned for the session's whole life.

    Workflow code reads no files, so the session carries its callees' specs the way it
    carries its own. A target that is absent stays out (the call is refused as an unknown
    workflow); one that does not load is kept with its error (refused naming it).

    With ``check_size`` (the default: a session is about to start with them), a
    :class:`SpecValidationError` when ``loaded`` and its delegates together pass
    :data:`SESSION_START_MAX_BYTES`.
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
    problem = session_start_problem(loaded, delegates) if check_size else None
    if problem is not None:
        raise SpecValidationError(f"workflows/{loaded.slug}/workflow.yaml", [problem])
    return delegates


def turn_spec(loaded: LoadedWorkflow, delegates: dict[str, DelegateSpec]) -> TurnSpec:
    """The workflow as loaded, as a turn runs under it: spec, prose, hooks and callees, with
    the revision that digests all of them (a WORKFLOW.md or hook edit is a new revision even
    where the spec hash stays)."""
    parts = {
        "spec_hash": loaded.spec_hash,
        "prompt": loaded.prompt.model_dump(mode="json"),
        "hook_sources": loaded.hook_sources,
        "delegates": {
            slug: d.model_dump(mode="json", exclude={"spec"}) for slug, d in delegates.items()
        },
    }
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    revision = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]
    return TurnSpec(
        revision=revision,
        spec=loaded.spec,
        spec_hash=loaded.spec_hash,
        prompt=loaded.prompt,
        hook_sources=loaded.hook_sources,
        delegates=delegates,
    )


def session_start_sizes(
    loaded: LoadedWorkflow, delegates: dict[str, DelegateSpec] | None = None
) -> dict[str, int]:
    """What a session of ``loaded`` starts with, in bytes of its serialised workflow input:
    ``total``, and its ``spec``, ``prompt``, ``hooks`` (sources) and ``delegates`` shares."""
    start = SessionInput(
        session_id="",
        workflow=loaded.slug,
        spec=loaded.spec,
        spec_hash=loaded.spec_hash,
        prompt=loaded.prompt,
        hook_sources=loaded.hook_sources,
        delegates=delegates or {},
    )
    return {
        "total": len(to_json(start)),
        "spec": len(to_json(spec_on_the_wire(loaded.spec))),
        "prompt": len(to_json(loaded.prompt)),
        "hooks": len(to_json(loaded.hook_sources)),
        "delegates": len(to_json(delegates or {})),
    }


def session_start_problem(
    loaded: LoadedWorkflow, delegates: dict[str, DelegateSpec] | None = None
) -> str | None:
    """Why a session of ``loaded`` (with ``delegates``) cannot start, or None: the input it
    starts with would pass :data:`SESSION_START_MAX_BYTES` (the message names each share)."""
    sizes = session_start_sizes(loaded, delegates)
    if sizes["total"] <= SESSION_START_MAX_BYTES:
        return None
    shares = ", ".join(
        f"{name} {sizes[name]:,}"
        for name in ("spec", "prompt", "hooks", "delegates")
        if sizes[name] > 2
    )
    return (
        f"<session>: a session of this workflow starts with {sizes['total']:,} bytes "
        f"({shares}); the limit is {SESSION_START_MAX_BYTES:,} bytes"
    )


def _read_optional(path: Path, source: str) -> str | None:
    """The prose of ``path`` without HTML comments, None when absent or blank; a file that is
    no UTF-8 text, or alone passes :data:`SESSION_START_MAX_BYTES`, is refused as ``source``."""
    if not path.is_file():
        return None
    try:
        raw = _read_bounded(path, SESSION_START_MAX_BYTES, "what a session starts with")
        text = raw.decode("utf-8")
    except YamlDocumentError as exc:
        raise SpecValidationError(source, [exc.issue]) from None
    except UnicodeDecodeError as exc:
        raise SpecValidationError(source, [f"<file>: not UTF-8 text ({exc.reason})"]) from None
    text = _HTML_COMMENT.sub("", text).strip()
    return text or None


def _workflow_md(path: Path, slug: str) -> str | None:
    text = _read_optional(path, f"workflows/{slug}/WORKFLOW.md")
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
        description = ""
        try:
            with skill_md.open("rb") as file:
                text = file.read(SKILL_FRONT_MATTER_MAX_BYTES).decode("utf-8", "replace")
        except OSError:
            text = ""
        if text.startswith("---"):
            front, _, _ = text[3:].partition("\n---")
            try:
                meta = read_yaml(
                    front,
                    max_bytes=SKILL_FRONT_MATTER_MAX_BYTES,
                    kind="a SKILL.md front matter",
                )
            except YamlDocumentError:
                meta = None
            if isinstance(meta, dict) and isinstance(meta.get("description"), str):
                description = meta["description"].strip()
        catalog[skill_md.parent.name] = description or "(no description)"
    return catalog
