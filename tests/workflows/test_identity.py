"""Session ids are opaque; the store's folder name for one is stable, safe and reversible."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archmax_temporal.workflows.errors import InvalidSessionIdError
from archmax_temporal.workflows.identity import (
    MAX_FOLDER_BYTES,
    check_session_id,
    folder_name,
    legacy_folder_name,
    session_id_of,
)

_IDS = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=255
).filter(lambda text: len(text.encode("utf-8")) <= 1000)


class TestCheck:
    @pytest.mark.parametrize(
        "session_id",
        ["AAQk-1", "<CAF+x=1@mail.gmail.com>", "CASE #12", "../x", "a/b", "ünïcode", "x" * 255],
    )
    def test_any_printable_text_is_an_id(self, session_id: str) -> None:
        """Punctuation, slashes, spaces and non-ASCII are all fine."""
        assert check_session_id(session_id) == session_id

    @pytest.mark.parametrize("session_id", ["", "abc\n", "tab\there", "x" * 256, "bad\ud800"])
    def test_empty_long_control_or_invalid_text_is_refused(self, session_id: str) -> None:
        """The typed error says what is wrong, and where the id came from when told."""
        with pytest.raises(InvalidSessionIdError) as raised:
            check_session_id(session_id, source="session path 'conversation_id'")
        assert "from session path 'conversation_id'" in str(raised.value)


class TestFolderName:
    @pytest.mark.parametrize("plain", ["AAQk-1", "demo-1a2b", "chat.42", "th_01".replace("_", "-")])
    def test_an_id_of_the_old_alphabet_is_its_own_folder(self, plain: str) -> None:
        """Every id this project accepted before keeps its folder."""
        assert folder_name(plain) == plain

    @pytest.mark.parametrize("session_id", ["../x", ".", "..", "_specs", "a/b", ".hidden"])
    def test_nothing_escapes_hides_or_shadows_a_runtime_area(self, session_id: str) -> None:
        """No ``/``, no leading dot, no ``..``, never ``_specs``."""
        name = folder_name(session_id)
        assert "/" not in name and not name.startswith(".") and ".." not in name
        assert name != "_specs"

    @given(_IDS)
    def test_every_id_round_trips_or_is_digest_shortened(self, session_id: str) -> None:
        """The encoding reads back to the id; a too-long name ends in a digest instead."""
        name = folder_name(session_id)
        assert len(name.encode()) <= MAX_FOLDER_BYTES
        assert "/" not in name and name not in (".", "..")
        back = session_id_of(name)
        assert back is None or back == session_id

    def test_distinct_long_ids_get_distinct_folders(self) -> None:
        """Two long ids that share a prefix do not share a folder."""
        first, second = "€" * 200 + "a", "€" * 200 + "b"
        assert folder_name(first) != folder_name(second)

    def test_a_plain_id_never_spells_a_shortened_name(self) -> None:
        """A 200-byte plain id that spells another id's shortened name (as they were before
        0.2: a readable prefix, ``~`` and 16 hex digits) gets its own folder, not the other's."""
        long_id = "thread-" + "x" * 240
        spelled = legacy_folder_name(long_id)
        assert spelled is not None and check_session_id(spelled) == spelled
        assert folder_name(spelled) == spelled  # a plain id is its own folder
        assert folder_name(long_id) != spelled

    @given(_IDS, _IDS)
    def test_distinct_ids_get_distinct_folders(self, first: str, second: str) -> None:
        """The map from ids to folders is injective, whatever their lengths."""
        if first != second:
            assert folder_name(first) != folder_name(second)

    @given(st.text(alphabet="%~A", min_size=190, max_size=240))
    def test_shortening_never_splits_an_escape(self, session_id: str) -> None:
        """A shortened name never ends its prefix inside a ``%XX`` escape."""
        name = folder_name(session_id)
        prefix = name.split("%~")[0] if "%~" in name else name
        assert all(prefix[i + 1 : i + 3].isalnum() for i, c in enumerate(prefix) if c == "%")
