"""Untrusted authored input never wedges, closes or fakes a session: a hostile ``workflow.yaml``
or case file ends in a typed error naming what is wrong, or loads into something a session
can start with. Nothing else escapes: no RecursionError, no OSError, no 2 GB payload.

Two halves: a bounded, derandomized fuzz over mutations of the repository's own examples
(``tests/support/fuzz_mutations.py``), and one regression test per input that once gave a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.contrib.pydantic import pydantic_data_converter

from archmax_temporal.client.loader import (
    SESSION_START_MAX_BYTES,
    SPEC_MAX_BYTES,
    YAML_MAX_DEPTH,
    YAML_MAX_NODES,
    LoadedWorkflow,
    YamlDocumentError,
    load_delegates,
    load_workflow,
    read_yaml,
    session_start_sizes,
    spec_hash,
)
from archmax_temporal.client.testing.case_issues import CaseSchemaError
from archmax_temporal.client.testing.case_model import CaseDocument
from archmax_temporal.client.testing.cases import (
    CASE_MAX_BYTES,
    CASE_PAYLOAD_MAX_BYTES,
    load_case,
    parse_case,
    payload_problems,
)
from archmax_temporal.client.testing.discovery import DiscoveredCase
from archmax_temporal.client.testing.validate import validate_workflow
from archmax_temporal.workflows.errors import SpecValidationError, UnknownWorkflowError
from archmax_temporal.workflows.models import DelegateSpec, SessionInput
from archmax_temporal.workflows.spec import (
    MAX_INSTRUCTIONS_LENGTH,
    MAX_SLUG_LENGTH,
    MAX_STATES,
    WorkflowSpec,
    parse_spec,
)
from tests.support.fuzz_mutations import KINDS, SPLICES, mutated
from tests.support.paths import EXAMPLES

TEMPORAL_PAYLOAD_LIMIT = 2 * 1024 * 1024
"""Temporal refuses a payload past this (its blob size limit)."""

FUZZ = settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
"""Bounded and reproducible: the same few examples of each mutation kind on every run."""

SPECS = sorted(p.relative_to(EXAMPLES) for p in EXAMPLES.glob("*/workflows/*/workflow.yaml"))
CASES = sorted(p.relative_to(EXAMPLES) for p in EXAMPLES.glob("*/workflows/*/tests/*.test.yaml"))

BASE = """\
title: Limits
instructions: Answer the request.
states:
  start:
    triggers: { manual: }
    instructions: Answer, then stop.
"""


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of ``examples/``: each fuzzed document is written over its original and
    put back after the example."""
    target = tmp_path_factory.mktemp("fuzz") / "examples"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("sessions", ".archmax"))
    return target


def _starts(loaded: LoadedWorkflow, delegates: dict[str, DelegateSpec]) -> None:
    """What ``client/host.py`` sends to start a session fits its payload and survives the
    trip the worker makes it take."""
    start = SessionInput(
        session_id="session-fuzz",
        workflow=loaded.slug,
        spec=loaded.spec,
        spec_hash=loaded.spec_hash,
        prompt=loaded.prompt,
        hook_sources=loaded.hook_sources,
        delegates=delegates,
    )
    [payload] = pydantic_data_converter.payload_converter.to_payloads([start])
    assert len(payload.data) <= SESSION_START_MAX_BYTES < TEMPORAL_PAYLOAD_LIMIT
    [back] = pydantic_data_converter.payload_converter.from_payloads([payload], [SessionInput])
    assert (back.spec, back.prompt, back.hook_sources) == (
        start.spec,
        start.prompt,
        start.hook_sources,
    )  # the spec without its defaults on the wire reads back equal, and hashes the same
    assert spec_hash(back.spec) == loaded.spec_hash
    assert back.delegates.keys() == start.delegates.keys()


def _loads_or_refuses(root: Path, slug: str) -> None:
    """The workflow loads or is refused typed; validate never raises, and what it accepts
    starts."""
    loaded: LoadedWorkflow | None = None
    try:
        loaded = load_workflow(root, slug)
    except SpecValidationError as exc:
        assert exc.issues and all(": " in issue for issue in exc.issues)
    except UnknownWorkflowError:
        pass
    report = validate_workflow(root, slug)
    assert all("\n" not in d.message for d in report.diagnostics)
    if loaded is None:
        assert not report.valid
    if report.valid:
        assert loaded is not None
        _starts(loaded, load_delegates(root, loaded))


def _case_parses_or_refuses(path: Path, tests_dir: Path) -> None:
    case = DiscoveredCase(id=path.name.removesuffix(".test.yaml"), path=path)
    try:
        document = load_case(case, tests_dir)
    except CaseSchemaError as exc:
        assert exc.issues and all(": " in issue for issue in exc.issues)
        return
    assert payload_problems(document) == []
    mocks = pydantic_data_converter.payload_converter.to_payloads([document.mocks])
    assert len(mocks[0].data) <= CASE_PAYLOAD_MAX_BYTES


class TestFuzzedInput:
    @pytest.mark.parametrize("kind", KINDS)
    @FUZZ
    @given(data=st.data())
    def test_a_mutated_spec_loads_or_is_refused_with_a_typed_error(
        self, examples: Path, kind: str, data: st.DataObject
    ) -> None:
        """Deep nesting, aliases, recursion, huge strings, long names, wrong types, unicode
        and byte flips over every example spec: a typed error or a startable session."""
        relative = data.draw(st.sampled_from(SPECS), label="spec")
        spec_file = examples / relative
        original = spec_file.read_bytes()
        document = data.draw(mutated(original.decode("utf-8"), kind), label="document")
        spec_file.write_bytes(document)
        try:
            _loads_or_refuses(spec_file.parents[2], spec_file.parent.name)
        finally:
            spec_file.write_bytes(original)

    @pytest.mark.parametrize("kind", KINDS)
    @FUZZ
    @given(data=st.data())
    def test_a_mutated_case_parses_or_is_refused_with_a_typed_error(
        self, examples: Path, kind: str, data: st.DataObject
    ) -> None:
        """The same mutations over every example case: a CaseSchemaError, or a document whose
        payloads fit; validating its workflow never raises."""
        relative = data.draw(st.sampled_from(CASES), label="case")
        case_file = examples / relative
        original = case_file.read_bytes()
        document = data.draw(mutated(original.decode("utf-8"), kind), label="document")
        case_file.write_bytes(document)
        try:
            _case_parses_or_refuses(case_file, case_file.parent)
            workflow_dir = case_file.parents[1]
            validate_workflow(workflow_dir.parents[1], workflow_dir.name)
        finally:
            case_file.write_bytes(original)

    @pytest.mark.parametrize("snippet", range(len(SPLICES)))
    @pytest.mark.parametrize("as_key", [False, True], ids=["value", "key"])
    def test_every_splice_into_a_spec_and_a_case(
        self, tmp_path: Path, snippet: int, as_key: bool
    ) -> None:
        """Each raw splice (depth, alias bombs, tags, escapes) as a value and as a key."""
        raw = SPLICES[snippet]
        line = f"{raw}: x\n" if as_key else f"metadata: {raw}\n"
        _loads_or_refuses(_spec_root(tmp_path, BASE + line), "w")
        case = tmp_path / "workflows" / "w" / "tests" / "splice.test.yaml"
        case.parent.mkdir()
        case.write_text(CASE + (line if as_key else f"variables: {{ v: {raw} }}\n"))
        _case_parses_or_refuses(case, case.parent)
        validate_workflow(tmp_path, "w")

    @settings(FUZZ, max_examples=150)
    @given(st.binary(max_size=200) | st.text(max_size=200))
    def test_any_bytes_or_text_read_as_yaml_or_are_refused(self, source: bytes | str) -> None:
        """The reader's whole contract: a value, or YamlDocumentError."""
        try:
            read_yaml(source, max_bytes=SPEC_MAX_BYTES, kind="a workflow.yaml")
        except YamlDocumentError as exc:
            assert exc.issue.startswith(exc.where)

    @settings(FUZZ, max_examples=100)
    @given(
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=6), inner, max_size=4)
            ),
            max_leaves=20,
        )
    )
    def test_any_parsed_value_is_a_spec_or_a_spec_validation_error(self, value: object) -> None:
        """``parse_spec`` over arbitrary YAML values (a states mapping included)."""
        for data in (value, {"states": value}, {"states": {"start": value}}):
            try:
                parse_spec(data)
            except SpecValidationError as exc:
                assert exc.issues


def _spec_root(tmp_path: Path, text: str | bytes, slug: str = "w") -> Path:
    directory = tmp_path / "workflows" / slug
    directory.mkdir(parents=True)
    target = directory / "workflow.yaml"
    if isinstance(text, bytes):
        target.write_bytes(text)
    else:
        target.write_text(text, encoding="utf-8")
    return tmp_path


def _only_issue(root: Path, slug: str = "w") -> str:
    with pytest.raises(SpecValidationError) as caught:
        load_workflow(root, slug)
    [issue] = caught.value.issues
    return issue


def _laughs(levels: int = 9, width: int = 9) -> str:
    lines = [f"  l0: &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * width)
        lines.append(f"  l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


REFUSED_SPECS = {
    "3000-deep-nesting": (
        BASE + "metadata: " + "[" * 3000 + "]" * 3000 + "\n",
        f"collections nest deeper than the {YAML_MAX_DEPTH}-level limit",
    ),
    "recursive-alias": (
        BASE + "metadata: &loop { again: *loop }\n",
        "alias *loop names a node that contains it (a recursive alias is refused)",
    ),
    "300-character-skill": (
        BASE + f"skills: {{ allow_always: [{'a' * 300}] }}\n",
        f"skills.allow_always.0: skill '{'a' * 37}…' is 300 characters; "
        f"the limit is {MAX_SLUG_LENGTH}",
    ),
    "billion-laughs": (
        BASE + "metadata:\n" + _laughs(),
        f"more than {YAML_MAX_NODES:,} nodes with aliases expanded (the limit)",
    ),
    "3mb-instructions": (
        BASE.replace("Answer the request.", "x" * 3_000_000),
        f"bytes is over the {SPEC_MAX_BYTES:,}-byte limit of a workflow.yaml",
    ),
}
"""The inputs of the issue that gave a traceback, each with the refusal it now gets."""


class TestRefusedWithTheLimit:
    """Each input that once gave a traceback (or passed validate and could not run) is now
    one typed issue naming the limit, from the loader and from ``archmax validate``."""

    @pytest.mark.parametrize("name", sorted(REFUSED_SPECS))
    def test_the_loader_refuses_it_naming_the_limit(self, tmp_path: Path, name: str) -> None:
        text, expected = REFUSED_SPECS[name]
        issue = _only_issue(_spec_root(tmp_path, text))
        assert expected in issue

    @pytest.mark.parametrize("name", sorted(REFUSED_SPECS))
    def test_archmax_validate_exits_one_with_one_line(self, tmp_path: Path, name: str) -> None:
        text, expected = REFUSED_SPECS[name]
        root = _spec_root(tmp_path, text)
        env = {**os.environ, "ARCHMAX_ROOT": str(root), "NO_COLOR": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "archmax_temporal", "validate", "w"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        [line] = done.stderr.splitlines()
        assert line.startswith("✖ error [workflows/w/workflow.yaml] ") and expected in line
        assert done.stdout.strip() == "invalid — 1 error(s), 0 warning(s)"

    def test_a_300_character_workflow_slug_is_one_line_too(self, tmp_path: Path) -> None:
        """The slug names a folder: past the limit it is refused before any path is built."""
        env = {**os.environ, "ARCHMAX_ROOT": str(tmp_path), "NO_COLOR": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "archmax_temporal", "validate", "a" * 300],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr
        [line] = done.stderr.splitlines()
        assert f"is 300 characters; the limit is {MAX_SLUG_LENGTH}" in line

    def test_instructions_within_the_file_but_past_their_limit(self, tmp_path: Path) -> None:
        text = BASE.replace("Answer the request.", "x" * (MAX_INSTRUCTIONS_LENGTH + 1))
        issue = _only_issue(_spec_root(tmp_path, text))
        assert issue == (
            f"instructions: {MAX_INSTRUCTIONS_LENGTH + 1:,} characters; "
            f"the limit is {MAX_INSTRUCTIONS_LENGTH:,}"
        )

    def test_more_states_than_the_limit(self, tmp_path: Path) -> None:
        states = "".join(f"  s{n}:\n    instructions: Go.\n" for n in range(MAX_STATES))
        issue = _only_issue(_spec_root(tmp_path, BASE + states))
        assert issue == f"states: {MAX_STATES + 1} states; the limit is {MAX_STATES}"

    def test_a_running_sessions_spec_is_not_judged_by_the_limits(self) -> None:
        """The limits bind authored YAML; a session's input decodes with whatever spec it
        started with, so a session begun before a limit existed keeps running."""
        data = yaml.safe_load(BASE)
        data["instructions"] = "x" * (MAX_INSTRUCTIONS_LENGTH + 1)
        with pytest.raises(SpecValidationError):
            parse_spec(data)
        start = SessionInput(
            session_id="s", workflow="w", spec=WorkflowSpec.model_validate(data), spec_hash="h"
        )
        converter = pydantic_data_converter.payload_converter
        [back] = converter.from_payloads(converter.to_payloads([start]), [SessionInput])
        assert back.spec.instructions == data["instructions"]

    def test_fields_within_their_limits_past_the_session_budget(self, tmp_path: Path) -> None:
        """Every field fits, the whole does not: refused naming the size and the budget."""
        per_state = MAX_INSTRUCTIONS_LENGTH - 100
        count = SESSION_START_MAX_BYTES // per_state + 1
        states = "".join(f"  s{n}:\n    instructions: {'y' * per_state}\n" for n in range(count))
        root = _spec_root(tmp_path, BASE + states)
        issue = _only_issue(root)
        assert issue.startswith("<session>: a session of this workflow starts with ")
        assert issue.endswith(f"; the limit is {SESSION_START_MAX_BYTES:,} bytes")
        report = validate_workflow(root, "w")
        assert [d.message for d in report.errors] == [issue]

    def test_hook_sources_count_toward_the_budget(self, tmp_path: Path) -> None:
        spec = BASE + "    before: { script: hooks/big.js }\n"
        root = _spec_root(tmp_path, spec)
        hooks = root / "workflows" / "w" / "hooks"
        hooks.mkdir()
        (hooks / "big.js").write_text("// " + "z" * SESSION_START_MAX_BYTES + "\n")
        issue = _only_issue(root)
        assert "(spec " in issue and ", hooks 262," in issue

    def test_delegates_count_toward_the_budget_for_run_and_validate(self, tmp_path: Path) -> None:
        """Two workflows that each fit, the caller carrying the callee's spec: run (the
        agent's load_delegates) and validate both refuse it."""
        half = "\n".join(
            f"  s{n}:\n    instructions: {'q' * 30_000}" for n in range(5)
        )  # some 150 KB each
        caller = BASE.replace(
            "    instructions: Answer, then stop.\n",
            "    instructions: Answer, then stop.\n"
            "    tools: { allow: [archmax_workflow_callee] }\n",
        )
        root = _spec_root(tmp_path, caller + half + "\n")
        callee = BASE.replace("states:", "states:\n" + half + "\n", 1)
        _spec_root(tmp_path, callee, slug="callee")
        loaded = load_workflow(root, "w")
        with pytest.raises(SpecValidationError) as caught:
            load_delegates(root, loaded)
        [issue] = caught.value.issues
        assert "delegates 1" in issue and f"limit is {SESSION_START_MAX_BYTES:,}" in issue
        assert issue in [d.message for d in validate_workflow(root, "w").errors]
        sizes = session_start_sizes(loaded, load_delegates(root, loaded, check_size=False))
        assert sizes["total"] > SESSION_START_MAX_BYTES

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (BASE + 'title: "\\ud800"\n', "a lone surrogate ('\\ud800') is not text"),
            (BASE + "metadata: !!python/object/apply:os.system [true]\n", "constructor"),
            (BASE + "metadata: { when: 2024-13-45 }\n", "is not a valid date"),
            (BASE + f"metadata: {{ n: {'1' * 5000} }}\n", "is not a valid integer"),
            (BASE + "metadata: [&s abc, *s, *nope]\n", "found undefined alias 'nope'"),
            (
                BASE
                + "metadata: [&c0 [x], &c1 [[[[*c0]]]]]\n".replace(
                    "[[[[*c0]]]]", "[" * 62 + "*c0" + "]" * 62
                ),
                f"collections nest deeper than the {YAML_MAX_DEPTH}-level limit",
            ),
            (
                BASE + "metadata: [&s " + "x" * 200_000 + ", *s, *s, *s, *s, *s, *s]\n",
                f"aliases expand the text past {SPEC_MAX_BYTES:,} characters",
            ),
        ],
        ids=[
            "surrogate",
            "python-tag",
            "bad-date",
            "huge-int",
            "undefined-alias",
            "alias-depth",
            "text-bomb",
        ],
    )
    def test_other_hostile_yaml_is_one_typed_issue(
        self, tmp_path: Path, text: str | bytes, expected: str
    ) -> None:
        assert expected in _only_issue(_spec_root(tmp_path, text))

    def test_a_file_that_is_no_utf8(self, tmp_path: Path) -> None:
        issue = _only_issue(_spec_root(tmp_path, BASE.encode() + b"title: \xff\n"))
        assert issue.startswith("<file>: not UTF-8 text")

    def test_a_workflow_md_that_is_no_utf8(self, tmp_path: Path) -> None:
        root = _spec_root(tmp_path, BASE)
        (root / "workflows" / "w" / "WORKFLOW.md").write_bytes(b"Prose \xff\n")
        with pytest.raises(SpecValidationError) as caught:
            load_workflow(root, "w")
        assert caught.value.source == "workflows/w/WORKFLOW.md"


CASE = """\
title: A case
description: It sends one message and expects an answer.
steps:
  - send: Hello.
  - succeeded: true
"""


def _case_issue(text: str | bytes) -> str:
    with pytest.raises(CaseSchemaError) as caught:
        parse_case("fuzz.test.yaml", text)
    [issue] = caught.value.issues
    return issue


class TestRefusedCases:
    """The case inputs that gave tracebacks, and the case limits."""

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                CASE
                + "mocks:\n  - { tool: x, result: ok, whenInput: { a: "
                + "[" * 3000
                + "]" * 3000
                + " } }\n",
                f"collections nest deeper than the {YAML_MAX_DEPTH}-level limit",
            ),
            (CASE + "variables: &v { again: *v }\n", "a recursive alias is refused"),
            (CASE + "variables:\n  laughs:\n" + _laughs().replace("  ", "    ", 1), "nodes"),
            ("title: A case\ndescription: x\nsteps: 2024-13-45\n", "is not a valid date"),
            (f"title: {'1' * 5000}\ndescription: x\n", "is not a valid integer"),
            (CASE + "x" * (CASE_MAX_BYTES + 1), f"over the {CASE_MAX_BYTES:,}-byte limit"),
        ],
        ids=["deep", "recursive", "laughs", "bad-date", "huge-int", "too-big"],
    )
    def test_hostile_yaml_is_one_case_schema_issue(self, text: str, expected: str) -> None:
        assert expected in _case_issue(text)

    def test_mocks_past_the_payload_limit(self) -> None:
        """Escapes grow in JSON (one ``\\x01`` is six bytes): within the file, past the
        payload."""
        result = '"' + "\\x01" * 60_000 + '"'
        text = CASE + f"mocks:\n  - {{ tool: read_file, result: {result} }}\n"
        issue = _case_issue(text)
        assert issue.startswith("mocks: ") and f"{CASE_PAYLOAD_MAX_BYTES:,}-byte limit" in issue

    def test_a_case_at_its_limits_parses(self) -> None:
        text = CASE + "variables:\n  note: " + "n" * (CASE_PAYLOAD_MAX_BYTES - 1000) + "\n"
        assert isinstance(parse_case("fuzz.test.yaml", text), CaseDocument)


def test_read_limits_do_not_refuse_the_examples() -> None:
    """Every example spec and case reads under the limits, aliases and all."""
    for path in [
        *EXAMPLES.glob("*/workflows/*/workflow.yaml"),
        *EXAMPLES.glob("*/workflows/*/tests/*.test.yaml"),
    ]:
        assert read_yaml(path, max_bytes=SPEC_MAX_BYTES, kind="a file") == yaml.safe_load(
            path.read_text(encoding="utf-8")
        )
