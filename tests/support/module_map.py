"""CONTRIBUTING.md's module map, generated from the tree: one line a module, its path and the
first sentence of its docstring.

``tests/docs/test_contributing.py`` fails when the map in CONTRIBUTING.md is not what this module
generates (a module added, removed, renamed, or its docstring's first sentence changed).
Regenerate it in place, from the repository's root::

    python -m tests.support.module_map --write
"""

from __future__ import annotations

import ast
import re
import sys
import tokenize
from pathlib import Path

from tests.support.paths import REPO

CONTRIBUTING = REPO / "CONTRIBUTING.md"
BEGIN = "<!-- modules:begin -->"
END = "<!-- modules:end -->"
PACKAGES = ("archmax_temporal", "workflows", "activities", "client")
"""The product's folders; ``archmax_temporal/`` contributes its own files, not its links."""
MAX_CHARS = 150
"""A summary longer than this is cut at a word, marked with an ellipsis."""


def modules() -> list[Path]:
    """Every module of the product, as a path relative to the repository, sorted."""
    found = [REPO / "worker.py"]
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            relative = path.relative_to(REPO)
            # archmax_temporal/ links to the folders; each module is listed once, by its folder
            if path.is_symlink() or any((REPO / p).is_symlink() for p in relative.parents):
                continue
            if "examples" in relative.parts or "__pycache__" in relative.parts:
                continue
            found.append(path)
    return sorted(path.relative_to(REPO) for path in found)


def docstring(path: Path) -> str:
    """The module's docstring, read from its first tokens (parsing whole files is slow)."""
    with (REPO / path).open(encoding="utf-8") as source:
        for token in tokenize.generate_tokens(source.readline):
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING):
                continue
            if token.type == tokenize.STRING:
                value = ast.literal_eval(token.string)
                return value if isinstance(value, str) else ""
            return ""
    return ""


def summary(path: Path) -> str:
    """The first sentence of the module's docstring, in markdown's code spans."""
    first = " ".join(docstring(path).strip().split("\n\n", 1)[0].split())
    if not first:
        return "the package" if path.name == "__init__.py" else "(no docstring)"
    first = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    first = re.sub(r":[a-z]+:`~?\.?([^`]+)`", r"`\1`", first).replace("``", "`")
    if len(first) > MAX_CHARS:
        first = first[:MAX_CHARS].rsplit(" ", 1)[0] + " …"
        if first.count("`") % 2:
            first = first.replace(" …", "` …")
    return first


def render() -> str:
    """The map as it belongs between the markers."""
    return "\n".join(f"- `{path.as_posix()}`: {summary(path)}" for path in modules())


def current() -> str:
    """The map CONTRIBUTING.md holds now."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def write() -> None:
    """Replace the map in CONTRIBUTING.md with a fresh one."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    CONTRIBUTING.write_text(f"{head}{BEGIN}\n{render()}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(render())
