"""Mutations of authored YAML for the fuzz tests: hostile documents built from real ones.

A mutation starts from an example's text and ends as bytes: the document is parsed, one node
is replaced (a wrong type, a huge or unicode string, a long name, a shared or recursive
node), dumped again, and some mutations then splice raw YAML in (deep nesting, alias bombs,
tags) or flip bytes. Each strategy draws its choices from hypothesis, so a failure shrinks
and replays.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import strategies as st

PLACEHOLDER = "zzfuzzplaceholderzz"
"""A plain scalar the dumper writes unquoted; a splice replaces it with raw YAML."""


def _laughs(levels: int, width: int) -> str:
    """A billion-laughs tree in one flow sequence: ``width ** levels`` leaves, a few lines."""
    items = [f"&l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * width)
        items.append(f"&l{level} [{refs}]")
    return "[" + ", ".join(items) + "]"


def _alias_chain(links: int) -> str:
    """Aliases nested in aliases: each link is a level deeper than the one it names."""
    items = ["&c0 [[[[x]]]]"]
    items += [f"&c{i} [[[[*c{i - 1}]]]]" for i in range(1, links)]
    return "[" + ", ".join(items) + "]"


SPLICES: list[str] = [
    "[" * 3000 + "]" * 3000,
    "{a: " * 3000 + "x" + "}" * 3000,
    "[" * 70 + "]" * 70,
    "&r [*r]",
    "&r {k: *r}",
    "&m {<<: *m}",
    "*undefined",
    _laughs(9, 9),
    _laughs(30, 2),
    "[&s " + "x" * 20_000 + ", " + ", ".join(["*s"] * 200) + "]",
    _alias_chain(40),
    "!!python/object/apply:os.system [echo hi]",
    "!!python/name:builtins.print",
    "!!binary /w==",
    "!!set {a, b}",
    "!!omap [{a: 1}]",
    "2024-13-45",
    "!!timestamp 2024-02-30",
    "1" * 5000,
    "0x" + "f" * 5000,
    ".nan",
    "-.inf",
    '"\\ud800"',
    '"a\\udfffb"',
    '"\\x00\\x1b\\x7f"',
    '"\\u2028\\u202e"',
    "!custom x",
    "&a x",
    "? [a, b]\n: c",
    "[a, b]: c",
]
"""Raw YAML spliced in for a placeholder: what a text-level mutation can do and a dumped
tree cannot (depth past the representer's recursion, anchors, tags, escapes)."""


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``node`` (its own ``()`` included), keys and positions."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _replace(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = root
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return root


def _rename(root: Any, path: tuple[Any, ...], name: Any) -> Any:
    """Rename the key at ``path`` (keeping its position); a path into a list is left alone."""
    if not path:
        return root
    parent = root
    for part in path[:-1]:
        parent = parent[part]
    if not isinstance(parent, dict):
        return root
    items = [(name if key == path[-1] else key, value) for key, value in parent.items()]
    parent.clear()
    parent.update(items)
    return root


def _unicode() -> st.SearchStrategy[str]:
    """Text with the characters YAML and UTF-8 stumble on: surrogates, controls, bidi."""
    return st.text(
        st.characters(codec=None, categories=["Cs", "Cc", "Cf", "Zl", "Zp", "Lu", "Ll", "Nd"])
        | st.sampled_from(["\ud800", "\udfff", "\x00", "\x85", "\ufeff", "\u2028", "'", '"']),
        min_size=1,
        max_size=12,
    )


def _wrong_value() -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**70), max_value=2**70)
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.text(max_size=8)
        | _unicode()
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
        max_leaves=6,
    )


KINDS: tuple[str, ...] = (
    "wrong-type",
    "unicode",
    "huge-string",
    "long-name",
    "long-key",
    "shared",
    "many",
    "recursive",
    "splice",
    "splice-key",
    "bytes",
    "drop",
)
"""The mutations :func:`mutated` makes; a test runs each kind, so every one is exercised."""


@st.composite
def mutated(draw: st.DrawFn, text: str, kind: str) -> bytes:
    """A hostile variant of the YAML document ``text`` by mutation ``kind`` (one of
    :data:`KINDS`), as the bytes of a file; where and with what are drawn."""
    data = yaml.safe_load(text)
    paths = _paths(data)
    path = draw(st.sampled_from(paths), label="path")
    if kind == "wrong-type":
        data = _replace(data, path, draw(_wrong_value()))
    elif kind == "unicode":
        data = _replace(data, path, draw(_unicode()))
    elif kind == "huge-string":
        size = draw(st.sampled_from([20_000, 70_000, 400_000, 1_200_000]))
        data = _replace(data, path, "x" * size)
    elif kind == "long-name":
        data = _replace(data, path, "a" * draw(st.sampled_from([65, 129, 300, 5000])))
    elif kind == "long-key":
        data = _rename(data, path, "a" * draw(st.sampled_from([65, 129, 300, 5000])))
    elif kind == "shared":
        # The same object at several places: the dumper writes an anchor and aliases.
        apart = [p for p in paths if p[: len(path)] != path and path[: len(p)] != p]
        node: Any = data if apart else "x"
        for part in draw(st.sampled_from(apart), label="shared") if apart else ():
            node = node[part]
        data = _replace(data, path, [node] * draw(st.integers(min_value=2, max_value=5)))
    elif kind == "many":
        # Past a count limit: a list's entries or a mapping's keys copied many times over.
        times = draw(st.sampled_from([3, 40, 200]), label="times")
        node = data
        for part in path:
            node = node[part]
        if isinstance(node, list) and node:
            data = _replace(data, path, node * times)
        elif isinstance(node, dict) and node:
            copies = {f"{key}-{n}": value for n in range(times) for key, value in node.items()}
            data = _replace(data, path, {**node, **copies})
    elif kind == "recursive":
        loop: list[Any] = []
        loop.append(loop)
        data = _replace(data, path, loop if draw(st.booleans()) else {"k": loop})
    elif kind == "drop" and path:
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        del parent[path[-1]]
    elif kind == "splice":
        data = _replace(data, path, PLACEHOLDER)
    elif kind == "splice-key":
        data = _rename(data, path, PLACEHOLDER)
        if isinstance(data, dict) and PLACEHOLDER not in data:
            data[PLACEHOLDER] = "x"
    dumped = yaml.safe_dump(data, sort_keys=False, allow_unicode=draw(st.booleans()), width=80)
    if kind in ("splice", "splice-key"):
        snippet = draw(st.sampled_from(SPLICES), label="splice")
        dumped = dumped.replace(PLACEHOLDER, snippet, 1)
    raw = dumped.encode("utf-8", "surrogatepass")
    if kind == "bytes":
        raw = draw(_flipped(raw))
    return raw


_SYNTAX = list(b"[]{}&*!:-|>'\"\n\t #%@`")
"""Bytes that mean something to YAML: a flip to one of them changes the structure."""


@st.composite
def _flipped(draw: st.DrawFn, raw: bytes) -> bytes:
    """``raw`` with a few bytes replaced, inserted or deleted (invalid UTF-8 included)."""
    buffer = bytearray(raw)
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        if not buffer:
            break
        at = draw(st.integers(min_value=0, max_value=len(buffer) - 1))
        edit = draw(st.sampled_from(["replace", "insert", "delete"]))
        byte = draw(st.integers(min_value=0, max_value=255) | st.sampled_from(_SYNTAX))
        if edit == "replace":
            buffer[at] = byte
        elif edit == "insert":
            buffer.insert(at, byte)
        else:
            del buffer[at]
    return bytes(buffer)
