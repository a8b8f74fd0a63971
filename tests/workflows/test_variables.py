"""workflows/variables.py: seeds lock, the agent writes, ``title`` is agent-owned (§4.8, §7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archmax_temporal.workflows.models import Variable
from archmax_temporal.workflows.variables import (
    agent_write,
    agent_write_refusal,
    invalid_names,
    plain,
    seed,
    set_trigger,
)

HOST = {
    "order_id": Variable(value="ORD-1", locked=True),
    "note": Variable(value="agent's", locked=False),
    "title": Variable(value="Order question", locked=False),
}


class TestInvalidNames:
    @pytest.mark.parametrize("name", ["a", "order_id", "x1", "title", "a_b_c_9"])
    def test_valid_names(self, name: str) -> None:
        """Flat lower snake-case names are valid, ``title`` included."""
        assert invalid_names([name]) == []

    @pytest.mark.parametrize(
        "name", ["", "Order", "1a", "_a", "a.b", "a-b", "a b", "trigger", "é", 3, None]
    )
    def test_invalid_names(self, name: str | int | None) -> None:
        """Uppercase, dotted, leading digit/underscore, non-strings and ``trigger`` are refused."""
        assert invalid_names([name]) == [name]

    def test_reports_only_the_bad_ones_in_order(self) -> None:
        """The result lists exactly the bad names, in the order given."""
        assert invalid_names(["ok", "Bad", "fine", "trigger"]) == ["Bad", "trigger"]

    @pytest.mark.parametrize("name", ["order_id\n", "trigger\n"])
    def test_trailing_newline_is_invalid(self, name: str) -> None:
        """A name with a trailing line break does not match ``^[a-z][a-z0-9_]*$``."""
        assert invalid_names([name]) == [name]

    @given(st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True).filter(lambda n: n != "trigger"))
    def test_every_conforming_name_is_valid(self, name: str) -> None:
        """Every name matching the pattern, except ``trigger``, is valid."""
        assert invalid_names([name]) == []


class TestSeed:
    def test_host_seeds_are_locked(self) -> None:
        """A host seed is written locked, replacing even a locked value."""
        seeded = seed(
            HOST, {"order_id": "ORD-2", "reply_body": "It's ORD-1001."}, replace_title=False
        )
        assert seeded["order_id"] == Variable(value="ORD-2", locked=True)
        assert seeded["reply_body"] == Variable(value="It's ORD-1001.", locked=True)

    def test_seed_locks_an_agent_written_variable(self) -> None:
        """Seeding a name the agent wrote replaces it and locks it."""
        assert seed(HOST, {"note": "host's"}, replace_title=False)["note"].locked is True

    def test_title_seed_is_never_locked(self) -> None:
        """A seeded title is stored unlocked."""
        assert seed({}, {"title": "Refund"}, replace_title=False)["title"] == Variable(
            value="Refund", locked=False
        )

    def test_seeded_title_keeps_an_existing_one(self) -> None:
        """A turn-start title does not overwrite the session's existing title."""
        assert seed(HOST, {"title": "New"}, replace_title=False)["title"].value == "Order question"

    def test_delivered_title_replaces_it(self) -> None:
        """A delivery's title replaces the existing one, still unlocked."""
        assert seed(HOST, {"title": "New"}, replace_title=True)["title"] == Variable(
            value="New", locked=False
        )

    def test_seed_does_not_mutate_its_input(self) -> None:
        """Seeding returns a new mapping and leaves the old one untouched."""
        before = dict(HOST)
        seed(HOST, {"order_id": "X", "extra": 1}, replace_title=True)
        assert before == HOST

    def test_untouched_variables_carry_forward(self) -> None:
        """Variables the seeds do not name are kept as they were."""
        assert seed(HOST, {"other": 1}, replace_title=False)["note"] == HOST["note"]


class TestSetTrigger:
    def test_trigger_is_set_locked(self) -> None:
        """The built-in ``trigger`` is the firing's id, locked."""
        assert set_trigger(HOST, "email_reply")["trigger"] == Variable(
            value="email_reply", locked=True
        )

    def test_trigger_replaces_the_previous_one(self) -> None:
        """Each arrival overwrites the previous trigger."""
        first = set_trigger({}, "email_received")
        assert set_trigger(first, "timer")["trigger"].value == "timer"


class TestAgentWriteRefusal:
    @pytest.mark.parametrize("writes", [{}, None, [], "x", [("a", 1)]])
    def test_writes_must_be_a_non_empty_object(self, writes: object) -> None:
        """A call naming nothing, or not an object, is refused."""
        assert "non-empty object" in str(agent_write_refusal(HOST, writes, None))

    @pytest.mark.parametrize("lock", ["yes", "true", [], {}])
    def test_lock_must_be_boolean(self, lock: object) -> None:
        """``lock`` other than a boolean (or absent) is refused."""
        assert agent_write_refusal(HOST, {"a": 1}, lock) == "`lock` must be a boolean"

    @pytest.mark.parametrize("lock", [1, 0, 1.0])
    def test_numbers_are_not_booleans(self, lock: int | float) -> None:
        """A number is not a boolean ``lock``, even one equal to true or false."""
        assert agent_write_refusal(HOST, {"a": 1}, lock) == "`lock` must be a boolean"

    @pytest.mark.parametrize("lock", [None, True, False])
    def test_booleans_and_absence_are_a_lock(self, lock: bool | None) -> None:
        """``lock`` absent, true or false lets a valid call through."""
        assert agent_write_refusal(HOST, {"a": 1}, lock) is None

    def test_invalid_name_refuses_the_whole_call(self) -> None:
        """One invalid name refuses the call, naming it."""
        refusal = agent_write_refusal(HOST, {"ok": 1, "Bad.Name": 2}, None)
        assert refusal is not None and "Bad.Name" in refusal and "ok" not in refusal

    def test_trigger_cannot_be_written(self) -> None:
        """``trigger`` is reserved: the agent cannot write it."""
        assert "trigger" in str(agent_write_refusal(HOST, {"trigger": "manual"}, None))

    def test_locked_variable_refuses_the_whole_call(self) -> None:
        """Writing a locked variable refuses the call, naming it, even beside valid writes."""
        refusal = agent_write_refusal(HOST, {"note": "x", "order_id": "ORD-9"}, False)
        assert refusal == "locked variable(s) cannot be changed: order_id"

    def test_unlocked_and_new_variables_may_be_written(self) -> None:
        """Agent-written and new variables may be (re)written, locked or not."""
        assert agent_write_refusal(HOST, {"note": "y", "fresh": [1]}, True) is None
        assert agent_write_refusal(HOST, {"note": "y"}, None) is None

    def test_title_cannot_be_locked(self) -> None:
        """Locking a title refuses the call."""
        assert agent_write_refusal(HOST, {"title": "Refund"}, True) == "`title` can never be locked"

    @pytest.mark.parametrize("title", ["", "   ", "two\nlines", "x" * 201, 7, None])
    def test_malformed_title_is_refused(self, title: object) -> None:
        """A title must be a non-empty single line of at most 200 characters."""
        refusal = agent_write_refusal(HOST, {"title": title}, False)
        assert refusal == "`title` must be a non-empty single line of at most 200 characters"

    @pytest.mark.parametrize("title", ["Refund for ORD-1", "x" * 200, "  padded  "])
    def test_good_title_is_accepted(self, title: str) -> None:
        """A single line up to 200 characters is a valid title."""
        assert agent_write_refusal(HOST, {"title": title}, False) is None


class TestAgentWrite:
    def test_writes_apply_with_the_lock_flag(self) -> None:
        """The agent's writes land with the lock it asked for."""
        written = agent_write(HOST, {"a": 1, "b": {"c": 2}}, True)
        assert written["a"] == Variable(value=1, locked=True)
        assert written["b"] == Variable(value={"c": 2}, locked=True)
        assert agent_write(HOST, {"a": 1}, False)["a"].locked is False

    def test_title_is_stored_trimmed_and_unlocked(self) -> None:
        """A title is stored trimmed and never locked."""
        assert agent_write(HOST, {"title": "  Refund  "}, True)["title"] == Variable(
            value="Refund", locked=False
        )

    def test_other_strings_are_stored_verbatim(self) -> None:
        """Only the title is trimmed: other values are whole values, stored as given."""
        assert agent_write(HOST, {"note": "  spaced  "}, False)["note"].value == "  spaced  "

    def test_write_does_not_mutate_its_input(self) -> None:
        """Writing returns a new mapping and leaves the old one untouched."""
        before = dict(HOST)
        agent_write(HOST, {"note": "changed"}, False)
        assert before == HOST


class TestPlain:
    def test_values_only(self) -> None:
        """``plain`` keeps values and drops lock flags."""
        assert plain(HOST) == {"order_id": "ORD-1", "note": "agent's", "title": "Order question"}
