"""The bodies of the ``archmax`` commands, imported only once a command line parsed (so
``archmax help`` never loads the runtime)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archmax_temporal.client.cli.parser import UsageError, print_help
from archmax_temporal.client.cli.render import (
    StatusLine,
    TextPrinter,
    camel_json,
    err,
    handoff_of,
    narrate_event,
    report_outcome,
    summary_detail,
    summary_line,
)
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    SessionNotFoundError,
)
from archmax_temporal.workflows.models import SessionSummary, Usage

if TYPE_CHECKING:
    from archmax_temporal.client.events import SessionEvent
    from archmax_temporal.worker import WorkerOptions


def resolve_workflow(root: Path, words: Sequence[str], command: str) -> tuple[str, list[str]]:
    """The workflow a command names and the words after it.

    archmax lets ``<workflow>`` be omitted when ``workflows/`` holds exactly one: a first
    word naming an authored workflow is the workflow; otherwise, with one workflow, every
    word is the command's own. With several and none named, the usage error lists them.
    """
    from archmax_temporal.client.loader import workflow_slugs

    known = workflow_slugs(root)
    if words and (words[0] in known or len(known) != 1):
        return words[0], list(words[1:])
    if len(known) == 1:
        return known[0], list(words)
    if not known:
        raise UsageError(f"no workflow under {root / 'workflows'}", command)
    raise UsageError(f"name the workflow: {', '.join(known)}", command)


def _json_object(raw: str | None, flag: str = "--variables") -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc.msg} (at char {exc.pos})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object, not {type(value).__name__}")
    return value


def _files(specs: Sequence[str]) -> dict[str, tuple[str, bytes]]:
    files: dict[str, tuple[str, bytes]] = {}
    for spec in specs:
        var, sep, raw = spec.partition("=")
        if not sep or not var or not raw:
            raise UsageError(f"--file expects VAR=PATH, got {spec!r}")
        path = Path(raw)
        if not path.is_file():
            raise UsageError(f"--file {var}: no such file {raw!r}")
        files[var] = (path.name, path.read_bytes())
    return files


def _turn_worker() -> str:
    """Who runs the turn a command fires: this root's background worker on a local server
    (``background``), unless ``ARCHMAX_WORKER`` says otherwise. A command never serves the
    queue itself by default: its worker would run every due session's work."""
    return os.environ.get("ARCHMAX_WORKER") or "background"


def _check_model_configuration(*, workflow_model: bool = True) -> None:
    """Refuse, before any session is touched, a turn this shell's configuration cannot run:
    no endpoint nor key, or no model id anywhere. (A remote worker has its own configuration:
    then there is nothing to check here.)"""
    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.workflows.errors import ConfigurationError

    if _turn_worker() == "external":
        return
    model = ModelConfig.from_env()
    if model.base_url is None and model.api_key is None:
        raise ConfigurationError(
            "no model endpoint configured: set ARCHMAX_API_KEY (OpenAI) or "
            "ARCHMAX_API_BASE_URL (any OpenAI-compatible endpoint), or OPENAI_API_KEY / "
            "OPENAI_BASE_URL"
        )
    if model.default_model is None and not workflow_model:
        raise ConfigurationError(
            "no model configured: set ARCHMAX_MODEL, or settings.model in workflow.yaml"
        )


def _spec_names_a_model(config: RuntimeConfig, workflow: str) -> bool:
    """Whether the workflow's spec names a model (``settings.model`` or a state's)."""
    from archmax_temporal.client.loader import load_workflow

    spec = load_workflow(config.root, workflow).spec
    return spec.settings.model is not None or any(
        state.model is not None for state in spec.states.values()
    )


def _model_label(spec: Any) -> str:
    """The model a ``run`` header names, as ``archmax test``'s does: ``settings.model``, else
    the environment's ``ARCHMAX_MODEL``, else ``unset`` (a state may name its own)."""
    from archmax_temporal.activities.model import ModelConfig

    return str(spec.settings.model or ModelConfig.from_env().default_model or "unset")


async def _run(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent
    from archmax_temporal.client.testing.report import session_header

    variables = _json_object(args.variables)
    files = _files(args.file)
    workflow, prompt = resolve_workflow(config.root, args.words, "run")
    message = " ".join(prompt).strip() or None
    _check_model_configuration(workflow_model=_spec_names_a_model(config, workflow))
    async with create_agent(
        workflow, config=config, worker=_turn_worker(), worker_cache=0
    ) as agent:
        loaded = agent.loaded
        if loaded.spec.disabled:
            err(f"✖ Refusing to start: workflow '{loaded.slug}' is disabled.")
            return 1
        err(session_header(loaded.slug, config.root, _model_label(loaded.spec)))
        resolved = await agent.workflow.resolve_session(
            trigger=args.trigger,
            variables=variables,
            session_id=args.session,
            session_path=args.session_path,
        )
        before, spent = 0, Usage()
        if not resolved.minted:
            try:
                view = await agent.sessions.view(resolved.session_id)
                before, spent = len(view.trail), view.summary.usage
            except ArchmaxError:
                before, spent = 0, Usage()
        err(f"session   {resolved.session_id}  ({resolved.disposition})")
        async with _live(args) as watch:
            outcome = await agent.workflow.send(
                resolved.session_id,
                message,
                trigger=args.trigger,
                variables=variables,
                files=files,
                on_event=watch.on_event,
            )
        return report_outcome(outcome, trail_from=before, spent_before=spent, shown=watch.shown)


async def _deliver(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent

    variables = _json_object(args.variables)
    _check_model_configuration()
    async with create_agent(None, config=config, worker=_turn_worker(), worker_cache=0) as agent:
        view = await agent.sessions.view(args.session)
        _check_workflow(args, view.summary)
        err(f"session   {args.session}  (deliver {args.trigger})")
        async with _live(args) as watch:
            outcome = await agent.workflow.deliver(
                args.session, trigger=args.trigger, variables=variables, on_event=watch.on_event
            )
        return report_outcome(
            outcome,
            trail_from=len(view.trail),
            spent_before=view.summary.usage,
            shown=watch.shown,
        )


async def _decide(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent

    _check_model_configuration()
    async with create_agent(None, config=config, worker=_turn_worker(), worker_cache=0) as agent:
        view = await agent.sessions.view(args.session)
        _check_workflow(args, view.summary)
        err(f"session   {args.session}  (decide → {args.to})")
        async with _live(args) as watch:
            outcome = await agent.workflow.decide(
                args.session, to=args.to, comment=args.comment, on_event=watch.on_event
            )
        return report_outcome(
            outcome,
            trail_from=len(view.trail),
            spent_before=view.summary.usage,
            shown=watch.shown,
        )


async def _reply(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent

    message = " ".join(args.message).strip()
    if not message:
        raise UsageError("reply needs a non-empty message", "reply")
    _check_model_configuration()
    async with create_agent(None, config=config, worker=_turn_worker(), worker_cache=0) as agent:
        view = await agent.sessions.view(args.session)
        _check_workflow(args, view.summary)
        err(f"session   {args.session}  (reply)")
        async with _live(args) as watch:
            outcome = await agent.workflow.reply(args.session, message, on_event=watch.on_event)
        # A reply moves the session nowhere: only what changed is narrated (no trail).
        return report_outcome(
            outcome,
            trail_from=len(view.trail),
            spent_before=view.summary.usage,
            shown=watch.shown,
        )


async def _sessions(args: argparse.Namespace, config: RuntimeConfig) -> int:
    if not args.session and not args.outdated:
        return await _list_sessions(args, config)
    from archmax_temporal.client.agent import create_agent

    async with create_agent(None, config=config, worker="external") as agent:

        async def handoff(summary: SessionSummary) -> str | None:
            if summary.pending_decision is None:
                return None
            try:
                return handoff_of((await agent.sessions.view(summary.session_id)).transcript)
            except ArchmaxError:
                return None

        if args.session:
            summary = await agent.sessions.read(args.session)
            if args.json:
                print(json.dumps(camel_json(summary), indent=2, ensure_ascii=False))
            else:
                print(summary_detail(summary, await handoff(summary)))
            return 0
        if args.limit < 1:
            raise UsageError("--limit must be at least 1", "sessions")
        summaries = await agent.sessions.list(
            workflow=args.workflow,
            status=args.status,
            due=args.due,
            limit=args.limit,
            outdated=args.outdated,
        )
        return _print_sessions(args, summaries)


async def _list_sessions(args: argparse.Namespace, config: RuntimeConfig) -> int:
    """``archmax sessions`` (no id, not ``--outdated``): the listing alone, read from visibility
    (:mod:`archmax_temporal.client.visibility`) over a bare connection, so the command loads neither
    the host nor the worker; ``agent.sessions.list`` reads the same page."""
    from archmax_temporal.client import visibility
    from archmax_temporal.client.runtime import connect_client

    if args.limit < 1:
        raise UsageError("--limit must be at least 1", "sessions")
    client, _ = await connect_client(config)
    summaries = await visibility.sessions(
        client,
        config,
        workflow=args.workflow,
        status=args.status,
        due=args.due,
        limit=args.limit,
    )
    return _print_sessions(args, summaries)


def _print_sessions(args: argparse.Namespace, summaries: list[SessionSummary]) -> int:
    if args.json:
        print(json.dumps(camel_json(summaries), indent=2, ensure_ascii=False))
    elif not summaries:
        err("No outdated sessions found." if args.outdated else "No durable sessions found.")
    else:
        for summary in summaries:
            line = summary_line(summary, summary.handoff)
            print(f"{line}  build {summary.build_id}" if args.outdated else line)
    return 0


async def _events(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent
    from archmax_temporal.client.runtime import translate

    async with create_agent(None, config=config, worker="external") as agent:
        try:
            async for event in agent.sessions.events(
                args.session, after=args.after, follow=args.follow
            ):
                print(json.dumps(camel_json(event), ensure_ascii=False), flush=True)
        except Exception as exc:
            raise translate(exc, session_id=args.session) from exc
    return 0


async def _repair(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent

    async with create_agent(None, config=config, worker="external") as agent:
        report = await agent.sessions.repair(args.session)
    if args.json:
        print(json.dumps(camel_json(report), indent=2, ensure_ascii=False))
        return 0
    done = {
        "fine": "the log is the history's; nothing written",
        "damaged": "the log was damaged; rebuilt from the history",
        "missing": "the log was missing; rebuilt from the history",
    }[report.log]
    print(
        f"{report.session_id}: {done} ({report.messages} messages, "
        f"{report.prompts_rebuilt} of {report.prompts} prompts rebuilt, "
        f"{report.runs} runs, {report.model_calls} model calls)"
    )
    return 0


def _announcer() -> Callable[[str], None]:
    """Where a long-lived command (``worker``, ``dev``, ``serve``) writes its banner: stderr
    as it is, or with ``ARCHMAX_LOG_FORMAT=json`` a log line (logger ``archmax.cli``, info,
    shown at any level) like every other line of the stream, so a pipeline reads JSON only."""
    from archmax_temporal.client.logs import log_format

    if log_format() != "json":
        return err
    logger = logging.getLogger("archmax.cli")
    logger.setLevel(logging.INFO)
    return lambda line: logger.info(" ".join(line.split()))


def _worker_options(args: argparse.Namespace) -> WorkerOptions:
    """The worker's options: the environment's, the flags winning."""
    from datetime import timedelta

    from archmax_temporal.worker import WorkerOptions

    grace = args.shutdown_grace
    return WorkerOptions.from_env(
        max_concurrent_workflow_tasks=args.max_concurrent_workflow_tasks,
        max_concurrent_activities=args.max_concurrent_activities,
        max_cached_workflows=args.max_cached_workflows,
        graceful_shutdown=timedelta(seconds=grace) if grace is not None else None,
        metrics_address=args.metrics_address,
        health_address=args.health_address,
    )


async def _worker(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.activities.notify import NotifyTarget
    from archmax_temporal.live import live_channel
    from archmax_temporal.worker import connect, deployment_from_env, metrics_runtime, serve

    options = _worker_options(args)
    runtime = metrics_runtime(options.metrics_address) if options.metrics_address else None
    client = await connect(config.connection, runtime=runtime)
    announce = _announcer()
    announce(f"temporal  {config.connection.describe()}")
    await serve(
        client,
        task_queue=config.task_queue,
        model=ModelConfig.from_env(),
        store_dir=None if config.store_url else config.store,
        store=config.session_store(),
        authoring_root=config.root,
        announce=announce,
        options=options,
        deployment=deployment_from_env(),
        notify=NotifyTarget.from_env(),
        live=live_channel(config.root, config.namespace),
    )
    return 0


async def _dev(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.activities.notify import NotifyTarget
    from archmax_temporal.client.devserver import ForegroundDevServer
    from archmax_temporal.live import live_channel
    from archmax_temporal.worker import connect, metrics_runtime, serve

    options = _worker_options(args)
    runtime = metrics_runtime(options.metrics_address) if options.metrics_address else None
    async with ForegroundDevServer(config.root, address=config.address) as dev:
        server = dev.server
        client = await connect(replace(config.connection, address=server.address), runtime=runtime)
        announce = _announcer()
        announce(f"temporal  {server.address}  ·  UI {server.ui_url or 'disabled'}")
        await serve(
            client,
            task_queue=config.task_queue,
            model=ModelConfig.from_env(),
            store_dir=None if config.store_url else config.store,
            store=config.session_store(),
            store_description=config.store_location,
            authoring_root=config.root,
            announce=announce,
            options=options,
            notify=NotifyTarget.from_env(),
            live=live_channel(config.root, config.namespace),
        )
    return 0


async def _serve(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.http import ServeSettings, serve

    settings = ServeSettings.from_env(host=args.host, port=args.port)
    await serve(config, settings, worker=_turn_worker(), announce=_announcer())
    return 0


def _dev_stop(config: RuntimeConfig) -> int:
    from archmax_temporal.client.background import stop_background_worker
    from archmax_temporal.client.devserver import stop_dev_server

    worker = stop_background_worker(config.root)
    server = stop_dev_server(config.root)
    err(f"worker    {'stopped' if worker else 'none running'}")
    err(f"temporal  {'stopped' if server else 'no background dev server of this root'}")
    return 0


def _validate(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.testing.validate import render_text, validate_workflow

    workflow = args.workflow or resolve_workflow(config.root, [], "validate")[0]
    report = validate_workflow(config.root, workflow)
    lines, summary = render_text(report)
    for line in lines:
        err(line)
    print(json.dumps(camel_json(report), indent=2) if args.json else summary, flush=True)
    return 0 if report.valid else 1


async def _test(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.testing.suite import run_suite

    workflow, rest = resolve_workflow(config.root, args.words, "test")
    if len(rest) > 1:
        raise UsageError(f"one filter at most, got {' '.join(rest)!r}", "test")
    return await run_suite(
        workflow,
        config,
        filter=rest[0] if rest else None,
        as_json=args.json,
        err=sys.stderr,
        out=sys.stdout,
        verbose=bool(getattr(args, "verbose", False)),
    )


@dataclass
class _Watch:
    """What a command that runs a turn watches it with: the ``on_event`` it passes, and the
    messages it showed whole as they were written (never printed again)."""

    on_event: Callable[[SessionEvent], None] | None
    shown: set[str] = field(default_factory=set)


@contextlib.asynccontextmanager
async def _live(args: argparse.Namespace) -> AsyncIterator[_Watch]:
    """How a command that runs a turn watches it. With ``--verbose``, each of the turn's
    events on stderr as it happens, from the session's history (so it works whichever worker
    runs the session); on a terminal, a one-line status (elapsed time, what is in flight),
    gone when the turn ends; with stdout a terminal, the model's text as it is written
    (stdout that is not a terminal gets exactly what it got before: the reply at the end)."""
    verbose = bool(getattr(args, "verbose", False))
    text = TextPrinter(sys.stdout, sys.stderr) if sys.stdout.isatty() else None
    status = StatusLine(sys.stderr) if sys.stderr.isatty() else None
    if text is None and status is None:
        yield _Watch(narrate_event if verbose else None)
        return
    from archmax_temporal.client.events import LIVE_EVENT_TYPES

    def on_event(event: SessionEvent) -> None:
        live = event.type in LIVE_EVENT_TYPES
        if verbose and not live:
            if status is not None:
                status.clear()
            if text is not None and event.type != "agent-text":
                text.end_line()
            narrate_event(event)
        if text is not None:
            if live and status is not None:
                status.clear()
            text.saw(event)
        if status is not None:
            status.held = text is not None and text.writing
            status.saw(event)

    ticker = asyncio.create_task(status.tick()) if status is not None else None
    watch = _Watch(on_event, text.shown if text is not None else set())
    try:
        yield watch
    finally:
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
        if text is not None:
            text.end_line()
        if status is not None:
            status.clear()


def _check_workflow(args: argparse.Namespace, summary: SessionSummary) -> None:
    """``--workflow`` scopes the session lookup: a session of another workflow is not found."""
    if args.workflow and args.workflow != summary.workflow:
        raise SessionNotFoundError(
            f"no session {summary.session_id!r} of workflow {args.workflow!r} "
            f"(it runs {summary.workflow!r})"
        )


def _check_id_arguments(args: argparse.Namespace) -> None:
    """A session id typed on the command line that cannot name a session is a usage error
    (exit 2); one read from a payload is the typed error, exit 1."""
    from archmax_temporal.workflows.identity import session_id_problem
    from archmax_temporal.workflows.paths import InvalidPathError, parse_path

    value = getattr(args, "session", None)
    if value is not None:
        problem = session_id_problem(value)
        if problem is not None:
            raise UsageError(f"invalid session id {value!r}: {problem}")
    path = getattr(args, "session_path", None)
    if path is not None:  # rejected wherever it is written: beside --session too
        try:
            parse_path(path)
        except InvalidPathError as exc:
            raise UsageError(f"invalid --session-path {path!r}: {exc}") from None


async def dispatch(args: argparse.Namespace) -> int:
    _check_id_arguments(args)
    if args.command == "replay":  # reads files and the installed code only: no server
        from archmax_temporal.client.cli.replay import run_replay

        return await run_replay(args.files, args.workflow_id, args.debug)
    config = RuntimeConfig.from_env(root=args.root, profile=args.profile).with_overrides(
        address=args.address,
        namespace=args.namespace,
        task_queue=args.task_queue,
        tls=True if args.tls else None,
    )
    if args.command == "validate":
        return _validate(args, config)
    if args.command == "test":
        return await _test(args, config)
    if args.command == "run":
        return await _run(args, config)
    if args.command == "deliver":
        return await _deliver(args, config)
    if args.command == "decide":
        return await _decide(args, config)
    if args.command == "reply":
        return await _reply(args, config)
    if args.command == "sessions":
        return await _sessions(args, config)
    if args.command == "events":
        return await _events(args, config)
    if args.command == "repair":
        return await _repair(args, config)
    if args.command == "worker":
        return await _worker(args, config)
    if args.command == "serve":
        return await _serve(args, config)
    if args.command == "dev" and args.action == "stop":
        return _dev_stop(config)
    if args.command == "dev":
        return await _dev(args, config)
    if args.command == "help":
        return print_help(args.topic)
    if args.command == "demo":
        from archmax_temporal.client.cli.demo import run_demo

        return await run_demo(
            root=Path(args.root) if args.root else None, conversation=args.conversation
        )
    raise UsageError(f"unknown command {args.command!r}")
