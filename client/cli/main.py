"""``archmax``: the command line, following archmax's conventions.

stdout carries results only (a reply, a listing, JSON); stderr narrates (session header, state
flow, park reports with the resume command, verdicts). Exit codes: 0 when the command did its
job (a park counts: waiting is success), 1 for a failure (failed or rejected session, a refused
delivery, an invalid workflow), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.events import SessionEvent
from archmax_temporal.client.logs import configure_logging
from archmax_temporal.client.usage import configured_pricing, footer_line
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    InvalidSessionIdError,
    SessionNotFoundError,
)
from archmax_temporal.workflows.identity import check_session_id
from archmax_temporal.workflows.models import (
    Outcome,
    PendingDecision,
    PendingInput,
    SessionSummary,
    TrailStep,
    Usage,
)


class UsageError(Exception):
    """A malformed command line: exit 2, one line plus a pointer to ``--help``."""

    def __init__(self, message: str, command: str | None = None) -> None:
        super().__init__(message)
        self.command = command


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog.removeprefix("archmax").strip() or None)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="archmax", description="Run archmax workflows on Temporal.")
    parser.add_argument("--root", help="authoring root (default: ARCHMAX_ROOT or the cwd)")
    parser.add_argument(
        "--verbose", action="store_true", help="narrate the turn's events and model calls on stderr"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="start or continue a session with a message")
    run.add_argument(
        "words",
        nargs="*",
        metavar="[workflow] prompt",
        help="the workflow (optional when workflows/ holds one) and the message",
    )
    run.add_argument("--trigger", default="manual")
    run.add_argument("--variables", help="JSON object of variables (seeded locked)")
    run.add_argument("--session", help="explicit session id")
    run.add_argument("--session-path", help="dotted path over the variables to the session id")
    run.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="VAR=PATH",
        help="hand a file to the session (placed in scratchpad/attachments/, VAR seeded)",
    )

    deliver = sub.add_parser("deliver", help="deliver an event to a session parked for input")
    deliver.add_argument("session")
    deliver.add_argument("--trigger", required=True)
    deliver.add_argument("--variables", help="JSON object of variables (seeded locked)")

    decide = sub.add_parser("decide", help="decide for a session parked at a human state")
    decide.add_argument("session")
    decide.add_argument("--to", required=True, help="the transition to take")
    decide.add_argument("--comment")

    reply = sub.add_parser("reply", help="message a session parked at a human state")
    reply.add_argument("session")
    reply.add_argument("message", nargs="*")

    sessions = sub.add_parser("sessions", help="list sessions, or show one")
    sessions.add_argument("session", nargs="?")
    sessions.add_argument("--workflow")
    sessions.add_argument("--json", action="store_true")

    events = sub.add_parser("events", help="a session's events, one JSON object per line")
    events.add_argument("session")
    events.add_argument("--follow", action="store_true", help="keep streaming as it runs")
    events.add_argument("--after", type=int, default=0, help="only events after this seq")

    test = sub.add_parser("test", help="run a workflow's *.test.yaml cases against the runtime")
    test.add_argument(
        "words",
        nargs="*",
        metavar="[workflow] [filter]",
        help="the workflow (optional when workflows/ holds one), then a path substring",
    )
    test.add_argument("--json", action="store_true", help="the results as one JSON document")

    validate = sub.add_parser("validate", help="static diagnostics over a workflow and its cases")
    validate.add_argument("workflow", nargs="?", help="optional when workflows/ holds one")
    validate.add_argument("--json", action="store_true")

    sub.add_parser("dev", help="dev server + UI + worker in the foreground")
    sub.add_parser("worker", help="a worker against TEMPORAL_ADDRESS (for production)")

    helper = sub.add_parser("help", help="this help, or a command's")
    helper.add_argument("topic", nargs="?", metavar="command")

    demo = sub.add_parser("demo", help="the support-inbox demo: park, deliver, answer")
    demo.add_argument("--conversation", help="conversation id (default: a fresh one)")
    for command in (deliver, decide, reply):
        command.add_argument("--workflow", help="the session's workflow (checked, optional)")
    for command in (run, deliver, decide, reply, sessions, events, test, validate, demo):
        # --verbose after the command too (archmax run wf hi --verbose), as archmax spells it
        command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS)
    return parser


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


def _err(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


def _flow(trail: Sequence[TrailStep]) -> None:
    for step in trail:
        if step.kind == "trigger":
            _err(f"  ▸ {step.to}  (trigger {step.reason})")
        else:
            reason = f" — {step.reason}" if step.reason else ""
            _err(f"  → {step.to}  ({step.kind}){reason}")


def report_outcome(
    outcome: Outcome, *, trail_from: int = 0, spent_before: Usage | None = None
) -> int:
    """Narrate ``outcome`` on stderr, print the reply on stdout; the exit code it deserves.

    The token footer closes the narration: what this command's turn spent (the session's
    usage less ``spent_before``), omitted when the endpoint reported nothing.
    """
    code = _narrate_outcome(outcome, trail_from)
    spent = outcome.usage.since(spent_before) if spent_before is not None else outcome.usage
    tokens = footer_line(spent, configured_pricing(_err))
    if tokens is not None:
        _err(tokens)
    return code


def _narrate_outcome(outcome: Outcome, trail_from: int) -> int:
    _flow(outcome.trail[trail_from:])
    if outcome.reply:
        print(outcome.reply, flush=True)
    if outcome.kind == "parked" and isinstance(outcome.pending, PendingDecision):
        decision = outcome.pending
        edges = ", ".join(edge.to for edge in decision.transitions)
        _err(f"⏸ parked at {decision.state}, awaiting a decision: {edges}")
        first = decision.transitions[0].to if decision.transitions else "<state>"
        _err(f"  decide: archmax decide {outcome.session_id} --to {first} [--comment …]")
        return 0
    if outcome.kind == "parked" and isinstance(outcome.pending, PendingInput):
        pending = outcome.pending
        due = f" (wakes itself at {pending.resume_at.isoformat()})" if pending.resume_at else ""
        _err(f"⏸ parked in {pending.state}, awaiting input: {pending.reason}{due}")
        _err(f"  resume: archmax deliver {outcome.session_id} --trigger <id> --variables '{{…}}'")
        return 0
    if outcome.kind == "completed":
        _err(f"✔ completed in {outcome.state}")
        return 0
    if outcome.kind == "failed" and outcome.exit is not None:
        _err(f"✖ failed {outcome.exit.code}: {outcome.exit.reason}")
        return 1
    _err(f"✖ rejected: {outcome.rejected}")
    return 1


def summary_line(s: SessionSummary) -> str:
    """One ``archmax sessions`` line."""
    parts = [s.session_id, s.status, s.classification, f"state={s.state}"]
    if s.pending_input is not None:
        parts.append(f"awaiting={s.pending_input.state}")
    if s.pending_decision is not None:
        parts.append(f"awaiting={s.pending_decision.state}")
    if s.exit is not None and not s.exit.success:
        parts.append(f"exit={s.exit.code}")
    names = [n for n in s.variables if n != "trigger"]
    parts.append(f"vars={','.join(sorted(names))}")
    line = "  ".join(parts)
    if s.wait_reason:
        due = f" due={s.resume_at.isoformat()}" if s.resume_at else ""
        line += f"\n    waiting for: {s.wait_reason}{due}"
    return line


def _summary_detail(s: SessionSummary) -> str:
    lines = [
        f"session   {s.session_id}",
        f"workflow  {s.workflow}",
        f"status    {s.status} ({s.classification})",
        f"state     {s.state}",
        f"spec      {s.spec_hash}",
    ]
    if s.pending_decision is not None:
        edges = ", ".join(e.to for e in s.pending_decision.transitions)
        lines.append(f"awaiting  decision at {s.pending_decision.state}: {edges}")
    if s.pending_input is not None:
        lines.append(f"awaiting  input in {s.pending_input.state}: {s.pending_input.reason}")
        if s.resume_at:
            lines.append(f"due       {s.resume_at.isoformat()}")
    if s.exit is not None:
        lines.append(
            "exit      success" if s.exit.success else f"exit      {s.exit.code}: {s.exit.reason}"
        )
    if s.rejected:
        lines.append(f"rejected  {s.rejected}")
    lines.append("variables")
    for name, variable in sorted(s.variables.items()):
        lock = " (locked)" if variable.locked else ""
        lines.append(f"  {name}{lock} = {json.dumps(variable.value, ensure_ascii=False)}")
    return "\n".join(lines)


async def _run(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent

    variables = _json_object(args.variables)
    files = _files(args.file)
    workflow, prompt = resolve_workflow(config.root, args.words, "run")
    message = " ".join(prompt).strip() or None
    async with await create_agent(workflow, config=config, worker_cache=0) as agent:
        loaded = agent.loaded
        if loaded.spec.disabled:
            _err(f"✖ Refusing to start: workflow '{loaded.slug}' is disabled.")
            return 1
        _err(f"workflow  {loaded.slug}  ·  root {config.root}")
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
        _err(f"session   {resolved.session_id}  ({resolved.disposition})")
        outcome = await agent.workflow.send(
            resolved.session_id,
            message,
            trigger=args.trigger,
            variables=variables,
            files=files,
            on_event=_live(args),
        )
        return report_outcome(outcome, trail_from=before, spent_before=spent)


async def _deliver(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent

    variables = _json_object(args.variables)
    async with await create_agent(None, config=config, worker_cache=0) as agent:
        view = await agent.sessions.view(args.session)
        _check_workflow(args, view.summary)
        _err(f"session   {args.session}  (deliver {args.trigger})")
        outcome = await agent.workflow.deliver(
            args.session, trigger=args.trigger, variables=variables, on_event=_live(args)
        )
        return report_outcome(outcome, trail_from=len(view.trail), spent_before=view.summary.usage)


async def _decide(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent

    async with await create_agent(None, config=config, worker_cache=0) as agent:
        view = await agent.sessions.view(args.session)
        _check_workflow(args, view.summary)
        _err(f"session   {args.session}  (decide → {args.to})")
        outcome = await agent.workflow.decide(
            args.session, to=args.to, comment=args.comment, on_event=_live(args)
        )
        return report_outcome(outcome, trail_from=len(view.trail), spent_before=view.summary.usage)


async def _reply(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent

    message = " ".join(args.message).strip()
    if not message:
        raise UsageError("reply needs a non-empty message", "reply")
    async with await create_agent(None, config=config, worker_cache=0) as agent:
        summary = await agent.sessions.get(args.session)
        _check_workflow(args, summary)
        spent = summary.usage
        _err(f"session   {args.session}  (reply)")
        outcome = await agent.workflow.reply(args.session, message, on_event=_live(args))
        return report_outcome(outcome, spent_before=spent)


async def _sessions(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent

    async with await create_agent(None, config=config, worker_cache=0) as agent:
        if args.session:
            summary = await agent.sessions.get(args.session)
            print(summary.model_dump_json(indent=2) if args.json else _summary_detail(summary))
            return 0
        summaries = await agent.sessions.list(workflow=args.workflow)
        if args.json:
            print(json.dumps([s.model_dump(mode="json") for s in summaries], indent=2))
        elif not summaries:
            _err("No durable sessions found.")
        else:
            for summary in summaries:
                print(summary_line(summary))
        return 0


async def _events(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.agent import create_agent
    from archmax_temporal.client.runtime import translate

    check_session_id(args.session)
    async with await create_agent(None, config=config, worker_cache=0) as agent:
        try:
            async for event in agent.sessions.events(
                args.session, after=args.after, follow=args.follow
            ):
                print(event.model_dump_json(), flush=True)
        except Exception as exc:
            raise translate(exc, session_id=args.session) from exc
    return 0


async def _worker(config: RuntimeConfig) -> int:
    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.client.runtime import SERVICE_IDENTITY_PREFIX, connect, worker_identity
    from archmax_temporal.worker import build_worker, run_until_signalled

    client = await connect(config.address, config.namespace)
    worker = build_worker(
        client,
        task_queue=config.task_queue,
        model=ModelConfig.from_env(),
        store_dir=config.store,
        identity=worker_identity(SERVICE_IDENTITY_PREFIX),
        authoring_root=config.root,
    )
    _err(f"worker    {config.address} · namespace {config.namespace} · queue {config.task_queue}")
    await run_until_signalled(worker)
    _err("worker stopped")
    return 0


async def _dev(config: RuntimeConfig) -> int:
    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.client.devserver import ForegroundDevServer
    from archmax_temporal.client.runtime import SERVICE_IDENTITY_PREFIX, connect, worker_identity
    from archmax_temporal.worker import build_worker, run_until_signalled

    async with ForegroundDevServer(config.root, address=config.address) as dev:
        server = dev.server
        client = await connect(server.address, config.namespace)
        worker = build_worker(
            client,
            task_queue=config.task_queue,
            model=ModelConfig.from_env(),
            store_dir=config.store,
            identity=worker_identity(SERVICE_IDENTITY_PREFIX),
            authoring_root=config.root,
        )
        _err(f"temporal  {server.address}  ·  UI {server.ui_url or 'disabled'}")
        _err(f"worker    queue {config.task_queue}  ·  Ctrl-C to stop")
        await run_until_signalled(worker)
    return 0


def _validate(args: argparse.Namespace, config: RuntimeConfig) -> int:
    from archmax_temporal.client.testing.validate import render_text, validate_workflow

    workflow = args.workflow or resolve_workflow(config.root, [], "validate")[0]
    report = validate_workflow(config.root, workflow)
    lines, summary = render_text(report)
    for line in lines:
        _err(line)
    print(json.dumps(report.model_dump(), indent=2) if args.json else summary, flush=True)
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
    )


def _live(args: argparse.Namespace) -> Callable[[SessionEvent], None] | None:
    """With ``--verbose``: each of the turn's events on stderr as it happens, from the
    session's history (so it works whichever worker runs the session)."""
    return _narrate_event if getattr(args, "verbose", False) else None


def _narrate_event(event: SessionEvent) -> None:
    data = event.data
    if event.type == "tool-called":
        shown = json.dumps(data.get("args"), ensure_ascii=False, default=str)
        _err(f"  · {data['tool']} {shown[:120]}")
    elif event.type == "tool-result" and data.get("status") != "ok":
        _err(f"  · {data['tool']} → {data['status']}: {str(data.get('preview'))[:120]}")
    elif event.type == "tool-blocked":
        _err(f"  · {data['tool']} → blocked ({data.get('rule')})")
    elif event.type in ("hook-verdict", "rubric-result"):
        reason = f": {data['reason']}" if data.get("reason") else ""
        _err(f"  · {data['phase']} hook {data['hook']} → {data.get('verdict')}{reason}")
    elif event.type == "model-usage":
        _err(f"  · model {data['model']}: in {data['inputTokens']} · out {data['outputTokens']}")
    elif event.type == "sub-workflow-start":
        _err(f"  · sub-workflow {data['childSessionId']} started")


def _check_workflow(args: argparse.Namespace, summary: SessionSummary) -> None:
    """``--workflow`` scopes the session lookup: a session of another workflow is not found."""
    if args.workflow and args.workflow != summary.workflow:
        raise SessionNotFoundError(
            f"no session {summary.session_id!r} of workflow {args.workflow!r} "
            f"(it runs {summary.workflow!r})"
        )


def _help(topic: str | None) -> int:
    """``archmax help [command]``: the help ``--help`` prints, exit 0."""
    parser = _parser()
    if topic is None:
        parser.print_help()
        return 0
    subparsers = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    command = subparsers.choices.get(topic)
    if command is None:
        raise UsageError(f"no command {topic!r}; commands: {', '.join(subparsers.choices)}")
    command.print_help()
    return 0


async def _dispatch(args: argparse.Namespace) -> int:
    config = RuntimeConfig.from_env(root=args.root)
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
    if args.command == "worker":
        return await _worker(config)
    if args.command == "dev":
        return await _dev(config)
    if args.command == "help":
        return _help(args.topic)
    if args.command == "demo":
        from archmax_temporal.client.cli.demo import run_demo

        return await run_demo(
            root=Path(args.root) if args.root else None, conversation=args.conversation
        )
    raise UsageError(f"unknown command {args.command!r}")


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Parse and run one command; the exit code (never raises for expected failures)."""
    from archmax_temporal.client.devserver import DevServerError

    args: argparse.Namespace | None = None
    try:
        args = _parser().parse_args(argv)
        configure_logging(verbose=args.verbose or args.command in ("worker", "dev"))
        return asyncio.run(_dispatch(args))
    except UsageError as exc:
        if exc.command is None and args is not None:
            exc.command = args.command
        _err(f"archmax: {exc}")
        _err(f"try archmax {exc.command + ' ' if exc.command else ''}--help")
        return 2
    except InvalidSessionIdError as exc:  # a malformed id is a usage error, as archmax has it
        _err(f"archmax: {exc}")
        _err(f"try archmax {args.command + ' ' if args is not None else ''}--help")
        return 2
    except ArchmaxError as exc:
        _err(f"✖ {type(exc).__name__}: {exc}")
        return 1
    except DevServerError as exc:
        _err(f"✖ {type(exc).__name__}: {exc}")
        return 1
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console entry point. Exits through ``os._exit`` after flushing: a process that used the
    Temporal client can abort at interpreter exit (sdk-python#300)."""
    code = run_cli(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
