"""The documentation site: ``mkdocs build --strict`` passes (warnings are errors: a broken
link, a page left out of the nav, a docstring mkdocstrings cannot render), the Python API page
documents exactly the package root's exports, the OpenAPI page renders every route, and the
docs extra is pinned."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

import archmax_temporal
from archmax_temporal.client.http.openapi import openapi_document
from tests.support.paths import REPO

DOCS = REPO / "docs"
BUILD_NEEDS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
"""What ``mkdocs build`` needs here: the ``docs`` extra (the ``test`` extra carries it)."""


def _missing() -> list[str]:
    return [name for name in BUILD_NEEDS if importlib.util.find_spec(name.split(".")[0]) is None]


def _pythonpath() -> str:
    """The repository first (mkdocstrings and the hooks import the package from it)."""
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


@pytest.mark.skipif(
    bool(_missing()),
    reason="mkdocs is not installed: pip install -e '.[docs]' (the test extra includes it)",
)
def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": _pythonpath()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    assert "WARNING" not in built.stderr, built.stderr[-4000:]
    published = json.loads((site / "http" / "openapi.json").read_text(encoding="utf-8"))
    assert published == json.loads(json.dumps(openapi_document()))
    reference = (site / "reference" / "python" / "index.html").read_text(encoding="utf-8")
    for name in archmax_temporal.__all__:
        assert f'id="{archmax_temporal._EXPORTS[name]}.{name}"' in reference, name
    assert not re.search(r":(func|class|data|mod):<code>", reference)  # roles shown as code
    assert "/v1/approvals" in (site / "http" / "openapi" / "index.html").read_text("utf-8")


def _nav_pages(entries: list[Any]) -> list[str]:
    pages: list[str] = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_page_is_in_the_nav_once() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages
    assert len(nav) == len(set(nav)) >= 25


def test_the_python_reference_documents_exactly_the_public_api() -> None:
    text = (DOCS / "reference" / "python.md").read_text(encoding="utf-8")
    documented = re.findall(r"^::: ([\w.]+)$", text, re.M)
    by_name = {path.rpartition(".")[2]: path.rpartition(".")[0] for path in documented}
    assert len(by_name) == len(documented)
    assert sorted(by_name) == archmax_temporal.__all__
    for name, module in by_name.items():
        assert archmax_temporal._EXPORTS[name] == module, name


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_openapi_export_is_the_codes() -> None:
    """``docs/http/openapi.json`` is what the server answers; regenerate it with
    ``python docs/hooks.py`` when this fails."""
    hooks = _hooks()
    assert hooks.EXPORT.read_text(encoding="utf-8") == hooks.export()


def test_the_openapi_page_renders_every_route_and_schema() -> None:
    document = openapi_document()
    hooks = _hooks()
    page = (DOCS / "http" / "openapi.md").read_text(encoding="utf-8")
    assert hooks.MARKER in page
    rendered: str = hooks.render(document)
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"### `{method.upper()} {path}`" in rendered
    for name in document["components"]["schemas"]:
        assert f"{{#schema-{name.lower()}}}" in rendered
    # every schema a route refers to links to a heading the page has
    for anchor in re.findall(r"\(#(schema-[\w-]+)\)", rendered):
        assert f"{{#{anchor}}}" in rendered, anchor


def test_the_docs_extra_is_pinned_in_the_test_extra_and_the_constraints() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras["docs"] and all("==" in pin for pin in extras["docs"])
    assert set(extras["docs"]) <= set(extras["test"])
    constraints = (REPO / "constraints.txt").read_text().splitlines()
    for pin in extras["docs"]:
        name, _, version = pin.partition("==")
        bare = re.sub(r"\[.*\]", "", name)
        assert f"{bare}=={version}" in constraints, pin
