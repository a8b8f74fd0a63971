"""activities/regex.py: a model's patterns run in linear time, in Python's syntax."""

from __future__ import annotations

import re

import pytest

from archmax_temporal.activities.regex import UnsupportedPatternError, compile_pattern, translate


class TestSemantics:
    @pytest.mark.parametrize(
        ("pattern", "text", "hit"),
        [
            (r"^ab\Z", "ab", True),  # Python's \Z is RE2's \z
            (r"^ab\Z", "abc", False),
            (r"^a{,2}$", "aa", True),  # {,n} means up to n, as in Python
            (r"^a{,2}$", "aaa", False),
            (r"\u00e9t\u00E9", "été", True),
            (r"\N{LATIN SMALL LETTER E WITH ACUTE}", "é", True),
            (r"(?i)hello", "HeLLo", True),
            (r"a(?#a comment)b", "ab", True),
            (r"[]a]", "]", True),  # a leading ']' is literal in a class
            (r"[\u0041-\u0043]", "B", True),
            (r"(?P<word>\w+)-(?:x|y)", "ab-y", True),
            (r"\\Z", "\\Z", True),  # an escaped backslash, then a literal Z
            (r"a\{,2}", "a{,2}", True),
        ],
    )
    def test_python_meaning_is_kept(self, pattern: str, text: str, hit: bool) -> None:
        """Each pattern means on RE2 what it means in Python's ``re``."""
        assert (compile_pattern(pattern).search(text) is not None) is hit
        assert (re.search(pattern, text) is not None) is hit

    def test_translation_leaves_classes_alone(self) -> None:
        """Inside a character class ``Z`` and ``{`` are literals, as in Python."""
        assert translate(r"[\Z{,2}]") == r"[\Z{,2}]"


class TestRefusals:
    @pytest.mark.parametrize(
        ("pattern", "why"),
        [
            (r"(a)\1", "backreference (\\1)"),
            (r"(?P<x>a)(?P=x)", "named backreference"),
            (r"foo(?=bar)", "lookahead"),
            (r"foo(?!bar)", "negative lookahead"),
            (r"(?<=a)b", "lookbehind"),
            (r"(?<!a)b", "negative lookbehind"),
            (r"(?>a+)b", "atomic group"),
            (r"a++b", "possessive quantifier"),
            (r"(?x) a b", "verbose mode"),
            (r"a{1001}", "over 1000"),
        ],
    )
    def test_what_re2_cannot_run_is_named(self, pattern: str, why: str) -> None:
        """A construct RE2 has not is refused with a reason the model can act on."""
        with pytest.raises(UnsupportedPatternError) as caught:
            compile_pattern(pattern)
        assert why in str(caught.value)
        assert "linear time" in str(caught.value) or why in ("verbose mode", "over 1000")

    def test_a_malformed_pattern_is_invalid_in_pythons_words(self) -> None:
        """A pattern Python itself rejects says so, as Python would."""
        with pytest.raises(UnsupportedPatternError, match="invalid regular expression"):
            compile_pattern("(")

    def test_an_overlong_pattern_is_refused(self) -> None:
        with pytest.raises(UnsupportedPatternError, match="the limit is"):
            compile_pattern("a" * 5000)
