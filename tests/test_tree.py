"""The tests' tree mirrors the code's: each test module sits in the folder of what it tests
(``tests/workflows/`` for ``workflows/``, ``tests/client/http/`` for ``client/http/``...), or
among the end-to-end runs, the seeds' statements, the docs' or the benchmarks' checks; shared
helpers live in ``tests/support/``, and no module imports from a ``conftest`` or from another
test module (a helper two modules need belongs in support)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO, TESTS

PACKAGE = "archmax_temporal"

OWN_FOLDERS = frozenset({"e2e", "seeds", "docs", "bench"})
"""Folders for what no single module owns: sessions end to end through several modules, the
seeds statement by statement, and the repository's docs and benchmarks (its own folders)."""

SUPPORT = "support"

WHOLE_PACKAGE = frozenset(
    {
        "test_one_name",
        "test_public_surface",
        "test_registries",
        "test_install",
        "test_deployment",
        "test_tree",
    }
)
"""Root test modules about the package or the repository as a whole, not one module of it."""


def _mirrored(repo: Path, folder: Path) -> bool:
    """Whether ``folder`` (relative to tests/) is a package folder of the product."""
    return (repo / PACKAGE / folder / "__init__.py").is_file()


def misplaced(repo: Path, tests: Path) -> list[str]:
    """Test modules outside the tree's rules, and folders that are no package."""
    problems = []
    for path in sorted(tests.rglob("*.py")):
        rel = path.relative_to(tests)
        if rel.parts[0] in ("fixtures", "histories"):
            continue
        if not (path.parent / "__init__.py").is_file():
            problems.append(f"{rel}: its folder has no __init__.py")
        if not path.name.startswith("test_"):
            continue
        folder = rel.parent
        if folder == Path("."):
            stem = path.stem.removeprefix("test_")
            if path.stem not in WHOLE_PACKAGE and not (repo / PACKAGE / f"{stem}.py").exists():
                problems.append(f"{rel}: names no top-level module of {PACKAGE}")
        elif folder.parts[0] == SUPPORT:
            problems.append(f"{rel}: a test module among the support helpers")
        elif folder.parts[0] not in OWN_FOLDERS:
            if not _mirrored(repo, folder):
                problems.append(f"{rel}: {folder}/ mirrors no package of {PACKAGE}")
            elif not _names_a_module(repo / PACKAGE / folder, path.stem.removeprefix("test_")):
                problems.append(f"{rel}: names no module of {folder}/")
    return problems


def _names_a_module(package: Path, stem: str) -> bool:
    """Whether ``stem`` is a module of ``package``, or one followed by what the tests are
    about (``model_errors``: ``model.py``'s errors)."""
    words = stem.split("_")
    for end in range(1, len(words) + 1):
        name = "_".join(words[:end])
        if (package / f"{name}.py").is_file() or (package / name / "__init__.py").is_file():
            return True
    return False


def _imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def bad_imports(tests: Path) -> list[str]:
    """Imports from a conftest or from a test module, anywhere under ``tests``."""
    problems = []
    for path in sorted(tests.rglob("*.py")):
        rel = path.relative_to(tests)
        for name in _imported_modules(path):
            last = name.split(".")[-1]
            if name.startswith("tests.") and (last == "conftest" or last.startswith("test_")):
                problems.append(f"{rel}: imports {name}")
    return sorted(set(problems))


def test_every_test_module_sits_where_the_tree_mirrors_the_code() -> None:
    assert misplaced(REPO, TESTS) == []


def test_no_module_imports_from_a_conftest_or_a_test_module() -> None:
    assert bad_imports(TESTS) == []


def test_each_product_package_with_a_test_module_has_its_folder() -> None:
    """The mirror is not empty: workflows, activities and the client's three packages each
    have test modules in their own folder."""
    for folder in (
        "workflows",
        "activities",
        "client",
        "client/cli",
        "client/http",
        "client/testing",
    ):
        assert any((TESTS / folder).glob("test_*.py")), folder


# --- the rules' negative cases, on a tree of the test's own ---------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    for name in (
        "__init__.py",
        "live.py",
        "workflows/__init__.py",
        "workflows/spec.py",
        "client/__init__.py",
    ):
        (repo / PACKAGE / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / PACKAGE / name).write_text("")
    tests = repo / "tests"
    for name, text in {"__init__.py": "", **files}.items():
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text(text)
    return repo, tests


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"test_spec.py": ""}, "test_spec.py: names no top-level module"),
        ({"misc/__init__.py": "", "misc/test_x.py": ""}, "misc/test_x.py: misc/ mirrors no"),
        ({"support/__init__.py": "", "support/test_h.py": ""}, "support/test_h.py: a test mod"),
        ({"workflows/test_spec.py": ""}, "workflows/test_spec.py: its folder has no __init__"),
        (
            {"workflows/__init__.py": "", "workflows/test_settings_and_wire.py": ""},
            "workflows/test_settings_and_wire.py: names no module of workflows/",
        ),
    ],
)
def test_a_module_out_of_place_is_named(
    tmp_path: Path, files: dict[str, str], problem: str
) -> None:
    repo, tests = _tree(tmp_path, files)
    assert [p for p in misplaced(repo, tests) if p.startswith(problem)], misplaced(repo, tests)


def test_modules_in_place_pass(tmp_path: Path) -> None:
    repo, tests = _tree(
        tmp_path,
        {
            "test_live.py": "",
            "workflows/__init__.py": "",
            "workflows/test_spec.py": "",
            "workflows/test_spec_errors.py": "",
            "e2e/__init__.py": "",
            "e2e/test_park.py": "",
            "support/__init__.py": "",
            "support/agents.py": "",
        },
    )
    assert misplaced(repo, tests) == []


@pytest.mark.parametrize(
    "line",
    [
        "from tests.conftest import running_agent",
        "from tests.e2e.test_metrics import GATED",
        "from tests.e2e import test_metrics",
        "import tests.conftest",
        "def f() -> None:\n    from tests.test_live import Recorder",
    ],
)
def test_an_import_from_a_conftest_or_a_test_module_is_named(tmp_path: Path, line: str) -> None:
    _, tests = _tree(tmp_path, {"test_live.py": line + "\n"})
    assert len(bad_imports(tests)) == 1, bad_imports(tests)


def test_an_import_from_support_passes(tmp_path: Path) -> None:
    _, tests = _tree(tmp_path, {"test_live.py": "from tests.support.agents import Scripted\n"})
    assert bad_imports(tests) == []
