"""The distribution installs one import name, ``archmax_temporal``, and works beside a user
project that has its own ``client/`` and ``workflows/`` packages.

The wheel is built from this checkout and installed, as ``pip install .`` would, into a fresh
virtual environment whose only other entries are the already-installed dependencies; the
checks run from inside the user's project, where the working directory is first on
``sys.path``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.support.paths import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip install .`` would build (no network: the test extras carry setuptools),
    built from a copy of the sources so the checkout gains no ``build/`` folder."""
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "worker.py"):
        shutil.copy2(REPO / name, source / name)
    for name in ("archmax_temporal", "workflows", "activities", "client"):
        shutil.copytree(
            REPO / name,
            source / name,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    demo = Path("examples", "support-inbox", "workflows")
    shutil.copytree(REPO / demo, source / demo, ignore=shutil.ignore_patterns("sessions"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        check=True,
        cwd=out,
        timeout=300,
    )
    (built,) = out.glob("archmax_temporal-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv holding the wheel; the dependencies come from this interpreter's
    site-packages through a path file (whose own path files, the editable checkout's among
    them, are not processed: only a venv's own site directory is)."""
    home = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(home)
    python = home / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (purelib / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(purelib)
    yield python


def _site_packages_tops(python: Path) -> set[str]:
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {entry.name for entry in Path(purelib).iterdir()}


def _user_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    for package in ("client", "workflows"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text(f"OWNER = 'the user project: {package}'\n")
    return project


def test_the_wheel_holds_one_top_level_package_with_its_types_and_the_demo(wheel: Path) -> None:
    """Nothing but ``archmax_temporal`` (and its dist-info) at the top; ``py.typed``, the
    demo example and the inbox's templates, stylesheet and script ship inside it; no test,
    bench or task file rides along."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/")[0] for name in names}
    (metadata,) = tops - {"archmax_temporal"}
    assert metadata.endswith(".dist-info")
    assert "archmax_temporal/py.typed" in names
    assert "archmax_temporal/workflows/session.py" in names
    assert "archmax_temporal/worker.py" in names
    assert "archmax_temporal/examples/support-inbox/workflows/support-inbox/workflow.yaml" in names
    http = "archmax_temporal/client/http"
    shipped = {f"{http}/templates/{page}.html" for page in ("base", "list", "session", "login")}
    assert shipped | {f"{http}/static/inbox.css", f"{http}/static/inbox.js"} <= set(names)
    assert not [n for n in names if "/tests/test_" in n or n.endswith("tasks.py")]
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        assert "archmax = archmax_temporal.client.cli:main" in archive.read(entry_points).decode()


def test_site_packages_gains_no_client_workflows_activities_or_worker(installed: Path) -> None:
    """The names a user's own project is likely to hold stay theirs."""
    tops = _site_packages_tops(installed)
    assert "archmax_temporal" in tops
    assert not tops & {"client", "workflows", "activities", "worker.py", "worker"}


def test_imports_beside_a_user_project_with_its_own_client_and_workflows(
    installed: Path, tmp_path: Path
) -> None:
    """From inside the user's project (cwd first on sys.path), the host API, the workflow and
    the user's own packages all import, each from where it belongs; the inbox finds its
    templates and script in the installed package."""
    project = _user_project(tmp_path)
    script = (
        "import client, workflows\n"
        "from archmax_temporal import create_agent, __version__\n"
        "import archmax_temporal.workflows.session as session\n"
        "import archmax_temporal.worker\n"
        "assert client.OWNER.endswith('client'), client.__file__\n"
        "assert workflows.OWNER.endswith('workflows'), workflows.__file__\n"
        "assert 'site-packages' in session.__file__, session.__file__\n"
        "from archmax_temporal.client.http.inbox import STATIC, TEMPLATES\n"
        "assert 'site-packages' in str(TEMPLATES), TEMPLATES\n"
        "assert (TEMPLATES / 'session.html').is_file() and (STATIC / 'inbox.js').is_file()\n"
        "print(__version__)\n"
    )
    ran = subprocess.run(
        [str(installed), "-c", script],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() not in ("", "0+unknown")


def test_the_demo_runs_from_the_installed_package(
    installed: Path, tmp_path: Path, env: WorkflowEnvironment
) -> None:
    """``python -m archmax_temporal demo`` from a plain install: the shipped example is copied
    into ``./archmax-demo`` (site-packages is not the user's to write to) and the session
    parks, is delivered the reply and answers."""
    project = _user_project(tmp_path)
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("ARCHMAX_STORE", "ARCHMAX_ROOT", "ARCHMAX_TASK_QUEUE")
    }
    environment["TEMPORAL_ADDRESS"] = env.client.service_client.config.target_host
    ran = subprocess.run(
        [str(installed), "-m", "archmax_temporal", "demo"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=180,
        env=environment,
    )
    assert ran.returncode == 0, ran.stderr
    assert "ORD-1001" in ran.stdout
    assert (project / "archmax-demo" / "workflows" / "support-inbox" / "workflow.yaml").is_file()
    assert list((project / "archmax-demo" / "sessions").glob("demo-*/artifacts/trail.json"))
