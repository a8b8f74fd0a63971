"""A case's ``steps:`` read into typed steps (``client/testing/step_parser.py``): every kind and
its shorthands, the shape errors, the regexes, and where this runtime's ``advance``, ``crash``
and ``redeliver`` may stand."""

from __future__ import annotations

from datetime import timedelta

import pytest

from archmax_temporal.client.testing.case_model import CaseDocument
from archmax_temporal.client.testing.steps import (
    STEP_KINDS,
    AdvanceStep,
    CrashStep,
    DecideStep,
    DeliverStep,
    GradeStep,
    ParkedStep,
    RaisedStep,
    RedeliverStep,
    ReplyStep,
    SendStep,
    TrailAssertionStep,
    VariablesStep,
)
from tests.support.case_docs import HEAD, issues, parse, steps_doc

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


def test_steps_must_be_a_list() -> None:
    assert "steps: must be a list of single-key step mappings" in issues(HEAD + "steps: {}")


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


# --- this runtime's steps ------------------------------------------------------------------


class TestAdvance:
    def test_a_duration_in_untils_syntax(self) -> None:
        document = parse(steps_doc("- send: hi\n- advance: 3d\n- parked: true\n"))
        step = document.steps[1]
        assert isinstance(step, AdvanceStep)
        assert (step.by, step.duration) == ("3d", timedelta(days=3))
        assert document.advances and step.is_action and not step.checked

    @pytest.mark.parametrize(
        ("value", "problem"),
        [
            ("3y", "steps[1].advance: cannot read duration '3y': use a relative duration such as"),
            ("0", "steps[1].advance: must be a duration in until's relative syntax"),
            ('"0"', "steps[1].advance: must be a duration above zero"),
            ("{ by: 3d }", "steps[1].advance: must be a duration in until's relative syntax"),
            ("9999d", "steps[1].advance: moves the clock at most 3650d at once"),
        ],
    )
    def test_a_bad_duration_names_the_step(self, value: str, problem: str) -> None:
        (found,) = issues(steps_doc(f"- send: hi\n- advance: {value}\n"))
        assert found.startswith(problem)

    def test_it_needs_a_session_first(self) -> None:
        assert issues(steps_doc("- advance: 1d\n- send: hi\n")) == [
            "steps[0].advance: advance moves the clock of the case's session: a send must "
            "come before it"
        ]


class TestCrash:
    def test_defaults_and_the_full_form(self) -> None:
        document = parse(
            steps_doc(
                "- crash: { during: model }\n- send: hi\n"
                "- crash: { during: hook, nth: 2, at: complete }\n- advance: 1h\n"
            )
        )
        first, second = document.steps[0], document.steps[2]
        assert isinstance(first, CrashStep) and isinstance(second, CrashStep)
        assert (first.during, first.nth, first.at) == ("model", 1, "start")
        assert (second.during, second.nth, second.at) == ("hook", 2, "complete")
        assert document.crashes and first.checked
        assert [s.index for s in document.recorded] == [0, 2]

    def test_bad_values_and_unknown_keys_name_the_step(self) -> None:
        found = issues(
            steps_doc(
                "- send: hi\n- crash: { during: modle, nth: 0, at: end }\n- send: again\n"
                "- crash: { during: tool, when: now }\n- send: more\n- crash: model\n"
                "- send: last\n"
            )
        )
        assert found == [
            "steps[1].crash.during: must be one of 'hook', 'model', 'store' or 'tool'",
            "steps[1].crash.nth: Input should be greater than or equal to 1",
            "steps[1].crash.at: must be one of 'complete' or 'start'",
            "steps[3].crash.when: unknown key; known keys: during, nth, at",
            "steps[5].crash: must be a mapping { during, nth?, at? }",
        ]

    @pytest.mark.parametrize(
        ("steps", "got"),
        [
            ("- send: hi\n- crash: { during: model }\n", "nothing follows it"),
            ("- send: hi\n- crash: { during: model }\n- succeeded: true\n", "got succeeded"),
            ("- send: hi\n- crash: { during: model }\n- redeliver: {}\n", "got redeliver"),
        ],
    )
    def test_it_arms_the_action_right_after_it(self, steps: str, got: str) -> None:
        found = issues(steps_doc(steps))
        assert (
            "steps[1].crash: a crash arms the action right after it, which must be send, "
            f"decide, deliver or advance ({got})"
        ) in found


class TestRedeliver:
    def test_it_takes_nothing_and_follows_a_firing(self) -> None:
        document = parse(
            steps_doc("- send: hi\n- parked: true\n- redeliver: {}\n- redeliver: {}\n")
        )
        assert all(isinstance(s, RedeliverStep) for s in document.steps[2:])
        assert [s.index for s in document.recorded] == [1, 2, 3]

    def test_a_value_or_a_wrong_place_is_an_error(self) -> None:
        assert issues(steps_doc("- send: hi\n- redeliver: true\n")) == [
            "steps[1].redeliver: takes nothing: write redeliver: {}"
        ]
        assert issues(steps_doc("- redeliver: {}\n")) == [
            "steps[0].redeliver: redeliver sends the previous send, decide or deliver again "
            "(none came)"
        ]

    @pytest.mark.parametrize(
        "steps",
        [
            "- send: hi\n- advance: 1d\n- redeliver: {}\n",
            "- send: hi\n- advance: 1d\n- parked: input\n- redeliver: {}\n",
            "- send: hi\n- crash: { during: model }\n- advance: 1d\n- redeliver: {}\n",
        ],
    )
    def test_a_redeliver_after_an_advance_is_refused_naming_the_step(self, steps: str) -> None:
        """What it would send again was delivered before the clock moved: the run that
        knew its key may have closed idle, so the schema refuses it, and says why."""
        index = steps.count("\n- ")
        assert issues(steps_doc(steps)) == [
            f"steps[{index}].redeliver: redeliver cannot follow an advance: once the clock "
            "moved on the session may have closed idle and reopened in a new run, which no "
            "longer knows the first delivery's idempotency key (Temporal answers an update id "
            "within its run only); put the redeliver right after the send, decide or deliver "
            "it repeats"
        ]

    def test_a_redeliver_after_an_advance_and_a_new_send_repeats_that_send(self) -> None:
        document = parse(HEAD + "steps:\n  - send: hi\n  - advance: 1d\n  - send: again\n"
                         "  - redeliver: {}\n")  # fmt: skip
        assert [s.kind for s in document.steps] == ["send", "advance", "send", "redeliver"]


def test_an_unknown_step_key_near_no_other_names_the_extensions_too() -> None:
    (typo,) = issues(steps_doc("- send: hi\n- advanse: 1d\n"))
    assert typo.endswith('(did you mean "advance"?)')
    (unknown,) = issues(steps_doc("- send: hi\n- wait: 1d\n"))
    assert unknown.endswith("; this runtime's extensions: advance, crash, redeliver")
