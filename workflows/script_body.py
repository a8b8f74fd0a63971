"""Top-level ``await`` in a sandboxed script: the script as the body of an async function.

QuickJS evaluates a plain script with an indirect ``eval``, where ``await`` is no keyword, so a
script that awaits at its top level (``const r = await Promise.all(…); r;``) would not even
parse. archmax's sandbox accepts it, as a REPL does: such a script runs as the body of an async
function, and its value is the value of its last expression statement (awaited), or what it
``return``s.

This module decides which scripts take that path and prepares their body, with a JavaScript
tokenizer (comments, strings, template literals with their ``${…}``, regular expressions,
brackets), never a regular expression over the text:

- a script with neither ``await`` nor ``return`` outside every function is left alone: it runs
  as a plain script, exactly as before;
- otherwise its last top-level statement, when it is an expression statement, becomes
  ``return (<expression>);`` (the statement boundary found as JavaScript's automatic semicolon
  insertion finds it: a ``;``, a closed block, or a line break the next token cannot
  continue), and the body is wrapped as ``(async function () {<body>\\n})`` with the header on
  the script's first line, so every line number QuickJS reports is the script's own.

:func:`async_candidates` returns the wrapped texts to try in order (the rewritten body, then the
body as it is); the sandbox process compiles each in turn and keeps the first that parses, so
a statement this tokenizer misreads costs the value, never a script that would run.

Pure text processing (no I/O).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

HEADER: Final = "(async function () {"
"""The wrapper's opening, on the script's first line (no line break: line numbers hold)."""

FOOTER: Final = "\n})"
"""The wrapper's close, on a line of its own (a trailing ``//`` comment cannot swallow it)."""


def _words(text: str) -> list[str]:
    """A table written as one line of words."""
    return text.split()


_NAME = re.compile(r"[A-Za-z_$\u0080-\uffff#][\w$\u0080-\uffff]*")
_NUMBER = re.compile(
    r"0[xXoObB][\da-fA-F_]+n?|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?n?"
)
_PUNCTUATORS: Final = sorted(
    _words(
        ">>>= ... === !== **= <<= >>= >>> &&= ||= ??= => == != <= >= && || ?? ?. ++ -- += -= "
        "*= /= %= &= |= ^= ** << >> { } ( ) [ ] ; , < > + - * / % & | ^ ! ~ ? : = . @"
    ),
    key=len,
    reverse=True,
)

_KEYWORDS_BEFORE_EXPRESSION: Final = frozenset(
    {
        "return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw",
        "case", "do", "else", "yield", "await", "extends",
    }
)  # fmt: skip
"""Names after which a ``/`` opens a regular expression and no expression has ended."""

_CONTROL: Final = frozenset({"if", "for", "while", "switch", "catch", "with"})
"""Names whose ``( … ) {`` opens a block, not a function body."""

_STATEMENT_STARTS: Final = frozenset(
    {
        "var", "let", "const", "function", "class", "if", "for", "while", "do", "switch",
        "try", "return", "throw", "break", "continue", "import", "export", "debugger", "with",
    }
)  # fmt: skip
"""A last statement opening with one of these is no expression: it has no value to return."""

_CONTINUES: Final = frozenset(
    _words(
        "( [ . ?. , ? : = => + - * / % ** & | ^ && || ?? == != === !== < > <= >= << >> >>> "
        "+= -= *= /= %= **= &= |= ^= &&= ||= ??= <<= >>= >>>= ) ] }"
    )
)
"""Tokens that continue the statement before a line break (no semicolon is inserted)."""

_CONTINUING_NAMES: Final = frozenset({"in", "instanceof", "of", "else", "catch", "finally"})


@dataclass(frozen=True)
class Token:
    """One token: its kind, text and span, whether a line break precedes it, the bracket
    depth it sits at, and whether it is inside a function."""

    kind: str
    """``name``, ``number``, ``string``, ``template``, ``regex`` or ``punct``."""
    text: str
    start: int
    end: int
    newline_before: bool
    depth: int
    in_function: bool


@dataclass
class _Open:
    char: str
    function: bool = False
    after_do: bool = False
    params: bool = False


class _Unreadable(Exception):
    """The tokenizer lost its way (an unterminated literal, an unbalanced bracket)."""


def tokenize(source: str) -> list[Token]:
    """The tokens of ``source``; :class:`_Unreadable` when it cannot be read through."""
    tokens: list[Token] = []
    stack: list[_Open] = []
    i, n = 0, len(source)
    newline = False

    def previous() -> Token | None:
        return tokens[-1] if tokens else None

    def regex_allowed() -> bool:
        last = previous()
        if last is None:
            return True
        if last.kind == "name":
            return last.text in _KEYWORDS_BEFORE_EXPRESSION
        if last.kind in ("number", "string", "regex"):
            return False
        if last.kind == "template":
            return last.text.endswith("${")
        return last.text not in (")", "]", "}", "++", "--")

    def functions() -> bool:
        return any(o.function for o in stack)

    def emit(kind: str, start: int, end: int) -> None:
        nonlocal newline
        tokens.append(Token(kind, source[start:end], start, end, newline, len(stack), functions()))
        newline = False

    def template_from(start: int) -> int:
        """Scan template text from ``start`` (just past a backtick or a closing ``}``) to
        the closing backtick or a ``${``; emit it and return where scanning resumes."""
        j = start
        while j < n:
            c = source[j]
            if c == "\\":
                j += 2
                continue
            if c == "`":
                emit("template", start - 1, j + 1)
                return j + 1
            if c == "$" and source.startswith("${", j):
                emit("template", start - 1, j + 2)
                stack.append(_Open("${"))
                return j + 2
            j += 1
        raise _Unreadable("an unterminated template literal")

    while i < n:
        c = source[i]
        if c in "\n\r\u2028\u2029":
            newline = True
            i += 1
        elif c.isspace():
            i += 1
        elif source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end == -1 else end
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            if end == -1:
                raise _Unreadable("an unterminated comment")
            newline = newline or "\n" in source[i:end]
            i = end + 2
        elif c in "'\"":
            j = i + 1
            while j < n and source[j] != c:
                if source[j] == "\\":
                    j += 1
                elif source[j] == "\n":
                    raise _Unreadable("an unterminated string")
                j += 1
            if j >= n:
                raise _Unreadable("an unterminated string")
            emit("string", i, j + 1)
            i = j + 1
        elif c == "`":
            i = template_from(i + 1)
        elif c == "/" and regex_allowed():
            j, in_class = i + 1, False
            while j < n and source[j] != "\n":
                ch = source[j]
                if ch == "\\":
                    j += 2
                    continue
                if ch == "[":
                    in_class = True
                elif ch == "]":
                    in_class = False
                elif ch == "/" and not in_class:
                    break
                j += 1
            if j >= n or source[j] != "/":
                raise _Unreadable("an unterminated regular expression")
            j += 1
            while j < n and (source[j].isalnum() or source[j] in "_$"):
                j += 1
            emit("regex", i, j)
            i = j
        elif (c.isdigit() or c == ".") and (number := _NUMBER.match(source, i)):
            emit("number", i, number.end())
            i = number.end()
        elif name := _NAME.match(source, i):
            emit("name", i, name.end())
            i = name.end()
        else:
            punct = next((p for p in _PUNCTUATORS if source.startswith(p, i)), None)
            if punct is None:
                raise _Unreadable(f"an unexpected character {c!r}")
            if punct == "?." and i + 2 < n and source[i + 2].isdigit():
                punct = "?"
            if punct == "}" and stack and stack[-1].char == "${":
                stack.pop()
                i = template_from(i + 1)
                continue
            before = previous()
            if punct in ")]}":
                if not stack or stack[-1].char != {")": "(", "]": "[", "}": "{"}[punct]:
                    raise _Unreadable(f"an unbalanced {punct!r}")
                closed = stack.pop()
                emit("punct", i, i + 1)
                if punct == ")" and closed.params:
                    tokens[-1] = _mark_params(tokens[-1])
                i += 1
                continue
            emit("punct", i, i + len(punct))
            if punct == "(":
                stack.append(_Open("(", params=_opens_params(tokens)))
            elif punct == "[":
                stack.append(_Open("["))
            elif punct == "{":
                function = before is not None and (
                    before.text == "=>" or (before.text == ")" and before.kind == "params")
                )
                after_do = before is not None and before.kind == "name" and before.text == "do"
                stack.append(_Open("{", function=function, after_do=after_do))
            i += len(punct)
    if stack:
        raise _Unreadable(f"an unclosed {stack[-1].char!r}")
    return tokens


def _mark_params(token: Token) -> Token:
    """A ``)`` that closes a parameter list (a ``{`` after it opens a function body)."""
    return Token(
        "params", token.text, token.start, token.end, token.newline_before, token.depth,
        token.in_function,
    )  # fmt: skip


def _opens_params(tokens: list[Token]) -> bool:
    """Whether the ``(`` just emitted may open a parameter list: after ``function``
    (``function f(``, ``function* (``), or after a method's name (``m(``, ``get x(``,
    ``[key](``) that is no control keyword."""
    before = tokens[-2] if len(tokens) >= 2 else None
    if before is None:
        return False
    if before.kind == "name":
        return before.text not in _CONTROL and before.text not in _KEYWORDS_BEFORE_EXPRESSION
    return before.text in ("]", "*") or before.kind in ("string", "number")


@dataclass(frozen=True)
class TopLevel:
    """What the tokenizer read of a script's top level."""

    awaits: bool
    """``await`` outside every function."""
    returns: bool
    """``return`` outside every function."""
    last_expression: tuple[int, int] | None
    """The span of the last statement's expression (None: the last statement is none)."""


def read_top_level(source: str) -> TopLevel | None:
    """The top level of ``source``, or None when it cannot be tokenized."""
    try:
        tokens = tokenize(source)
    except _Unreadable:
        return None

    def keyword(index: int, word: str) -> bool:
        token = tokens[index]
        if token.kind != "name" or token.text != word or token.in_function:
            return False
        return index == 0 or tokens[index - 1].text not in (".", "?.")

    awaits = any(keyword(k, "await") for k in range(len(tokens)))
    returns = any(keyword(k, "return") for k in range(len(tokens)))
    end = len(tokens)
    while end and tokens[end - 1].depth == 0 and tokens[end - 1].text == ";":
        end -= 1
    if not end:
        return TopLevel(awaits, returns, None)
    start = max((k for k in range(1, end) if _boundary(tokens, k)), default=0)
    first = tokens[start]
    second = tokens[start + 1] if start + 1 < end else None
    if (
        (first.kind == "name" and first.text in _STATEMENT_STARTS)
        or first.text == "{"
        or (first.text == "async" and second is not None and second.text == "function")
        or (first.kind == "name" and second is not None and second.text == ":")
    ):
        return TopLevel(awaits, returns, None)
    return TopLevel(awaits, returns, (first.start, tokens[end - 1].end))


def _boundary(tokens: list[Token], k: int) -> bool:
    """Whether a top-level statement starts at token ``k``."""
    token, before = tokens[k], tokens[k - 1]
    if token.depth or before.depth:
        return False
    if before.text == ";":
        return True
    continues = token.text in _CONTINUES or (
        token.kind == "name" and token.text in _CONTINUING_NAMES
    )
    if token.kind == "template" and token.text.startswith("`"):
        continues = True  # a tagged template: ``f\n`x``` is one call
    if before.text == "}" and before.kind == "punct":
        if token.kind == "name" and token.text == "while" and _closes_do(tokens, k - 1):
            return False
        return not continues or token.text in ("++", "--")
    if not token.newline_before:
        return False
    if token.text in ("++", "--"):
        return True  # a restricted production: ``a\n++b`` is ``a; ++b``
    if before.kind == "name" and before.text in ("return", "break", "continue"):
        return True
    ends = before.kind in ("number", "string", "regex", "params") or (
        before.kind == "name" and before.text not in _KEYWORDS_BEFORE_EXPRESSION
    )
    ends = ends or (before.kind == "template" and before.text.endswith("`"))
    ends = ends or before.text in (")", "]", "}", "++", "--")
    return ends and not continues


def _closes_do(tokens: list[Token], close: int) -> bool:
    """Whether the ``}`` at ``close`` ends a ``do { … }`` block."""
    depth = 0
    for k in range(close, -1, -1):
        text = tokens[k].text if tokens[k].kind == "punct" else ""
        if text == "}":
            depth += 1
        elif text == "{":
            depth -= 1
            if depth == 0:
                return k > 0 and tokens[k - 1].kind == "name" and tokens[k - 1].text == "do"
    return False


@dataclass(frozen=True)
class Loading:
    """How the sandbox loads a script: as a plain script (no candidates), or as the first of
    ``candidates`` (async function texts) that compiles; with ``probe``, a script that
    compiles as a plain one still runs as one."""

    candidates: list[str]
    probe: bool = False


def loading(program: str) -> Loading:
    """How to load ``program`` (a prepared script). A script with no top-level ``await`` or
    ``return`` runs as a plain script. One the tokenizer cannot read through (a syntax error,
    most likely) is probed: plain if it compiles so, else the async body, whose error then
    names the script's own line."""
    top = read_top_level(program)
    if top is None:
        return Loading([HEADER + program + FOOTER], probe=True)
    return Loading(async_candidates(program, top))


def async_candidates(program: str, top: TopLevel | None = None) -> list[str]:
    """The async-function texts to compile for ``program`` (a prepared script), first
    choice first; none when the script has no top-level ``await`` or ``return`` or cannot
    be tokenized."""
    top = top or read_top_level(program)
    if top is None or not (top.awaits or top.returns):
        return []
    plain = HEADER + program + FOOTER
    if top.last_expression is None:
        return [plain]
    start, end = top.last_expression
    rewritten = program[:start] + "return (" + program[start:end] + ");" + program[end:]
    return [HEADER + rewritten + FOOTER, plain]
