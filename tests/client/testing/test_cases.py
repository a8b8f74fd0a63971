"""The case document schema (``client/cases.py``): one test per rule with its negative case,
the partial matcher's truth table, and case discovery."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from archmax_temporal.client.testing.cases import (
    CASE_DESCRIPTION_MAX_LENGTH,
    CASE_TITLE_MAX_LENGTH,
    STEP_KINDS,
    TOP_LEVEL_KEYS,
    CaseDocument,
    CaseSchemaError,
    DecideStep,
    DeliverStep,
    GradeStep,
    Mock,
    ParkedStep,
    RaisedStep,
    ReplyStep,
    SendStep,
    TrailAssertionStep,
    VariablesStep,
    WorkspaceFrom,
    discover_cases,
    load_case,
    parse_case,
    workspace_seeds,
)

# cases.py re-exports these for case authors, implicitly, which mypy --strict does not count
from archmax_temporal.workflows.matching import (
    InvalidRegexError,
    compile_regex,
    find_mock,
    match_token,
    partial_match,
)
from tests.support import paths

FIXTURES = paths.FIXTURES / "cases"

HEAD = "title: A case\ndescription: What it drives and asserts.\n"


def parse(text: str, tests_dir: Path | None = None) -> CaseDocument:
    return parse_case("case.test.yaml", textwrap.dedent(text), tests_dir)


def issues(text: str, tests_dir: Path | None = None) -> list[str]:
    with pytest.raises(CaseSchemaError) as caught:
        parse(text, tests_dir)
    assert caught.value.file == "case.test.yaml"
    assert str(caught.value).startswith("case.test.yaml: invalid test case")
    return caught.value.issues


def steps_doc(steps: str) -> str:
    return HEAD + "steps:\n" + textwrap.indent(textwrap.dedent(steps), "  ")


# --- the eight top-level keys ---------------------------------------------------------------


def test_minimal_document_needs_only_title_and_description() -> None:
    document = parse(HEAD)
    assert document.title == "A case"
    assert document.description == "What it drives and asserts."
    assert document.skip is None and document.trigger is None
    assert document.variables == {} and document.workspace == {}
    assert document.mocks == [] and document.steps == []


@pytest.mark.parametrize("key", ["title", "description"])
def test_title_and_description_are_required(key: str) -> None:
    text = "\n".join(line for line in HEAD.splitlines() if not line.startswith(key))
    assert f"{key}: required" in issues(text)


@pytest.mark.parametrize("key", ["title", "description"])
def test_title_and_description_must_be_non_empty_strings(key: str) -> None:
    other = "description: D" if key == "title" else "title: T"
    assert f"{key}: must be a string" in issues(f"{key}: 3\n{other}\n")
    assert f"{key}: must be a non-empty string" in issues(f'{key}: "  \\n "\n{other}\n')


def test_skip_is_a_non_empty_reason() -> None:
    assert parse(HEAD + "skip: flaky upstream\n").skip == "flaky upstream"
    assert any(i.startswith("skip: must be a non-empty reason") for i in issues(HEAD + "skip: ''"))
    assert any(i.startswith("skip:") for i in issues(HEAD + "skip: true\n"))


def test_trigger_is_an_id() -> None:
    document = parse(HEAD + "trigger: { id: report_requested }\n")
    assert document.trigger is not None and document.trigger.id == "report_requested"
    assert "trigger: must be a mapping { id: <trigger-id> }" in issues(HEAD + "trigger: x\n")
    assert "trigger.id: required" in issues(HEAD + "trigger: {}\n")


def test_trigger_args_is_an_unknown_key() -> None:
    found = issues(HEAD + "trigger: { id: report_requested, args: { company: Acme } }\n")
    assert len(found) == 1
    assert found[0].startswith("trigger.args: unknown key; known keys: id")
    assert "variables:" in found[0]


def test_variables_are_seeds_with_valid_names_and_json_values() -> None:
    document = parse(HEAD + "variables: { company: Acme Corp, items: [{ sku: A }] }\n")
    assert document.variables == {"company": "Acme Corp", "items": [{"sku": "A"}]}
    found = issues(HEAD + "variables: { Company: 1, trigger: x, since: 2024-01-01 }\n")
    assert any(i.startswith("variables.Company: invalid variable name") for i in found)
    assert any(i.startswith("variables.trigger: 'trigger' is set by the runtime") for i in found)
    assert any(i.startswith("variables.since: a YAML date is not a JSON value") for i in found)
    assert "variables: must be a mapping of variable name to value" in issues(
        HEAD + "variables: [a]"
    )


def test_workspace_seeds_inline_and_from(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "orders.json").write_bytes(b'[{"id": "ORD-1"}]\n')
    document = parse(
        HEAD
        + """\
workspace:
  trigger.json: { from: shared/orders.json }
  scratchpad/fixtures/report.json: { total: 412.5 }
  scratchpad/notes.md: "verbatim text"
""",
        tmp_path,
    )
    assert document.workspace["trigger.json"] == WorkspaceFrom(from_="shared/orders.json")
    seeds = workspace_seeds(document, tmp_path)
    assert seeds == {
        "trigger.json": b'[{"id": "ORD-1"}]\n',
        "scratchpad/fixtures/report.json": b'{\n  "total": 412.5\n}',
        "scratchpad/notes.md": b"verbatim text",
    }


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("skills/order-data/assets/orders.json", "skills/ is a mount"),
        ("AGENTS.md", "AGENTS.md is a mount"),
        ("artifacts/trail.json", "artifacts/ is a runtime area"),
        ("checkpoints/cp-1.json", "checkpoints/ is a runtime area"),
        ("large_tool_results/x", "large_tool_results/ is a runtime area"),
        ("data/orders.json", "data/ is not an agent-visible session area"),
        ("scratchpad", "scratchpad is a directory"),
        ("/etc/passwd", "must be a workspace-relative path"),
        ("scratchpad/../trigger.json", "must be a canonical relative path"),
        ("scratchpad//x", "must be a canonical relative path"),
    ],
)
def test_workspace_refuses_mounts_runtime_areas_and_non_session_paths(
    path: str, expected: str
) -> None:
    found = issues(HEAD + f"workspace:\n  {path!r}: x\n")
    assert len(found) == 1
    assert found[0].startswith(f"workspace[{path!r}]: {expected}")


def test_workspace_from_must_stay_inside_tests_and_exist(tmp_path: Path) -> None:
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    (tmp_path / "secret.json").write_text("{}")
    (tests_dir / "link.json").symlink_to(tmp_path / "secret.json")
    (tests_dir / "a-dir").mkdir()
    found = issues(
        HEAD
        + """\
workspace:
  a.json: { from: ../secret.json }
  b.json: { from: /etc/passwd }
  c.json: { from: missing.json }
  d.json: { from: link.json }
  e.json: { from: a-dir }
  f.json: { from: x.json, mode: copy }
  g.json: { from: 3 }
""",
        tests_dir,
    )
    assert found == [
        "workspace['a.json'].from: '../secret.json' escapes the tests/ directory",
        "workspace['b.json'].from: '/etc/passwd' escapes the tests/ directory",
        "workspace['c.json'].from: 'missing.json' names no file under tests/",
        "workspace['d.json'].from: 'link.json' escapes the tests/ directory",
        "workspace['e.json'].from: 'a-dir' names no file under tests/",
        "workspace['f.json']: a from: reference takes no other keys (got mode)",
        "workspace['g.json'].from: must be a path relative to the tests/ directory",
    ]
    # Without a tests directory only the form is checked.
    assert parse(HEAD + "workspace: { a.json: { from: missing.json } }\n").workspace


def test_mocks_are_tool_when_input_result() -> None:
    document = parse(
        HEAD
        + """\
mocks:
  - tool: read_file
    whenInput: { file_path: skills/order-data/assets/orders.json }
    result: "[]"
  - tool: archmax_workflow_reconcile
    result: { returns: { report: scratchpad/fixtures/report.json } }
"""
    )
    assert document.mocks[0] == Mock(
        tool="read_file",
        when_input={"file_path": "skills/order-data/assets/orders.json"},
        result="[]",
    )
    assert document.mocks[1].when_input is None
    found = issues(HEAD + "mocks:\n  - { tool: read_file, input: {}, result: x }\n  - tool: x\n")
    assert found == [
        "mocks[0].input: unknown key; known keys: tool, whenInput, result",
        "mocks[1].result: required",
    ]
    assert "mocks: must be a list of { tool, whenInput?, result }" in issues(HEAD + "mocks: {}")


def test_first_matching_mock_wins() -> None:
    mocks = [
        Mock(tool="read_file", when_input={"file_path": "/orders/"}, result="A"),
        Mock(tool="read_file", result="B"),
    ]
    assert find_mock(mocks, "read_file", {"file_path": "x/orders.json"}) is mocks[0]
    assert find_mock(mocks, "read_file", {"file_path": "x/other.json"}) is mocks[1]
    assert find_mock(mocks, "write_file", {}) is None


def test_steps_must_be_a_list() -> None:
    assert "steps: must be a list of single-key step mappings" in issues(HEAD + "steps: {}")


# --- unknown keys ---------------------------------------------------------------------------


def test_unknown_top_level_key_names_the_known_ones() -> None:
    found = issues(HEAD + "timeout: 3\nStep: []\n")
    known = ", ".join(TOP_LEVEL_KEYS)
    assert found == [
        f"timeout: unknown key; known keys: {known}",
        f'Step: unknown key; known keys: {known} (did you mean "steps"?)',
    ]


def test_typod_step_key_is_an_error_naming_the_known_ones() -> None:
    found = issues(steps_doc("- send: hi\n- reachedstate: refund-review\n"))
    assert found == [
        f"steps[1].reachedstate: unknown step key; known keys: {', '.join(STEP_KINDS)}"
        ' (did you mean "reachedState"?)'
    ]


def test_unknown_key_inside_a_step_names_the_step_keys() -> None:
    found = issues(steps_doc("- send: hi\n- decide: { to: done, reason: x }\n"))
    assert found == ["steps[1].decide.reason: unknown key; known keys: to, comment"]


def test_multi_key_step_is_an_error() -> None:
    found = issues(steps_doc("- send: hi\n  succeeded: true\n"))
    assert len(found) == 1
    assert found[0].startswith("steps[0]: a step must be a single-key mapping")
    assert "(send, succeeded)" in found[0]
    assert issues(steps_doc("- send\n"))[0].startswith("steps[0]: a step must be a single-key")
    assert issues(steps_doc("- {}\n"))[0].startswith("steps[0]: a step must be a single-key")


def test_assertion_before_any_action_is_an_error() -> None:
    found = issues(steps_doc("- succeeded: true\n- reply: { includes: x }\n- send: hi\n"))
    assert found == [
        "steps[0].succeeded: an assertion needs an action above it (send, decide or "
        "deliver): it evaluates against the view of the nearest action before it"
    ]
    assert [s.kind for s in parse(steps_doc("- send: hi\n- succeeded: true\n")).steps] == [
        "send",
        "succeeded",
    ]


def test_every_problem_is_reported_at_once() -> None:
    found = issues("title: 1\nextra: x\nsteps:\n  - reachedstate: a\n  - send: ''\n")
    assert [i.split(":")[0] for i in found] == [
        "extra",
        "title",
        "description",
        "steps[0].reachedstate",
        "steps[1].send",
    ]


# --- length budgets -------------------------------------------------------------------------


def test_title_budget_is_measured_on_collapsed_whitespace() -> None:
    exact = "x" * CASE_TITLE_MAX_LENGTH
    assert parse(f"title: {exact}\ndescription: d\n").title == exact
    spaced = "title: >-\n  " + "  \n  ".join(["word"] * 12) + "\ndescription: d\n"
    assert parse(spaced).title == " ".join(["word"] * 12)  # 59 collapsed, 70+ raw
    found = issues(f"title: {exact}y\ndescription: d\n")
    assert found == [
        "title: 61 characters (whitespace collapsed) is over the 60-character budget; keep "
        "longer rationale in a YAML comment above the document"
    ]


def test_description_budget_scores_folded_and_literal_blocks_alike() -> None:
    prose = ["A refund for delivered ORD-1001 travels to review,"] * 4  # 50 x 4 + 3 = 203
    folded = "title: t\ndescription: >-\n" + "".join(f"  {line}\n" for line in prose)
    literal = "title: t\ndescription: |\n" + "".join(f"    {line}\n\n" for line in prose)
    assert issues(folded) == issues(literal)
    assert issues(folded)[0].startswith("description: 203 characters (whitespace collapsed)")
    fitting = [*prose[:3], "and parks."]
    folded = "title: t\ndescription: >-\n" + "".join(f"  {line}\n" for line in fitting)
    literal = "title: t\ndescription: |\n" + "".join(f"  {line}\n" for line in fitting)
    assert parse(folded).description == parse(literal).description
    assert len(parse(folded).description) <= CASE_DESCRIPTION_MAX_LENGTH


# --- steps ----------------------------------------------------------------------------------


def test_every_step_kind_parses_into_a_typed_step() -> None:
    document = parse(
        steps_doc(
            """\
- send: "Hi, refund ORD-1001 please."
- succeeded: true
- parked: true
- parked: input
- parked: { channel: decision, state: refund-review }
- raised: true
- raised: order_not_found
- raised: { code: order_not_found, reason: "/not found/i" }
- reachedState: refund-review
- reply: { includes: ORD-1001, excludes: ["/password/i", secret] }
- calledTool: { name: read_file, input: { file_path: "/orders\\\\.json$/" } }
- notCalledTool: { name: write_file }
- blockedTool: { name: write_file, input: { file_path: skills/x } }
- usedNoTools: true
- ranWorkflow: { workflow: enrich-order, status: error, count: 2 }
- trail: { to: refund-review, kind: human, reason: approve, count: 1 }
- noTraversal: true
- triggerArrival: email_reply
- variables: { expect: { items: [{ sku: A }] }, path: { items: -1.sku }, locked: { items: true } }
- decide: { to: refund-closed, comment: looks right }
- deliver: { trigger: email_reply, variables: { reply_body: "It's ORD-1001." } }
- grade: { closedQA: tells the customer the refund is approved, atLeast: 0.7 }
- judge: { closedQA: names the order, atLeast: 1 }
"""
        )
    )
    steps = document.steps
    assert [s.index for s in steps] == list(range(len(steps)))
    assert [s.kind for s in steps if s.is_action] == ["send", "decide", "deliver"]
    assert {s.kind for s in steps if s.structural} == {
        "succeeded",
        "parked",
        "raised",
        "reachedState",
        "trail",
        "noTraversal",
        "triggerArrival",
        "variables",
    }
    assert isinstance(steps[0], SendStep) and steps[0].message == "Hi, refund ORD-1001 please."
    assert steps[2] == ParkedStep(index=2)
    assert steps[3] == ParkedStep(index=3, channel="input")
    assert steps[4] == ParkedStep(index=4, channel="decision", state="refund-review")
    assert steps[5] == RaisedStep(index=5)
    assert steps[6] == RaisedStep(index=6, code="order_not_found")
    assert steps[7] == RaisedStep(index=7, code="order_not_found", reason="/not found/i")
    assert steps[9] == ReplyStep(index=9, includes=["ORD-1001"], excludes=["/password/i", "secret"])
    assert steps[15] == TrailAssertionStep(
        index=15, to="refund-review", trail_kind="human", reason="approve", count=1
    )
    assert steps[18] == VariablesStep(
        index=18,
        expect={"items": [{"sku": "A"}]},
        path={"items": "-1.sku"},
        locked={"items": True},
    )
    assert steps[19] == DecideStep(index=19, to="refund-closed", comment="looks right")
    assert steps[20] == DeliverStep(
        index=20, trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
    )
    grade, judge = steps[21], steps[22]
    assert isinstance(grade, GradeStep) and isinstance(judge, GradeStep)
    assert (grade.kind, grade.at_least, grade.written_as) == ("grade", 0.7, "grade")
    assert (judge.kind, judge.at_least, judge.written_as) == ("grade", 1.0, "judge")
    assert grade.closed_qa == "tells the customer the refund is approved"
    # A document round-trips through its own model.
    assert CaseDocument.model_validate(document.model_dump()) == document


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("send: ''", 'steps[1].send: must be the non-empty user message (send: "<message>")'),
        ("succeeded: false", "steps[1].succeeded: must be true (succeeded: true)"),
        ("usedNoTools: yes please", "steps[1].usedNoTools: must be true (usedNoTools: true)"),
        ("noTraversal: 1", "steps[1].noTraversal: must be true (noTraversal: true)"),
        (
            "parked: maybe",
            "steps[1].parked: must be true, decision, input or { channel?, state? }",
        ),
        ("parked: {}", "steps[1].parked: an empty mapping pins nothing (write parked: true)"),
        (
            "parked: { channel: email }",
            "steps[1].parked.channel: must be one of 'decision' or 'input'",
        ),
        ("raised: {}", "steps[1].raised: an empty mapping pins nothing (write raised: true)"),
        ("raised: false", "steps[1].raised: must be true, an error code or { code?, reason? }"),
        ("reachedState: 3", "steps[1].reachedState: must be a state slug (reachedState: <state>)"),
        (
            "triggerArrival: ''",
            "steps[1].triggerArrival: must be a trigger id (triggerArrival: <trigger>)",
        ),
        ("reply: {}", "steps[1].reply: needs includes, excludes or both"),
        ("reply: { includes: [] }", "steps[1].reply.includes: must name at least one token"),
        (
            "reply: { includes: [1] }",
            "steps[1].reply.includes[0]: a token is a non-empty substring or /pattern/flags string",
        ),
        ("reply: x", "steps[1].reply: must be a mapping { includes?, excludes? }"),
        ("calledTool: {}", "steps[1].calledTool.name: required"),
        (
            "calledTool: { name: x, args: {} }",
            "steps[1].calledTool.args: unknown key; known keys: name, input",
        ),
        (
            "ranWorkflow: { workflow: w, count: -1 }",
            "steps[1].ranWorkflow.count: Input should be greater than or equal to 0",
        ),
        (
            "ranWorkflow: { workflow: w, status: done }",
            "steps[1].ranWorkflow.status: must be one of 'error' or 'ok'",
        ),
        (
            "trail: { count: 1 }",
            "steps[1].trail: needs at least one of to, kind or reason beside count",
        ),
        ("trail: { to: a }", "steps[1].trail.count: required"),
        (
            "trail: { kind: jump, count: 1 }",
            "steps[1].trail.kind: must be one of 'agent', 'human', "
            "'on_error', 'reset', 'sub-workflow' or 'trigger'",
        ),
        (
            "variables: { locked: { a: true } }",
            "steps[1].variables.expect: required (a mapping of variable name to value)",
        ),
        (
            "variables: { expect: { a: 1 }, path: { b: x } }",
            "steps[1].variables.path.b: names no variable of expect",
        ),
        ("variables: { expect: { a: 1 }, locked: { a: yes } }", None),
        (
            "variables: { expect: { a: 1 }, locked: { a: locked } }",
            "steps[1].variables.locked.a: Input should be a valid boolean",
        ),
        (
            "grade: { closedQA: ok, atLeast: 1.5 }",
            "steps[1].grade.atLeast: Input should be less than or equal to 1",
        ),
        ("grade: { closedQA: ok }", "steps[1].grade.atLeast: required"),
        ("judge: { atLeast: 0.5 }", "steps[1].judge.closedQA: required"),
        ("decide: { comment: x }", "steps[1].decide.to: required"),
        ("deliver: { variables: { x: 1 } }", "steps[1].deliver.trigger: required"),
        (
            "deliver: { trigger: t, variables: { Bad: 1 } }",
            "steps[1].deliver.variables.Bad: invalid variable name (^[a-z][a-z0-9_]*$)",
        ),
    ],
)
def test_step_shape_errors(step: str, expected: str | None) -> None:
    text = steps_doc(f"- send: hi\n- {step}\n")
    if expected is None:
        parse(text)  # YAML 1.1 reads `yes` as true: a valid lock state
        return
    assert issues(text) == [expected]


# --- /pattern/flags regexes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "where"),
    [
        ('reply: { includes: "/(unclosed/" }', "steps[1].reply.includes"),
        ('reply: { excludes: [ok, "/[a-/i"] }', "steps[1].reply.excludes[1]"),
        ('calledTool: { name: x, input: { path: "/a(/" } }', "steps[1].calledTool.input.path"),
        (
            'notCalledTool: { name: x, input: { paths: [ok, "/*/"] } }',
            "steps[1].notCalledTool.input.paths[1]",
        ),
        ('blockedTool: { name: x, input: { a: { b: "/+/" } } }', "steps[1].blockedTool.input.a.b"),
        ('raised: { reason: "/(/" }', "steps[1].raised.reason"),
        ('reply: { includes: "/approv/q" }', "steps[1].reply.includes"),
        ('reply: { includes: "/approv/ii" }', "steps[1].reply.includes"),
    ],
)
def test_malformed_regex_strings_are_errors(step: str, where: str) -> None:
    found = issues(steps_doc(f"- send: hi\n- {step}\n"))
    assert len(found) == 1
    assert found[0].startswith(f"{where}: malformed regex ")


def test_malformed_regex_in_mock_when_input_is_an_error() -> None:
    found = issues(HEAD + 'mocks:\n  - { tool: x, whenInput: { p: ["/(/"] }, result: "" }\n')
    assert len(found) == 1
    assert found[0].startswith("mocks[0].whenInput.p[0]: malformed regex '/(/'")


def test_well_formed_regexes_and_plain_strings_parse() -> None:
    parse(
        steps_doc(
            """\
- send: hi
- reply: { includes: ["/approv/i", "/^ORD-\\\\d+$/mgsuy", "a/b/c", "//", "/"] }
- raised: { reason: "exact reason" }
"""
        )
    )


def test_regex_form_and_flags() -> None:
    assert compile_regex("plain") is None
    assert compile_regex("//") is None  # an empty pattern is no regex
    regex = compile_regex("/approv/i")
    assert regex is not None and regex.search("APPROVED")
    assert match_token("/^ord-\\d+$/im", "reply\nORD-1001")
    assert not match_token("/^ord/", "ORD")
    assert match_token("ORD-1001", "your ORD-1001 refund")
    assert match_token("/(?<order>ORD-\\d+) \\k<order>/", "ORD-1 ORD-1")  # JS named groups
    assert match_token("/a.b/s", "a\nb") and not match_token("/a.b/", "a\nb")
    assert match_token("/b/y", "ba") and not match_token("/b/y", "ab")  # sticky: anchored
    with pytest.raises(InvalidRegexError, match="unknown flag 'x'"):
        compile_regex("/a/x")


# --- partial_match --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual", "result"),
    [
        # declared keys must match; others are ignored
        ({"a": 1}, {"a": 1, "b": 2}, True),
        ({}, {"anything": True}, True),
        ({"a": 1}, {"a": 2}, False),
        ({"a": 1}, {"b": 1}, False),  # a missing key fails
        ({"a": None}, {}, False),
        ({"a": None}, {"a": None}, True),
        ({"a": 1}, [1], False),
        # nested mappings match partially, recursively
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3}, True),
        ({"a": {"b": 1}}, {"a": {"c": 1}}, False),
        ({"a": {"b": {"c": "/x/"}}}, {"a": {"b": {"c": "axb", "d": 1}}}, True),
        # arrays match element-wise and need equal length
        ([1, 2], [1, 2], True),
        ([1, 2], [2, 1], False),
        ([1], [1, 2], False),
        ([{"sku": "A"}], [{"sku": "A", "qty": 3}], True),
        (["/^a/", "b"], ["apple", "b"], True),
        (["/^a/", "b"], ["pear", "b"], False),
        ([1], {"0": 1}, False),
        # /pattern/flags strings match as regexes
        ({"file_path": "/orders\\.json$/"}, {"file_path": "skills/x/assets/orders.json"}, True),
        ({"file_path": "/orders\\.json$/"}, {"file_path": "orders.json.bak"}, False),
        ({"q": "/acme/i"}, {"q": "ACME Corp"}, True),
        ({"q": "/acme/"}, {"q": "ACME Corp"}, False),
        ({"n": "/^4\\d$/"}, {"n": 42}, True),  # a non-string value is matched as its text
        ({"flag": "/^true$/"}, {"flag": True}, True),
        ({"items": "/ORD-1/"}, {"items": ["ORD-1"]}, True),
        # plain strings and scalars by strict equality
        ({"path": "skills/orders.json"}, {"path": "skills/orders.json"}, True),
        ({"path": "orders"}, {"path": "skills/orders.json"}, False),  # no substring
        ({"n": 1}, {"n": 1.0}, True),
        ({"n": 1}, {"n": True}, False),
        ({"b": True}, {"b": 1}, False),
        ({"s": "1"}, {"s": 1}, False),
        (None, None, True),
        (None, 0, False),
    ],
)
def test_partial_match(expected: object, actual: object, result: bool) -> None:
    assert partial_match(expected, actual) is result


def test_partial_match_refuses_a_malformed_regex() -> None:
    with pytest.raises(InvalidRegexError):
        partial_match({"a": "/(/"}, {"a": "("})


# --- YAML ------------------------------------------------------------------------------------


def test_yaml_problems_are_schema_errors() -> None:
    found = issues("title: a\ntitle: b\n")
    assert len(found) == 1 and "duplicate key 'title'" in found[0]
    assert "YAML does not parse" in issues("title: [unclosed\n")[0]
    assert issues("")[0].startswith("<root>: the document is empty")
    assert issues("- a\n- b\n") == ["<root>: a case document must be a mapping"]


# --- discovery -------------------------------------------------------------------------------


def _suite(tmp_path: Path, fixture: str) -> Path:
    workflow_dir = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, workflow_dir / "tests")
    return workflow_dir


def test_discovery_is_recursive_sorted_and_ignores_other_files(tmp_path: Path) -> None:
    workflow_dir = _suite(tmp_path, "refund-review")
    (workflow_dir / "tests" / "a-first.test.yml").write_text(HEAD)
    (workflow_dir / "tests" / "z" / "deep").mkdir(parents=True)
    (workflow_dir / "tests" / "z" / "deep" / "last.test.yaml").write_text(HEAD)
    (workflow_dir / "tests" / "dir.test.yaml").mkdir()  # a directory is no case
    (workflow_dir / "tests" / ".test.yaml").write_text(HEAD)  # no name before the suffix
    (workflow_dir / "tests" / "case.yaml").write_text(HEAD)
    cases = discover_cases(workflow_dir)
    assert [c.id for c in cases] == [
        "a-first",
        "refund/approved",
        "refund/rejected",
        "z/deep/last",
    ]
    assert [c.file for c in cases] == [
        "a-first.test.yml",
        "refund/approved.test.yaml",
        "refund/rejected.test.yml",
        "z/deep/last.test.yaml",
    ]
    assert cases[1].path == workflow_dir / "tests" / "refund" / "approved.test.yaml"


def test_discovery_filter_is_a_path_substring(tmp_path: Path) -> None:
    workflow_dir = _suite(tmp_path, "refund-review")
    assert [c.id for c in discover_cases(workflow_dir, "reject")] == ["refund/rejected"]
    assert [c.id for c in discover_cases(workflow_dir, "refund/")] == [
        "refund/approved",
        "refund/rejected",
    ]
    assert [c.id for c in discover_cases(workflow_dir, ".yml")] == ["refund/rejected"]
    assert discover_cases(workflow_dir, "nothing-matches") == []


def test_missing_tests_directory_is_an_empty_suite(tmp_path: Path) -> None:
    assert discover_cases(tmp_path) == []


def test_fixture_cases_load(tmp_path: Path) -> None:
    workflow_dir = _suite(tmp_path, "refund-review")
    tests_dir = workflow_dir / "tests"
    approved, rejected = (load_case(c, tests_dir) for c in discover_cases(workflow_dir))
    assert approved.trigger is not None and approved.trigger.id == "refund_requested"
    assert (
        workspace_seeds(approved, tests_dir)["trigger.json"]
        == (tests_dir / "shared" / "order.json").read_bytes()
    )
    assert rejected.description == (
        "The reviewer sends the request back once; the session resubmits it and review is "
        "entered exactly twice."
    )


def test_an_unreadable_case_is_a_schema_error(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "bad.test.yaml").write_bytes(b"title: \xff\n")
    (case,) = discover_cases(tmp_path)
    with pytest.raises(CaseSchemaError) as caught:
        load_case(case, tmp_path / "tests")
    assert caught.value.file == "bad.test.yaml"
    assert caught.value.issues[0].startswith("<file>: not UTF-8 text")
