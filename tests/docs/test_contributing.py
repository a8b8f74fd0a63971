"""CONTRIBUTING.md's module map is the tree's, and its recipes name files that exist."""

from __future__ import annotations

import re

from tests.support import module_map
from tests.support.paths import REPO


def test_the_module_map_is_the_trees() -> None:
    """Regenerate with ``python -m tests.support.module_map --write`` when this fails."""
    assert module_map.current() == module_map.render()


def test_the_map_has_one_line_per_module_and_each_exists() -> None:
    lines = module_map.current().splitlines()
    paths = [re.match(r"- `([^`]+)`: ", line) for line in lines]
    assert all(paths), [line for line, path in zip(lines, paths, strict=True) if not path]
    named = [path.group(1) for path in paths if path]
    assert len(named) == len(set(named)) >= 100
    assert all((REPO / path).is_file() for path in named)
    assert "workflows/session.py" in named and "worker.py" in named
    # archmax_temporal/ links to the folders: each module is listed once, by its folder
    assert not any(path.startswith("archmax_temporal/workflows/") for path in named)


def test_a_new_module_would_show() -> None:
    """The map is made from the tree: a module the map lacks makes the check fail."""
    rendered = module_map.render().splitlines()
    assert module_map.current() != "\n".join(rendered[1:])


def test_every_recipe_is_there() -> None:
    text = module_map.CONTRIBUTING.read_text(encoding="utf-8")
    for recipe in (
        "**Add an assertion kind**",
        "**Add a case step**",
        "**Add a workspace tool.**",
        "**Add an activity.**",
        "**Add an HTTP route.**",
    ):
        section = text.split(recipe, 1)[1].split("\n**", 1)[0]
        assert "Copy `tests/" in section, recipe
