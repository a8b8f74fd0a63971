"""The lists a user reads are each kept once and agree with the code: the package root's
exports and the docs' API list (``docs/authoring/python.md``), the error tree drawn in
``workflows/errors.py``, the case step kinds. Importing the host face or asking for help
loads no more than it needs."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import uuid
from pathlib import Path

from temporalio.client import Client

import archmax_temporal
from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.agent import AgentOpener, create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.testing import assertions, steps
from archmax_temporal.worker import build_worker
from archmax_temporal.workflows import errors
from tests.support.agents import Scripted, copy_example
from tests.support.paths import EXAMPLES, REPO

API_PAGE = REPO / "docs" / "authoring" / "python.md"
"""The docs page that lists the package root's exports."""


def _readme_api_names() -> list[str]:
    text = API_PAGE.read_text(encoding="utf-8")
    block = re.search(r"<!-- api:begin -->(.*?)<!-- api:end -->", text, re.S)
    assert block is not None, f"{API_PAGE.name} has no <!-- api:begin --> … <!-- api:end --> block"
    return sorted(set(re.findall(r"`(\w+)`", block.group(1))))


class TestPackageRoot:
    def test_all_is_the_export_table_and_every_name_resolves(self) -> None:
        """``__all__`` lists exactly the lazily exported names, and each one imports."""
        exports = archmax_temporal._EXPORTS
        assert archmax_temporal.__all__ == sorted(exports)
        for name in archmax_temporal.__all__:
            value = getattr(archmax_temporal, name)
            assert getattr(value, "__name__", name) == name

    def test_the_docs_list_exactly_the_public_api(self) -> None:
        """The host API page's list (docs/authoring/python.md) and ``__all__`` name the same
        things."""
        assert _readme_api_names() == archmax_temporal.__all__

    def test_the_version_is_the_distributions(self) -> None:
        """``__version__`` comes from the installed distribution's metadata."""
        from importlib import metadata

        assert archmax_temporal.__version__ == metadata.version("archmax-temporal")

    def test_an_unknown_name_is_an_attribute_error(self) -> None:
        """A typo fails like any module attribute, naming the package."""
        try:
            archmax_temporal.create_agnet  # noqa: B018
        except AttributeError as exc:
            assert "archmax_temporal" in str(exc)
        else:  # pragma: no cover
            raise AssertionError("no AttributeError")


def _loaded_after(code: str) -> set[str]:
    """The top-level module names a fresh interpreter holds after running ``code``."""
    probe = code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))\n"
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return set(ran.stdout.split())


class TestLazyImports:
    def test_importing_create_agent_loads_no_runtime(self) -> None:
        """``from archmax_temporal import create_agent`` imports neither Temporal, pydantic,
        openai nor the case runner: they load when an agent opens."""
        loaded = _loaded_after("from archmax_temporal import create_agent")
        heavy = {"temporalio", "pydantic", "openai", "archmax_temporal.client.testing"}
        assert not loaded & heavy

    def test_help_loads_only_the_parser(self) -> None:
        """``archmax help`` answers from the standard library alone."""
        loaded = _loaded_after(
            "import contextlib, io\n"
            "from archmax_temporal.client.cli.app import run_cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert run_cli(['help']) == 0\n"
        )
        assert not loaded & {"temporalio", "pydantic", "openai", "yaml", "structlog"}

    def test_the_host_api_does_not_import_the_case_runner(self) -> None:
        """Opening the host API (``archmax_temporal.client.host``) leaves the ``testing`` wing
        unloaded."""
        loaded = _loaded_after("import archmax_temporal.client.host")
        assert "temporalio" in loaded  # the probe does load the host
        assert not {m for m in loaded if m.startswith("archmax_temporal.client.testing")}

    def test_the_host_api_and_the_commands_load_no_openai(self) -> None:
        """The ``openai`` package (about a second of imports) loads only where a model client
        is built (a worker, a grader): ``archmax sessions`` and the host API never pay it."""
        loaded = _loaded_after(
            "import archmax_temporal.client.host, archmax_temporal.client.cli.commands"
        )
        assert "temporalio" in loaded  # the probe does load the host
        assert "openai" not in loaded

    def test_the_host_api_and_the_commands_load_no_worker(self) -> None:
        """A command that only reads connects through ``archmax_temporal.connection``: the
        worker module, its activities and the logging stack load only where a worker is
        built (``archmax sessions`` pays none of them)."""
        loaded = _loaded_after(
            "import archmax_temporal.client.host, archmax_temporal.client.cli.commands"
        )
        assert "archmax_temporal.connection" in loaded
        assert not loaded & {
            "archmax_temporal.worker",
            "archmax_temporal.activities.model",
            "archmax_temporal.activities.sandbox",
            "structlog",
        }

    def test_the_worker_imports_nothing_from_the_client(self) -> None:
        """``worker.py`` is below the host API: building a worker loads no ``client`` module."""
        loaded = _loaded_after("import archmax_temporal.worker")
        assert not {m for m in loaded if m.startswith("archmax_temporal.client")}


async def test_async_with_create_agent_opens_and_closes_the_agent(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """``async with create_agent(...) as agent`` (no ``await``) opens the agent, runs a turn and
    closes it; ``await create_agent(...)`` still returns an agent too."""
    root = copy_example("support-inbox", tmp_path)
    server = scripted(EXAMPLES / "support-inbox" / "workflows" / "support-inbox" / "playbook.yaml")
    config = RuntimeConfig(
        root=root,
        store=root / "sessions",
        address="unused",
        task_queue=task_queue,
        address_configured=True,
    )
    model = ModelConfig(base_url=server.url, api_key="sk-test", default_model="scripted")
    opener = create_agent("support-inbox", config=config, client=client, worker="external")
    assert isinstance(opener, AgentOpener)
    conversation = f"surface-{uuid.uuid4().hex[:8]}"
    worker = build_worker(
        client, task_queue=task_queue, model=model, store_dir=config.store, authoring_root=root
    )
    async with worker, opener as agent:
        outcome = await agent.workflow.send(
            None,
            "About the thing we discussed on the phone",
            trigger="email_received",
            variables={"conversation_id": conversation},
        )
        assert outcome.kind == "parked"
    awaited = await create_agent("support-inbox", config=config, client=client, worker="external")
    try:
        assert awaited.loaded.slug == "support-inbox"
    finally:
        await awaited.close()


class TestErrorTree:
    def _drawn(self) -> list[tuple[int, str]]:
        """The tree in the module docstring: (depth, class name) per line, the depth read off
        the column where the name starts (four columns a level)."""
        lines = (errors.__doc__ or "").splitlines()
        root = next(line for line in lines if line.strip() == "ArchmaxError")
        origin = root.index("ArchmaxError")
        drawn = []
        for line in lines:
            match = re.search(r"(?:^\s*|── )([A-Z]\w*Error)\b", line)
            if match and (line.strip() == "ArchmaxError" or "── " in line):
                drawn.append(((match.start(1) - origin) // 4, match.group(1)))
        return drawn

    def test_the_docstring_draws_every_class_with_its_parent(self) -> None:
        """Each error class appears in the drawn tree, once, under its real base class."""
        drawn = self._drawn()
        names = [name for _, name in drawn]
        assert names == [cls.__name__ for cls in errors._ALL]
        parents: dict[str, str] = {}
        stack: list[str] = []
        for depth, name in drawn:
            del stack[depth:]
            if stack:
                parents[name] = stack[-1]
            stack.append(name)
        for cls in errors._ALL[1:]:
            assert parents[cls.__name__] == cls.__bases__[0].__name__, cls.__name__

    def test_every_error_class_of_the_module_is_in_the_tree_and_documented(self) -> None:
        """``_ALL`` is derived, so a new class cannot be left out; each says when it is raised."""
        defined = [
            obj
            for _, obj in inspect.getmembers(errors, inspect.isclass)
            if issubclass(obj, errors.ArchmaxError) and obj.__module__ == errors.__name__
        ]
        assert set(defined) == set(errors._ALL)
        for cls in defined:
            assert cls.__doc__ and cls.__doc__.strip(), cls.__name__

    def test_every_error_travels_and_comes_back_as_its_class(self) -> None:
        """The wire type is the class name, and the client maps it back to the class."""
        for cls in errors._ALL:
            wired = (
                errors.SpecValidationError("x", ["a: b"])
                if cls is errors.SpecValidationError
                else cls("boom")
            ).to_application_error()
            assert wired.type == cls.__name__
            back = errors.error_from_type(wired.type, wired.message)
            assert type(back) is cls

    def test_the_workspace_errors_are_archmax_errors_and_travel_with_their_path(self) -> None:
        """Every workspace refusal is an ``ArchmaxError``; its wire type is its class name,
        the path rides along, and the client maps it back to the class (path included).
        Only a failing store is retryable."""
        from temporalio.exceptions import ApplicationError

        from archmax_temporal.activities import regex, store_errors
        from archmax_temporal.client.sessions_surface import workspace_error

        def tree(cls: type[store_errors.WorkspaceError]) -> list[type[Exception]]:
            return [cls, *(c for sub in cls.__subclasses__() for c in tree(sub))]

        classes = tree(store_errors.WorkspaceError)
        assert regex.UnsupportedPatternError in classes
        for cls in classes:
            assert issubclass(cls, errors.ArchmaxError), cls
            wired = cls("refused", "scratchpad/a.md").to_application_error()
            assert (wired.type, wired.details) == (cls.__name__, ("scratchpad/a.md",))
            retried = cls in (store_errors.StoreIOError, store_errors.StoreConflictError)
            assert wired.non_retryable is not retried, cls
            if cls.__module__ == store_errors.__name__:
                back = workspace_error(
                    ApplicationError(wired.message, *wired.details, type=wired.type)
                )
                assert type(back) is cls
                assert isinstance(back, store_errors.WorkspaceError)
                assert back.path == "scratchpad/a.md"


class TestStepKinds:
    def test_each_kind_is_one_class_carrying_its_key(self) -> None:
        """Keys are unique and each class's ``kind`` defaults to its key."""
        keys = [cls.key for cls in steps.STEP_CLASSES]
        assert len(keys) == len(set(keys))
        for cls in steps.STEP_CLASSES:
            assert cls.model_fields["kind"].default == cls.key

    def test_the_derived_lists_agree_with_the_classes(self) -> None:
        """Actions, assertions, structural kinds and shapes all come from the classes."""
        assert steps.ACTION_KINDS == ("send", "decide", "deliver")
        assert set(steps.ASSERTION_KINDS) | set(steps.ACTION_KINDS) == set(steps.STEP_KINDS)
        assert set(steps.ASSERTION_KINDS) >= steps.STRUCTURAL_KINDS
        assert "grade" not in steps.STRUCTURAL_KINDS and "succeeded" in steps.STRUCTURAL_KINDS

    def test_every_assertion_but_grade_has_an_evaluator(self) -> None:
        """The assertion evaluators cover exactly the schema's assertion kinds (``grade``
        calls a model and is run by the runner)."""
        assert set(assertions.EVALUATORS) == set(steps.ASSERTION_KINDS) - {"grade"}
