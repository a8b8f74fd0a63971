"""Which session a firing belongs to: the precedence of an explicit id, the session paths and
a minted id, the one check of a session path, and the ids minted for an idempotency key."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from archmax_temporal.client.session_ids import (
    mint_session_id,
    minted_for_key,
    parsed_session_path,
    session_id_for,
)
from archmax_temporal.workflows.errors import InvalidSessionIdError

UUID_TEXT = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def _for(
    variables: dict[str, Any] | None = None,
    *,
    session_id: str | None = None,
    session_path: str | None = None,
    agent_path: str | None = None,
    declared_path: str | None = None,
) -> tuple[str, bool]:
    return session_id_for(
        variables or {},
        session_id=session_id,
        session_path=session_path,
        agent_path=agent_path,
        declared_path=declared_path,
    )


def test_a_session_path_parses_or_is_refused_naming_it() -> None:
    assert parsed_session_path("mail.thread.-1") == ["mail", "thread", -1]
    with pytest.raises(InvalidSessionIdError, match=r"malformed session path 'chat\.\.id': "):
        parsed_session_path("chat..id")


def test_an_explicit_id_wins_over_every_path() -> None:
    sid = f"explicit-{uuid.uuid4().hex[:8]}"
    variables = {"a": "from-a", "b": "from-b", "c": "from-c"}
    assert _for(variables, session_id=sid, session_path="a", agent_path="b", declared_path="c") == (
        sid,
        False,
    )


def test_a_malformed_firing_path_is_refused_even_beside_an_id() -> None:
    for sid in ("named", ""):
        with pytest.raises(InvalidSessionIdError, match=r"malformed session path 'x\.\.y'"):
            _for(session_id=sid, session_path="x..y")


def test_the_paths_are_read_firing_then_agent_then_declared() -> None:
    variables = {"a": "from-a", "b": "from-b", "c": 42}
    assert _for(variables, session_path="a", agent_path="b", declared_path="c") == (
        "from-a",
        False,
    )
    assert _for(variables, agent_path="b", declared_path="c") == ("from-b", False)
    assert _for(variables, declared_path="c") == ("42", False)  # a number becomes its text


def test_the_first_path_given_decides_and_an_unresolved_one_mints() -> None:
    """A path that does not resolve (missing, empty, not a string or number) mints an id;
    the later paths are not consulted."""
    for variables in ({}, {"a": ""}, {"a": {"nested": 1}}):
        sid, minted = _for({**variables, "b": "from-b"}, session_path="a", agent_path="b")
        assert minted is True
        assert re.fullmatch(f"session-{UUID_TEXT}", sid)


def test_a_malformed_agent_or_declared_path_is_refused_when_read() -> None:
    with pytest.raises(InvalidSessionIdError, match=r"malformed session path 'b\.\.'"):
        _for({"a": "x"}, agent_path="b..")
    with pytest.raises(InvalidSessionIdError, match=r"malformed session path '\$\{\{ c \}\}'"):
        _for({"c": "x"}, declared_path="${{ c }}")


def test_an_id_read_from_a_path_is_checked_and_names_its_path() -> None:
    with pytest.raises(InvalidSessionIdError, match=r"\(from session path 'a'\)"):
        _for({"a": "bad\x00id"}, session_path="a")
    with pytest.raises(InvalidSessionIdError, match="invalid session id"):
        _for(session_id="bad\x00id")


def test_nothing_named_mints_a_fresh_id_each_time() -> None:
    first, second = mint_session_id(), mint_session_id()
    assert first != second
    assert re.fullmatch(f"session-{UUID_TEXT}", first)
    assert _for()[1] is True


def test_a_keyed_firing_mints_the_same_id_on_every_retry() -> None:
    key = uuid.uuid4().hex
    minted = minted_for_key("support-inbox", "email_received", key)
    assert minted == minted_for_key("support-inbox", "email_received", key)
    assert re.fullmatch(f"session-{UUID_TEXT}", minted)
    others = {
        minted_for_key("other", "email_received", key),
        minted_for_key("support-inbox", "manual", key),
        minted_for_key("support-inbox", "email_received", key + "x"),
    }
    assert minted not in others and len(others) == 3
