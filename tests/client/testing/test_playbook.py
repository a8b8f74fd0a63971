"""A scripted model's playbook (``client/testing/playbook.py``): a bad one named at its place, and
what its rules match on a request."""

from __future__ import annotations

from pathlib import Path

import pytest

from archmax_temporal.client.testing.playbook import ConversationView, Playbook, PlaybookError


@pytest.mark.parametrize(
    ("playbook", "expected"),
    [
        (
            'rules: [{when: {last_user: "/(unclosed/"}, reply: {content: x}}]',
            "rules[0].when.last_user",
        ),
        ('rules: [{when: {last_user: "/a/x"}, reply: {content: x}}]', "unknown flag 'x'"),
        (
            'rules: [{reply: {content: x}}, {when: {any_message: "/[/"}, reply: {content: x}}]',
            "rules[1].when.any_message: invalid regex",
        ),
        (
            "rules: [{when: {stat: clarify}, reply: {content: x}}]",
            "rules[0].when.stat: unknown key",
        ),
        (
            "rules: [{reply: {content: x}, color: red}]",
            "rules[0].color: unknown key (allowed: name,",
        ),
        (
            "rules: [{reply: {tool_calls: [{nme: t}]}}]",
            "rules[0].reply.tool_calls[0].nme: unknown key "
            "(allowed: name, arguments, raw_arguments)",
        ),
        (
            "rules: [{reply: {content: x}, error: {status: 500}}]",
            "exactly one of 'reply' or 'error'",
        ),
        ("rules: [{}]", "rules[0]: a rule needs exactly one of 'reply' or 'error' (got neither)"),
        ("rules: [{reply: {}}]", "rules[0].reply: a reply needs 'content' or 'tool_calls'"),
        ("rules: [{error: {status: 200}}]", "rules[0].error"),
        ("default: {content: x}\nextra: 1", "extra: unknown key"),
        ("rules: [", "not valid YAML"),
        ("", "got nothing"),
    ],
)
def test_bad_playbooks_raise_playbook_error_naming_the_place(playbook: str, expected: str) -> None:
    with pytest.raises(PlaybookError) as caught:
        Playbook.from_yaml(playbook)
    assert expected in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_load_names_the_file_and_substring_tokens_are_literal(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [{when: {last_tool_result: '/(?P<x/'}, reply: {content: x}}]")
    with pytest.raises(PlaybookError, match=r"bad\.yaml: rules\[0\]\.when\.last_tool_result"):
        Playbook.load(bad)
    with pytest.raises(PlaybookError, match="cannot read"):
        Playbook.load(tmp_path / "missing.yaml")
    good = tmp_path / "good.yaml"
    good.write_text("rules: [{when: {last_user: 'a.b'}, reply: {content: x}}]")
    when = Playbook.load(good).rules[0].when
    assert (
        when.match(ConversationView.from_body({"messages": [{"role": "user", "content": "xa.by"}]}))
        == {}
    )
    assert (
        when.match(ConversationView.from_body({"messages": [{"role": "user", "content": "axb"}]}))
        is None
    )


def test_the_view_reads_the_state_the_last_user_and_the_tool_answered() -> None:
    """The state is the last ``Current state`` marker of a system message, the last tool is
    the one whose call the last message answers, and ``tool_choice: none`` is a handoff."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    body = {
        "messages": [
            {"role": "system", "content": "## Current state: `intake` — first"},
            {"role": "user", "content": "hello"},
            {"role": "system", "content": [{"type": "text", "text": "Current state: `review`"}]},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ORD-7"},
        ],
        "tool_choice": "none",
    }
    view = ConversationView.from_body(body)
    assert (view.state, view.last_user, view.last_tool, view.last_tool_result) == (
        "review",
        "hello",
        "lookup",
        "ORD-7",
    )
    assert view.handoff is True
    plain = ConversationView.from_body({"messages": [{"role": "user", "content": "hi"}]})
    assert (plain.state, plain.last_tool, plain.handoff) == (None, None, False)


def test_a_rule_matches_when_every_condition_holds_and_yields_its_groups() -> None:
    (rule,) = Playbook.from_yaml(
        "rules: [{when: {state: review, last_user: '/(?P<order>ORD-\\d+)/'}, reply: {content: x}}]"
    ).rules

    def view(state: str, text: str) -> ConversationView:
        system = {"role": "system", "content": f"Current state: `{state}`"}
        return ConversationView.from_body({"messages": [system, {"role": "user", "content": text}]})

    assert rule.when.match(view("review", "about ORD-12")) == {"order": "ORD-12"}
    assert rule.when.match(view("intake", "about ORD-12")) is None
    assert rule.when.match(view("review", "no order")) is None
