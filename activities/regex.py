"""Regular expressions the model chooses, run in linear time.

``grep {"pattern": "^(a+)+$"}`` over ``"a" * 30 + "!"`` backtracks for minutes in Python's
``re``, holding the GIL: every session on the worker stalls and the retry stalls the next
worker. A model's pattern (and a model's glob, compiled to a regex) therefore runs on RE2
(``google-re2``), whose matching time is linear in the text and which releases the GIL while
it matches. RE2 takes Python's syntax with these differences:

- translated, so they mean what they mean in Python: ``\\Z`` (end of text), ``\\uXXXX`` and
  ``\\UXXXXXXXX``, ``\\N{NAME}``, ``{,n}`` (up to n), ``(?#comment)``;
- refused with a readable reason (:class:`UnsupportedPatternError`): backreferences
  (``\\1``, ``(?P=name)``), lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups
  and possessive quantifiers, conditionals, verbose mode ``(?x)``, repetition counts over
  1000;
- kept as RE2 has them: ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Final, Protocol, cast

import re2

from archmax_temporal.activities.store_errors import WorkspaceError

MAX_PATTERN_CHARS: Final = 4096
"""The longest pattern compiled: RE2 is linear in the text, its program grows with this."""


class Matcher(Protocol):
    """A compiled pattern: ``search`` anywhere, ``match`` at the start."""

    def search(self, text: str) -> object | None: ...

    def match(self, text: str) -> object | None: ...


class UnsupportedPatternError(WorkspaceError):
    """A model's regular expression that RE2 cannot run (a backreference, lookaround, ...) or
    that is malformed; the message says which and why."""


_NOT_LINEAR: Final = (
    "grep runs patterns in linear time (RE2), which has no backreferences, lookaround, "
    "atomic groups or possessive quantifiers"
)

_GROUPS: Final[tuple[tuple[str, str], ...]] = (
    ("(?=", "lookahead (?=...)"),
    ("(?!", "negative lookahead (?!...)"),
    ("(?<=", "lookbehind (?<=...)"),
    ("(?<!", "negative lookbehind (?<!...)"),
    ("(?>", "an atomic group (?>...)"),
    ("(?P=", "a named backreference (?P=name)"),
    ("(?(", "a conditional group (?(...)...)"),
)

_FLAGS: Final = re.compile(r"\(\?([a-zA-Z]+)(?:-[a-zA-Z]+)?[:)]")
_HEX: Final = re.compile(r"[0-9A-Fa-f]+")


def _options(*, dot_all: bool = False) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to the worker's stderr
    options.never_capture = True  # only whether (and where) it matches is ever asked
    options.dot_nl = dot_all
    return options


def _refuse(pattern: str, why: str) -> UnsupportedPatternError:
    return UnsupportedPatternError(f"cannot run the pattern {pattern[:200]!r}: {why}")


def translate(pattern: str) -> str:
    """``pattern`` in Python's syntax as RE2 syntax of the same meaning, or
    :class:`UnsupportedPatternError` naming the construct RE2 cannot run."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt in "uU":
                width = 4 if nxt == "u" else 8
                digits = pattern[i + 2 : i + 2 + width]
                if len(digits) != width or not _HEX.fullmatch(digits):
                    raise _refuse(pattern, f"\\{nxt} needs {width} hex digits")
                out.append(f"\\x{{{digits}}}")
                i += 2 + width
                continue
            if nxt == "N" and pattern.startswith("{", i + 2):
                end = pattern.find("}", i + 3)
                try:
                    char = unicodedata.lookup(pattern[i + 3 : end]) if end != -1 else ""
                except KeyError:
                    char = ""
                if not char:
                    raise _refuse(pattern, "\\N{...} names no Unicode character")
                out.append(f"\\x{{{ord(char):X}}}")
                i = end + 1
                continue
            if not in_class and nxt == "Z":
                out.append("\\z")
            elif not in_class and nxt in "123456789":
                raise _refuse(pattern, f"it uses a backreference (\\{nxt}); {_NOT_LINEAR}")
            else:
                out.append(c + nxt)
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            j = i + 1
            if pattern.startswith("^", j):
                j += 1
            if pattern.startswith("]", j):  # a leading ']' is a literal one
                j += 1
            out.append(pattern[i:j])
            i = j
            continue
        if c == "(" and pattern.startswith("(?", i):
            if pattern.startswith("(?#", i):
                end = pattern.find(")", i)
                i = n if end == -1 else end + 1
                continue
            for opener, name in _GROUPS:
                if pattern.startswith(opener, i):
                    raise _refuse(pattern, f"it uses {name}; {_NOT_LINEAR}")
            flags = _FLAGS.match(pattern, i)
            if flags is not None and "x" in flags.group(1):
                raise _refuse(pattern, "verbose mode (?x) is not supported; write it compactly")
        if c == "{":
            upto = re.match(r"\{,(\d+)\}", pattern[i:])
            if upto is not None:
                out.append(f"{{0,{upto.group(1)}}}")
                i += upto.end()
                continue
        if c in "*+?}" and pattern.startswith("+", i + 1) and not _escaped(pattern, i):
            raise _refuse(pattern, f"it uses a possessive quantifier ({c}+); {_NOT_LINEAR}")
        out.append(c)
        i += 1
    return "".join(out)


def _escaped(pattern: str, i: int) -> bool:
    """Whether ``pattern[i]`` is escaped by an odd run of backslashes."""
    run = 0
    while i - run - 1 >= 0 and pattern[i - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _explain(message: str) -> str:
    """RE2's reason in the model's terms."""
    if "invalid repetition size" in message:
        return "a repetition count is over 1000, the most RE2 allows"
    if "pattern too large" in message:
        return "the pattern is too large to run (simplify it)"
    if "invalid perl operator" in message or "invalid named capture" in message:
        return f"{message}; {_NOT_LINEAR}"
    return message


def compile_pattern(pattern: str) -> Matcher:
    """A model's pattern (Python syntax) compiled for linear-time matching, or
    :class:`UnsupportedPatternError` saying why it cannot run."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise _refuse(pattern, f"it is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}")
    try:
        re.compile(pattern)
    except re.error as exc:  # malformed in Python's own terms: say it as Python would
        raise UnsupportedPatternError(
            f"invalid regular expression {pattern[:200]!r}: {exc}"
        ) from None
    except (OverflowError, RecursionError, MemoryError):
        raise UnsupportedPatternError(f"invalid regular expression {pattern[:200]!r}") from None
    return compile_re2(translate(pattern), source=pattern)


def compile_re2(syntax: str, *, source: str | None = None, dot_all: bool = False) -> Matcher:
    """RE2 ``syntax`` compiled as is (a glob's regex), or :class:`UnsupportedPatternError`."""
    try:
        return cast(Matcher, re2.compile(syntax, _options(dot_all=dot_all)))
    except re2.error as exc:
        raw = exc.args[0] if exc.args else exc
        message = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise _refuse(source if source is not None else syntax, _explain(message)) from None


__all__ = ["Matcher", "UnsupportedPatternError", "compile_pattern", "compile_re2", "translate"]
