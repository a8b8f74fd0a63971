"""Text made safe to keep: lone surrogates replaced, secrets scrubbed, previews bounded."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from archmax_temporal.workflows.text import REPLACEMENT, clean, clean_str, preview, scrub


class TestClean:
    def test_a_lone_surrogate_from_json_becomes_the_replacement_character(self) -> None:
        """Valid JSON can decode to a string no UTF-8 encoder takes; cleaned, it encodes."""
        decoded = json.loads('{"content": "bad \\ud800 end"}')
        fixed, altered = clean(decoded)
        assert altered
        assert fixed == {"content": f"bad {REPLACEMENT} end"}
        fixed["content"].encode("utf-8")

    def test_a_surrogate_pair_becomes_its_character(self) -> None:
        """A well-formed pair written as two escapes is one emoji, not two replacements."""
        pair = json.loads('"\\ud83d\\ude00"')
        assert clean_str(pair)[0] == "😀"

    def test_keys_and_nested_values_are_cleaned(self) -> None:
        """Mapping keys and list items are cleaned too; untouched values come back as is."""
        value = {"a\udc00": ["ok", "x\ud800"], "n": 1}
        fixed, altered = clean(value)
        assert altered
        assert fixed == {f"a{REPLACEMENT}": ["ok", f"x{REPLACEMENT}"], "n": 1}
        same = {"plain": ["text", 2]}
        assert clean(same) == (same, False)

    @given(st.text())
    def test_every_cleaned_string_encodes_as_utf8(self, text: str) -> None:
        """Whatever the input, the cleaned text is valid UTF-8; valid input is unchanged."""
        fixed, altered = clean_str(text)
        fixed.encode("utf-8")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            assert altered
        else:
            assert fixed == text and not altered


class TestScrub:
    def test_configured_keys_and_key_shapes_are_removed(self) -> None:
        """A gateway echoing the key (401 text, a quoted header) leaves no trace of it."""
        key = "sk-live-0123456789abcdef"
        text = (
            f"401 Incorrect API key provided: {key}. "
            "upstream said: Authorization: Bearer abcdefghijklmnop; api_key=zzzzzzzzzz"
        )
        scrubbed = scrub(text, [key])
        assert key not in scrubbed
        assert "abcdefghijklmnop" not in scrubbed
        assert "zzzzzzzzzz" not in scrubbed
        assert "[redacted]" in scrubbed

    def test_text_without_secrets_is_unchanged(self) -> None:
        """Ordinary provider text passes through."""
        text = "model endpoint answered 503: overloaded, try again"
        assert scrub(text, ["not-in-it-secret"]) == text


def test_preview_cuts_and_marks_long_values() -> None:
    """A large value is cut at the limit and says how much was left out."""
    assert preview("short", 10) == "short"
    cut = preview("x" * 1000, 100)
    assert cut.startswith("x" * 100) and cut.endswith("…(+900 chars)")
    assert preview({"k": [1, 2]}, 50) == '{"k": [1, 2]}'
