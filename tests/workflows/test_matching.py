"""The matchers a case shares with the runtime (``workflows/matching.py``): ``/pattern/flags``
regexes, the partial matcher's truth table, and the first matching mock."""

from __future__ import annotations

import pytest

from archmax_temporal.client.testing.case_model import Mock
from archmax_temporal.workflows.matching import (
    InvalidRegexError,
    compile_regex,
    find_mock,
    match_token,
    partial_match,
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


def test_first_matching_mock_wins() -> None:
    mocks = [
        Mock(tool="read_file", when_input={"file_path": "/orders/"}, result="A"),
        Mock(tool="read_file", result="B"),
    ]
    assert find_mock(mocks, "read_file", {"file_path": "x/orders.json"}) is mocks[0]
    assert find_mock(mocks, "read_file", {"file_path": "x/other.json"}) is mocks[1]
    assert find_mock(mocks, "write_file", {}) is None
