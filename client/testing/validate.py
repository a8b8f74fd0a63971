"""``archmax validate``: static feedback on a workflow and its cases, with no model calls.

The report gathers every diagnostic at once:

- the spec's load errors (one per issue of :class:`SpecValidationError`, located at the file
  that failed, the issue's dotted path leading its message);
- hooks: a script path outside ``hooks/`` or missing, an import the sandbox forbids, an
  undeclared custom kind, a ``max_iterations`` where it cannot apply;
- lint on a spec that loads: warnings (no root ``instructions``, a branching state without
  ``instructions``, ``disabled: true``) and errors (the human-state rules of harness §2.3,
  ``tests.maxConcurrency`` above 1);
- sub-workflow grants (``archmax_workflow_<slug>``): an unknown target, one that does not
  load or declares no ``manual`` trigger, a self-reference or cycle and a chain deeper than
  the depth bound are errors; a disabled target is a warning;
- what a session would start with (spec, prose, hook sources and the callees' specs) past the
  loader's ``SESSION_START_MAX_BYTES``: an error, as ``run`` refuses it (the spec's own share
  already fails its load), so a workflow that validates can start a session;
- a skill script a state may run that calls ``tools.archmaxWorkflow<Slug>`` for a workflow
  that state does not allow, or that no workflow is called (warnings);
- every case file under ``tests/``: its schema errors, an unknown ``trigger.id``, and a state
  named by ``decide.to``, ``reachedState``, ``parked.state`` or ``trail.to`` that the machine
  does not declare.

A disabled workflow is validated in full: ``validate`` is the static feedback while its suite
is skipped. :func:`render_text` renders a report as the CLI prints it; ``report.model_dump()``
is the ``--json`` document ``{workflow, valid, diagnostics}``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from archmax_temporal.client.loader import (
    LoadedWorkflow,
    load_delegates,
    load_workflow,
    session_start_problem,
    workflow_slug_problem,
    workflow_slugs,
)
from archmax_temporal.client.testing.case_issues import CaseSchemaError
from archmax_temporal.client.testing.case_model import CaseDocument
from archmax_temporal.client.testing.cases import load_case
from archmax_temporal.client.testing.discovery import discover_cases
from archmax_temporal.client.testing.steps import (
    CrashStep,
    DecideStep,
    GradeStep,
    ParkedStep,
    ReachedStateStep,
    TrailAssertionStep,
)
from archmax_temporal.workflows import governance
from archmax_temporal.workflows.delegation import MAX_DEPTH, PREFIX, granted_targets, manual_of
from archmax_temporal.workflows.errors import (
    ForbiddenSandboxImportError,
    SpecValidationError,
    UnknownWorkflowError,
)
from archmax_temporal.workflows.hooks import hook_kind, script_path_problem, source_key
from archmax_temporal.workflows.sandbox import ARCHMAX_RUN
from archmax_temporal.workflows.sandbox_source import camel, prepare
from archmax_temporal.workflows.spec import MANUAL_TRIGGER, WorkflowSpec

DiagnosticLevel = Literal["error", "warning"]


class Diagnostic(BaseModel):
    """One finding: its level, where it is (a file), and what is wrong there."""

    model_config = ConfigDict(frozen=True)

    level: DiagnosticLevel
    location: str
    message: str


class ValidationReport(BaseModel):
    """Every diagnostic of one workflow; ``valid`` when none of them is an error."""

    model_config = ConfigDict(frozen=True)

    workflow: str
    valid: bool
    diagnostics: list[Diagnostic]

    @property
    def errors(self) -> list[Diagnostic]:
        """The error diagnostics, in report order."""
        return [d for d in self.diagnostics if d.level == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        """The warning diagnostics, in report order."""
        return [d for d in self.diagnostics if d.level == "warning"]

    @property
    def exit_code(self) -> int:
        """The CLI's exit status: 1 on any error, else 0."""
        return 0 if self.valid else 1


def validate_workflow(root: Path, slug: str) -> ValidationReport:
    """Validate ``workflows/<slug>/`` under ``root``: its spec and every case file."""
    diagnostics: list[Diagnostic] = []
    spec_file = f"workflows/{slug}/workflow.yaml"
    spec: WorkflowSpec | None = None
    directory = root / "workflows" / slug
    try:
        loaded = load_workflow(root, slug)
    except SpecValidationError as exc:
        diagnostics.extend(_error(exc.source, issue) for issue in exc.issues)
    except UnknownWorkflowError as exc:
        diagnostics.append(_error(f"workflows/{slug}", str(exc)))
        return _report(slug, diagnostics)
    else:
        spec = loaded.spec
        directory = loaded.directory
        diagnostics.extend(lint_spec(spec, spec_file))
        diagnostics.extend(lint_hooks(spec, directory, spec_file))
        diagnostics.extend(_sub_workflow_diagnostics(root, loaded, spec_file))
        diagnostics.extend(lint_script_dispatches(root, spec))
    # A malformed slug (``../x``, 300 characters) never probes the filesystem.
    if workflow_slug_problem(slug) is None and (directory / "workflow.yaml").is_file():
        diagnostics.extend(_case_diagnostics(directory, slug, spec))
    return _report(slug, diagnostics)


def lint_spec(spec: WorkflowSpec, location: str) -> list[Diagnostic]:
    """The lint of a spec that loads: the warnings and the errors a load does not raise."""
    found: list[Diagnostic] = []
    if spec.instructions is None:
        found.append(
            _warning(
                location,
                "instructions: the workflow has no root instructions (standing guidance for "
                "the whole session)",
            )
        )
    if spec.disabled:
        found.append(
            _warning(
                location,
                "disabled: the workflow is disabled: it starts no new turns and archmax test "
                "skips its cases",
            )
        )
    for slug, state in spec.states.items():
        where = f"states.{slug}"
        if state.is_human:
            found.extend(_human_state(where, slug, spec, location))
        elif len(state.transitions) > 1 and state.instructions is None:
            found.append(
                _warning(
                    location,
                    f"{where}: {len(state.transitions)} transitions and no instructions: the "
                    "agent is told only the edges' descriptions when choosing between them",
                )
            )
    concurrency = spec.tests.max_concurrency
    if concurrency is not None and concurrency > 1:
        found.append(
            _error(
                location,
                f"tests.maxConcurrency: {concurrency} is not supported: case concurrency is "
                "unimplemented and cases run sequentially (use 1 or omit it)",
            )
        )
    return found


def lint_hooks(spec: WorkflowSpec, directory: Path, location: str) -> list[Diagnostic]:
    """Hook declarations the runtime would veto on: a script path outside ``hooks/`` or
    missing, a forbidden import, an undeclared custom kind, a misplaced ``max_iterations``."""
    found: list[Diagnostic] = []
    for slug, state in spec.states.items():
        if state.is_human:
            continue  # its hooks are an error of their own (a human state takes none)
        for phase in ("before", "after"):
            for index, hook in enumerate(getattr(state, phase)):
                where = f"states.{slug}.{phase}.{index}"
                kind, custom = hook_kind(hook)
                if hook.max_iterations is not None and (phase == "before" or kind == "rubric"):
                    found.append(
                        _error(
                            location,
                            f"{where}.max_iterations: "
                            + (
                                "a before hook cannot correct, so it has no budget"
                                if phase == "before"
                                else "a rubric's budget lives inside its declaration"
                            ),
                        )
                    )
                if kind == "custom" and custom not in spec.extensions.hooks:
                    found.append(
                        _error(
                            location,
                            f"{where}: hook kind {custom!r} is not declared in extensions.hooks",
                        )
                    )
                if kind == "script" and hook.script is not None:
                    found.extend(_script_hook(hook.script, f"{where}.script", directory))
    return found


def _script_hook(path: str, where: str, directory: Path) -> list[Diagnostic]:
    location = f"{directory.parent.name}/{directory.name}/{path}"
    problem = script_path_problem(path)
    if problem is not None:
        return [_error(f"workflows/{directory.name}/workflow.yaml", f"{where}: {problem}")]
    file = directory / source_key(path)
    try:
        found = file.is_file()
    except (OSError, ValueError):
        found = False
    if not found:
        return [_error(f"workflows/{directory.name}/workflow.yaml", f"{where}: {path} not found")]
    try:
        prepare(file.read_text(encoding="utf-8"), path)
    except ForbiddenSandboxImportError as exc:
        return [_error(location, str(exc))]
    except (OSError, UnicodeDecodeError) as exc:
        return [_error(location, f"cannot read the hook script: {exc}")]
    return []


_SCRIPT_DISPATCH = re.compile(r"\btools\.(archmaxWorkflow[A-Za-z0-9]+)\b")
"""A script's sub-workflow call as the bridge spells it."""


def lint_script_dispatches(root: Path, spec: WorkflowSpec) -> list[Diagnostic]:
    """Scripts a state may ``archmax_run`` that call a sub-workflow that state does not allow.

    At run time such a call is refused (or, for a workflow no state grants, rejects as not
    available); found here, statically, from the scripts of every skill the state enables.
    """
    found: list[Diagnostic] = []
    callable_by_camel = {camel(f"{PREFIX}{slug}"): slug for slug in workflow_slugs(root)}
    for state in spec.states:
        for skill in sorted(governance.enabled_skills(spec, state)):
            scripts = root / "skills" / skill / "scripts"
            for file in sorted(scripts.rglob("*.js")) if scripts.is_dir() else []:
                path = file.relative_to(root).as_posix()
                if not governance.decide(spec, state, ARCHMAX_RUN, {"file_path": path}, {}).allowed:
                    continue
                try:
                    text = file.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                for name in sorted(set(_SCRIPT_DISPATCH.findall(text))):
                    slug = callable_by_camel.get(name)
                    if slug is None:
                        found.append(
                            _warning(
                                path, f"tools.{name}: no workflow under workflows/ is called so"
                            )
                        )
                    elif not governance.decide(spec, state, f"{PREFIX}{slug}", {}, {}).allowed:
                        found.append(
                            _warning(
                                path,
                                f"tools.{name}: state {state!r} runs this script but does not "
                                f"allow {PREFIX}{slug}; the call would be blocked",
                            )
                        )
    return found


def _sub_workflow_diagnostics(
    root: Path, loaded: LoadedWorkflow, location: str
) -> list[Diagnostic]:
    """What a dispatch would refuse, found statically over the pinned snapshot."""
    found: list[Diagnostic] = []
    delegates = load_delegates(root, loaded, check_size=False)
    too_big = session_start_problem(loaded, delegates)
    if too_big is not None:
        found.append(_error(location, too_big))
    for slug in granted_targets(loaded.spec):
        tool = f"{PREFIX}{slug}"
        delegate = delegates.get(slug)
        if slug == loaded.slug:
            found.append(_error(location, f"{tool}: a workflow cannot call itself"))
        elif delegate is None:
            found.append(_error(location, f"{tool}: no workflow {slug!r} under workflows/"))
        elif delegate.spec is None:
            found.append(_error(location, f"{tool}: workflow {slug!r} does not load"))
        elif manual_of(delegate) is None:
            found.append(_error(location, f"{tool}: workflow {slug!r} declares no manual trigger"))
        elif delegate.spec.disabled:
            found.append(_warning(location, f"{tool}: workflow {slug!r} is disabled"))
    graph = {slug: granted_targets(d.spec) for slug, d in delegates.items() if d.spec is not None}
    graph[loaded.slug] = granted_targets(loaded.spec)

    def walk(slug: str, chain: list[str]) -> list[Diagnostic]:
        for target in graph.get(slug, []):
            if target in chain:
                cycle = " → ".join([*chain, target])
                return [_error(location, f"sub-workflows: cycle {cycle}")]
            if len(chain) > MAX_DEPTH:
                path = " → ".join([*chain, target])
                return [_error(location, f"sub-workflows: {path} is deeper than {MAX_DEPTH}")]
            if target in graph:
                problems = walk(target, [*chain, target])
                if problems:
                    return problems
        return []

    return found + [d for d in walk(loaded.slug, [loaded.slug]) if d not in found]


def _human_state(where: str, slug: str, spec: WorkflowSpec, location: str) -> list[Diagnostic]:
    state = spec.states[slug]
    found: list[Diagnostic] = []
    if state.instructions is None:
        found.append(
            _error(location, f"{where}: a human state must declare instructions for the reviewer")
        )
    if not state.transitions:
        found.append(
            _error(location, f"{where}: a human state needs at least one transition to decide")
        )
    labelled = Counter(t.type for t in state.transitions if t.type != "none")
    for label, count in labelled.items():
        if count > 1:
            found.append(
                _error(
                    location,
                    f"{where}.transitions: {count} transitions of type {label!r}; a human "
                    "state has at most one of each labelled type",
                )
            )
    for index, transition in enumerate(state.transitions):
        if transition.to == slug:
            found.append(
                _error(
                    location,
                    f"{where}.transitions.{index}.to: a human state cannot transition to itself",
                )
            )
    for phase in ("before", "after"):
        if getattr(state, phase):
            found.append(
                _error(location, f"{where}.{phase}: a human state takes no lifecycle hooks")
            )
    return found


def _case_diagnostics(directory: Path, slug: str, spec: WorkflowSpec | None) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    tests_dir = directory / "tests"
    seeded: set[str] = set()
    for case in discover_cases(directory):
        location = f"workflows/{slug}/tests/{case.file}"
        try:
            document = load_case(case, tests_dir)
        except CaseSchemaError as exc:
            found.extend(_error(location, issue) for issue in exc.issues)
            continue
        seeded.update(document.variables)
        if spec is not None:
            found.extend(lint_case(document, spec, location))
    if spec is not None:
        found.extend(lint_references(spec, f"workflows/{slug}/workflow.yaml", seeded))
    return found


_GUARD_REFERENCE = re.compile(r"(\$?)\$\{\{\s*([^{}]*?)\s*\}\}")
"""A ``${{name.path}}`` reference in a guard (``$${{…}}`` is literal text, not a reference)."""


def guard_references(spec: WorkflowSpec) -> list[tuple[str, str]]:
    """Every ``${{…}}`` reference of the spec's tool guards (``tools.allow`` / ``forbid`` of a
    state, ``allow_always`` / ``forbid_always`` at the root), as ``(where, variable)``."""
    found: list[tuple[str, str]] = []

    def scan(where: str, entries: list[Any]) -> None:
        for index, entry in enumerate(entries):
            if isinstance(entry, str):
                continue
            texts: list[str] = [*(entry.paths or [])]
            for pattern in (entry.args or {}).values():
                texts.extend(pattern if isinstance(pattern, list) else [pattern])
            for text in texts:
                for literal, reference in _GUARD_REFERENCE.findall(text):
                    name = reference.split(".")[0].strip()
                    if not literal and name:
                        found.append((f"{where}.{index}", name))

    scan("tools.allow_always", list(spec.tools.allow_always))
    scan("tools.forbid_always", list(spec.tools.forbid_always))
    for slug, state in spec.states.items():
        scan(f"states.{slug}.tools.allow", list(state.tools.allow))
        scan(f"states.{slug}.tools.forbid", list(state.tools.forbid))
    return found


def guaranteed_variables(spec: WorkflowSpec) -> set[str]:
    """The variables something guarantees before a guard reads them: ``trigger``, every
    trigger's ``requires`` and every state's ``requires``."""
    names = {"trigger"}
    for state in spec.states.values():
        names.update(state.requires)
        for declaration in state.triggers.values():
            names.update(e if isinstance(e, str) else e.name for e in declaration.requires)
    return names


def lint_references(spec: WorkflowSpec, location: str, seeded: set[str]) -> list[Diagnostic]:
    """A warning per guard reference nothing guarantees: no trigger ``requires`` it, no
    state ``requires`` it, no case seeds it (and it is not ``trigger``). Such a guard is
    unresolvable at run time unless the host seeds the name, and an unresolved guard is a
    turn failure."""
    guaranteed = guaranteed_variables(spec) | seeded
    found: list[Diagnostic] = []
    for where, name in guard_references(spec):
        if name in guaranteed:
            continue
        found.append(
            _warning(
                location,
                f"{where}: ${{{{{name}}}}} is guaranteed by nothing: no trigger or state "
                "requires it and no case seeds it; declare it in a requires: list (or make "
                "sure every host seeds it)",
            )
        )
    return found


def _runs_hooks(spec: WorkflowSpec) -> bool:
    """Whether some state runs a hook as an activity of its own (a script or a custom kind;
    a rubric is a model call)."""
    return any(
        hook.script is not None or hook.model_extra
        for state in spec.states.values()
        for hook in (*state.before, *state.after)
    )


def lint_case(document: CaseDocument, spec: WorkflowSpec, location: str) -> list[Diagnostic]:
    """A schema-valid case checked against the machine it drives."""
    found: list[Diagnostic] = []
    declared = spec.trigger_ids()
    if document.trigger is not None:
        trigger_id = document.trigger.id
        if trigger_id not in declared and trigger_id != MANUAL_TRIGGER:
            found.append(
                _error(
                    location,
                    f"trigger.id: unknown trigger {trigger_id!r}; declared triggers: "
                    f"{', '.join(declared) or '(none)'}",
                )
            )
    states = ", ".join(spec.states)
    for step in document.steps:
        where = f"steps[{step.index}].{step.kind}"
        named: list[tuple[str, str]] = []
        if isinstance(step, DecideStep):
            named.append((f"{where}.to", step.to))
        elif isinstance(step, ReachedStateStep):
            named.append((where, step.state))
        elif isinstance(step, ParkedStep) and step.state is not None:
            named.append((f"{where}.state", step.state))
        elif isinstance(step, TrailAssertionStep) and step.to is not None:
            named.append((f"{where}.to", step.to))
        elif isinstance(step, GradeStep):
            if step.written_as == "judge":
                where = f"steps[{step.index}].judge"
                found.append(
                    _warning(location, f"{where}: judge: is a deprecated alias; write grade:")
                )
            if spec.tests.judge is None:
                found.append(
                    _warning(
                        location,
                        f"{where}: a grade needs tests: {{ judge: {{}} }} in workflow.yaml; "
                        "without it the assertion fails",
                    )
                )
        if isinstance(step, CrashStep) and step.during == "hook" and not _runs_hooks(spec):
            found.append(
                _warning(
                    location,
                    f"{where}.during: the workflow declares no script or custom hook, so a "
                    "crash during hook never strikes (and fails its record)",
                )
            )
        for path, state in named:
            if state not in spec.states:
                found.append(
                    _error(location, f"{path}: undeclared state {state!r}; states: {states}")
                )
    return found


def render_text(report: ValidationReport) -> tuple[list[str], str]:
    """The report as the CLI prints it: diagnostic lines for stderr, one line for stdout."""
    lines = [
        f"✖ error [{d.location}] {d.message}"
        if d.level == "error"
        else f"⚠ warn [{d.location}] {d.message}"
        for d in report.diagnostics
    ]
    verdict = "valid" if report.valid else "invalid"
    summary = f"{verdict} — {len(report.errors)} error(s), {len(report.warnings)} warning(s)"
    return lines, summary


def _report(slug: str, diagnostics: list[Diagnostic]) -> ValidationReport:
    valid = not any(d.level == "error" for d in diagnostics)
    return ValidationReport(workflow=slug, valid=valid, diagnostics=diagnostics)


def _error(location: str, message: str) -> Diagnostic:
    return Diagnostic(level="error", location=location, message=message)


def _warning(location: str, message: str) -> Diagnostic:
    return Diagnostic(level="warning", location=location, message=message)
