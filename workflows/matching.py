"""The matchers a case shares with the runtime: ``/pattern/flags`` regexes and the partial
matcher of ``calledTool`` inputs and a mock's ``whenInput``.

Pure and deterministic, so the session workflow can match a declared mock against a tool call
inside workflow code, with the very function a case's ``calledTool`` assertion uses.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Protocol, TypeVar


class InvalidRegexError(ValueError):
    """A ``/pattern/flags`` string does not compile (or carries a flag JavaScript lacks)."""


# --- /pattern/flags strings ---------------------------------------------------------------

_REGEX_FORM = re.compile(r"/(.+)/([A-Za-z]*)", re.DOTALL)
_FLAGS: Final[dict[str, re.RegexFlag]] = {
    "i": re.IGNORECASE,
    "m": re.MULTILINE,
    "s": re.DOTALL,
    # No effect on a single test: global/sticky state, match indices, unicode (Python's
    # default for str patterns) and unicode sets.
    "g": re.NOFLAG,
    "d": re.NOFLAG,
    "u": re.NOFLAG,
    "v": re.NOFLAG,
    "y": re.NOFLAG,
}
_JS_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?![=!])")
_JS_BACKREF = re.compile(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>")


def is_regex(text: str) -> bool:
    """Whether ``text`` has the ``/pattern/flags`` form (it is then read as a regex)."""
    return isinstance(text, str) and _REGEX_FORM.fullmatch(text) is not None


def compile_regex(text: str) -> re.Pattern[str] | None:
    """The regex a ``/pattern/flags`` string stands for; None for any other string.

    Raises :class:`InvalidRegexError` when the string has the form but does not compile, or
    carries an unknown or repeated flag.
    """
    form = _REGEX_FORM.fullmatch(text) if isinstance(text, str) else None
    if form is None:
        return None
    pattern, flags = form.group(1), form.group(2)
    value = re.NOFLAG
    for flag in flags:
        if flag not in _FLAGS:
            raise InvalidRegexError(
                f"malformed regex {text!r}: unknown flag {flag!r} (flags: {''.join(_FLAGS)})"
            )
        if flags.count(flag) > 1:
            raise InvalidRegexError(f"malformed regex {text!r}: flag {flag!r} is repeated")
        value |= _FLAGS[flag]
    # JavaScript spellings Python's ``re`` writes differently.
    source = _JS_BACKREF.sub(r"(?P=\1)", _JS_NAMED_GROUP.sub("(?P<", pattern))
    if "y" in flags:
        source = rf"\A(?:{source})"
    try:
        return re.compile(source, value)
    except re.error as exc:
        raise InvalidRegexError(f"malformed regex {text!r}: {exc}") from None


def regex_problem(text: str) -> str | None:
    """Why a ``/pattern/flags`` string is malformed, or None (plain strings are never wrong)."""
    try:
        compile_regex(text)
    except InvalidRegexError as exc:
        return str(exc)
    return None


def match_token(token: str, text: str) -> bool:
    """A ``reply`` token against text: a regex search, or else a plain substring test."""
    regex = compile_regex(token)
    return token in text if regex is None else regex.search(text) is not None


# --- the partial matcher ------------------------------------------------------------------


def partial_match(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` satisfies ``expected``: the matcher of ``calledTool`` inputs and
    a mock's ``whenInput``.

    - a mapping matches when every declared key is present and matches; other keys are
      ignored, and nested mappings match partially too;
    - a list matches a list of the same length, element by element;
    - a ``/pattern/flags`` string is a regex searched in the value as text (a non-string
      value is stringified the way JavaScript would: ``42``, ``true``, compact JSON);
    - anything else matches by strict equality (``True`` is not ``1``).
    """
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        return all(
            key in actual and partial_match(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            return False
        return all(partial_match(e, a) for e, a in zip(expected, actual, strict=True))
    if isinstance(expected, str):
        regex = compile_regex(expected)
        if regex is not None:
            return regex.search(_as_text(actual)) is not None
    return _strict_equal(expected, actual)


def _strict_equal(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return expected == actual
    return type(expected) is type(actual) and bool(expected == actual)


def _as_text(value: Any) -> str:
    """``value`` as JavaScript's ``String(value)`` would read a JSON value (compact JSON for
    containers, which is what a regex over a structured argument wants to see)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


# --- mocks ----------------------------------------------------------------------------------


class _MockLike(Protocol):
    @property
    def tool(self) -> str: ...
    @property
    def when_input(self) -> dict[str, Any] | None: ...
    @property
    def result(self) -> Any: ...


def mock_result_text(result: Any) -> str:
    """A mock's result as the tool answers it: a string verbatim, anything else as JSON."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


M = TypeVar("M", bound=_MockLike)


def find_mock(mocks: list[M], tool: str, tool_input: Any) -> M | None:
    """The first mock (in declaration order) for ``tool`` whose ``whenInput`` matches."""
    for mock in mocks:
        if mock.tool == tool and (
            mock.when_input is None or partial_match(mock.when_input, tool_input)
        ):
            return mock
    return None
