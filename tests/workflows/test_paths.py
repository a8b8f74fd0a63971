"""workflows/paths.py: one dotted-path parser for ``session:``, guards and the CLI (seed, §4.8)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archmax_temporal.workflows.paths import MISSING, InvalidPathError, parse_path, resolve_path

VARIABLES = {
    "conversation_id": "AAQk1",
    "mail": {"thread": {"id": "T-9"}, "empty": None},
    "triggers": [{"conversationId": "first"}, {"conversationId": "last"}],
    "items": ["a", "b", "c"],
    "flag": False,
    "constructor": "own",
}


class TestParsePath:
    @pytest.mark.parametrize(
        ("path", "segments"),
        [
            ("conversation_id", ["conversation_id"]),
            ("mail.thread.id", ["mail", "thread", "id"]),
            ("triggers.-1.conversationId", ["triggers", -1, "conversationId"]),
            ("items.0", ["items", 0]),
            ("order-lookup.result", ["order-lookup", "result"]),
            ("_private.x", ["_private", "x"]),
        ],
    )
    def test_names_and_indices(self, path: str, segments: list[str | int]) -> None:
        """A path splits on dots into names and integer indices, negatives included."""
        assert parse_path(path) == segments

    @pytest.mark.parametrize(
        "path",
        [
            "",
            "   ",
            "a..b",
            ".a",
            "a.",
            "${{conversation_id}}",
            "conversation_id}}",
            "-1.x",
            "0",
            "a.b c",
            "a.b/c",
            "a.1.5x",
            "a.[0]",
        ],
    )
    def test_malformed_paths_are_refused(self, path: str) -> None:
        """Empty paths or segments, ``${{}}`` wrapping, a leading index or junk is refused."""
        with pytest.raises(InvalidPathError):
            parse_path(path)

    @pytest.mark.parametrize("path", [None, 3, ["a"]])
    def test_non_string_path_is_refused(self, path: object) -> None:
        """A path that is not a string is an InvalidPathError, not a crash."""
        with pytest.raises(InvalidPathError):
            parse_path(path)  # type: ignore[arg-type]  # a wrong type on purpose

    def test_invalid_path_is_a_value_error(self) -> None:
        """InvalidPathError is a ValueError whose message quotes the path."""
        with pytest.raises(ValueError, match=r"'a\.\.b'"):
            parse_path("a..b")

    @pytest.mark.parametrize("path", ["conversation_id\n", "items.1\n"])
    def test_trailing_newline_is_refused(self, path: str) -> None:
        """A path with a trailing line break (a YAML block scalar) is malformed."""
        with pytest.raises(InvalidPathError):
            parse_path(path)

    def test_non_ascii_digits_are_not_an_index(self) -> None:
        """Only ASCII digits form an index: ``items.١`` is no path."""
        with pytest.raises(InvalidPathError):
            parse_path("items.\u0661")

    @pytest.mark.parametrize("path", ["\nitems", "items\n.1", "items.-1\n"])
    def test_embedded_newlines_are_refused(self, path: str) -> None:
        """A line break anywhere in a segment is malformed, a trailing one included."""
        with pytest.raises(InvalidPathError):
            parse_path(path)

    @given(
        st.lists(
            st.one_of(
                st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True),
                st.integers(min_value=-50, max_value=50),
            ),
            min_size=1,
            max_size=6,
        ).filter(lambda segs: isinstance(segs[0], str))
    )
    def test_written_segments_parse_back(self, segments: list[str | int]) -> None:
        """Joining well-formed segments with dots and parsing gives the same segments back."""
        assert parse_path(".".join(map(str, segments))) == segments


class TestResolvePath:
    @pytest.mark.parametrize(
        ("path", "value"),
        [
            ("conversation_id", "AAQk1"),
            ("mail.thread.id", "T-9"),
            ("triggers.-1.conversationId", "last"),
            ("triggers.0.conversationId", "first"),
            ("triggers.-2.conversationId", "first"),
            ("items.-3", "a"),
            ("mail.thread", {"id": "T-9"}),
            ("flag", False),
        ],
    )
    def test_resolves_names_indices_and_negative_indices(self, path: str, value: object) -> None:
        """Names read mapping keys, indices read list entries, negatives count from the end."""
        assert resolve_path(path, VARIABLES) == value

    def test_resolved_none_is_not_missing(self) -> None:
        """A field that holds ``null`` resolves to None, distinct from MISSING."""
        assert resolve_path("mail.empty", VARIABLES) is None

    @pytest.mark.parametrize(
        "path",
        [
            "nope",
            "mail.nope",
            "mail.thread.id.deeper",
            "items.3",
            "items.-4",
            "items.name",
            "mail.0",
            "conversation_id.0",
            "flag.x",
            "mail.empty.x",
        ],
    )
    def test_absent_steps_are_missing(self, path: str) -> None:
        """Any absent step, out-of-range index or index into a non-list gives MISSING."""
        assert resolve_path(path, VARIABLES) is MISSING

    @pytest.mark.parametrize("name", ["length", "constructor", "__proto__"])
    def test_prototype_names_never_resolve(self, name: str) -> None:
        """``length``, ``constructor`` and ``__proto__`` never resolve, even as own keys."""
        assert resolve_path(f"x.{name}", {"x": {name: 1}}) is MISSING

    def test_accepts_pre_parsed_segments(self) -> None:
        """A segment list resolves the same way as its text."""
        assert resolve_path(["triggers", -1, "conversationId"], VARIABLES) == "last"

    def test_malformed_path_raises_rather_than_missing(self) -> None:
        """A malformed path is an error at resolution too, never a silent MISSING."""
        with pytest.raises(InvalidPathError):
            resolve_path("triggers..conversationId", VARIABLES)

    def test_missing_has_a_readable_repr(self) -> None:
        """The sentinel prints as MISSING."""
        assert repr(MISSING) == "MISSING"

    @given(st.lists(st.integers(), min_size=1, max_size=20), st.data())
    def test_negative_index_mirrors_positive(self, items: list[int], data: st.DataObject) -> None:
        """``-k`` reads the same entry as ``len - k`` for every in-range k."""
        k = data.draw(st.integers(min_value=1, max_value=len(items)))
        root = {"xs": items}
        assert resolve_path(f"xs.-{k}", root) == resolve_path(f"xs.{len(items) - k}", root)
