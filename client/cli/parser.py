"""The ``archmax`` command line's grammar: every command, flag and help text.

Standard library only: ``archmax help`` and ``--help`` are answered from here, before any of
the runtime (Temporal, pydantic, openai) is imported.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

COMMANDS_WITH_VERBOSE = (
    "run",
    "deliver",
    "decide",
    "reply",
    "sessions",
    "events",
    "test",
    "validate",
    "demo",
)
"""The commands that also take ``--verbose`` after their name, as archmax spells it."""


STATUSES = ("running", "awaiting_input", "awaiting_decision", "completed", "failed", "rejected")
"""The statuses ``archmax sessions --status`` takes."""


class UsageError(Exception):
    """A malformed command line: exit 2, one line plus a pointer to ``--help``."""

    def __init__(self, message: str, command: str | None = None) -> None:
        super().__init__(message)
        self.command = command


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog.removeprefix("archmax").strip() or None)


CONNECTING_COMMANDS = (
    "run",
    "deliver",
    "decide",
    "reply",
    "sessions",
    "events",
    "test",
    "dev",
    "worker",
    "serve",
    "demo",
    "repair",
)
"""The commands that talk to Temporal, and so take the connection flags after their name."""


def _add_connection_flags(parser: argparse.ArgumentParser, default: object) -> None:
    """``--address``, ``--namespace``, ``--profile``, ``--tls`` and ``--task-queue``: they
    override Temporal's environment configuration (``TEMPORAL_*``, ``temporal.toml``)."""
    parser.add_argument(
        "--address",
        metavar="HOST:PORT",
        default=default,
        help="Temporal frontend (default: TEMPORAL_ADDRESS, the profile's, or localhost:7233)",
    )
    parser.add_argument(
        "--namespace",
        default=default,
        help="Temporal namespace (default: TEMPORAL_NAMESPACE, the profile's, or default)",
    )
    parser.add_argument(
        "--profile",
        default=default,
        help="temporal.toml profile to read (default: TEMPORAL_PROFILE, or default)",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        default=default if default is argparse.SUPPRESS else False,
        help="connect over TLS with the system's roots (TEMPORAL_TLS* for a CA or mTLS)",
    )
    parser.add_argument(
        "--task-queue",
        default=default,
        help="task queue of the sessions (default: ARCHMAX_TASK_QUEUE, or archmax)",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def _add_worker_flags(parser: argparse.ArgumentParser) -> None:
    """The options of a long-lived worker (``archmax worker``, ``archmax dev``); each also
    has an environment variable (in its help), the flag winning."""
    parser.add_argument(
        "--max-concurrent-workflow-tasks",
        type=_positive,
        metavar="N",
        help="workflow tasks at once (ARCHMAX_MAX_CONCURRENT_WORKFLOW_TASKS; SDK default)",
    )
    parser.add_argument(
        "--max-concurrent-activities",
        type=_positive,
        metavar="N",
        help="activities (model calls, tools, hooks) at once (ARCHMAX_MAX_CONCURRENT_ACTIVITIES)",
    )
    parser.add_argument(
        "--max-cached-workflows",
        type=int,
        metavar="N",
        help="sessions kept in memory between tasks (ARCHMAX_MAX_CACHED_WORKFLOWS; 1000)",
    )
    parser.add_argument(
        "--shutdown-grace",
        type=float,
        metavar="SECONDS",
        help="on SIGTERM, how long running activities may finish (ARCHMAX_SHUTDOWN_GRACE; 15)",
    )
    parser.add_argument(
        "--metrics-address",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (ARCHMAX_METRICS_ADDRESS)",
    )
    parser.add_argument(
        "--health-address",
        metavar="HOST:PORT",
        help="serve /healthz and /readyz at HOST:PORT (ARCHMAX_HEALTH_ADDRESS)",
    )


_VARIABLES_HELP = 'JSON object of variables, seeded locked (e.g. \'{"order_id":"A-1"}\')'


def package_version() -> str:
    """The installed distribution's version (``unknown`` when run from an uninstalled tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("archmax-temporal")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``, the version read only when asked for (reading a distribution's
    metadata costs every command tens of milliseconds)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        sys.stdout.write(f"archmax {package_version()}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command."""
    parser = _Parser(prog="archmax", description="Run archmax workflows on Temporal.")
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the installed archmax-temporal version and exit",
    )
    parser.add_argument("--root", help="authoring root (default: ARCHMAX_ROOT or the cwd)")
    parser.add_argument(
        "--verbose", action="store_true", help="narrate the turn's events and model calls on stderr"
    )
    parser.add_argument(
        "--debug", action="store_true", help="print the stack of an unexpected error"
    )
    _add_connection_flags(parser, None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="start or continue a session with a message")
    run.add_argument(
        "words",
        nargs="*",
        metavar="[workflow] prompt",
        help="the workflow (optional when workflows/ holds one) and the message",
    )
    run.add_argument("--trigger", default="manual", help="the trigger that fires (default: manual)")
    run.add_argument("--variables", help=_VARIABLES_HELP)
    run.add_argument("--session", help="explicit session id (wins over every session path)")
    run.add_argument(
        "--session-path", help="dotted path over the variables to the session id (per firing)"
    )
    run.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="VAR=PATH",
        help="hand a file to the session (placed in scratchpad/attachments/, VAR seeded)",
    )

    deliver = sub.add_parser("deliver", help="deliver an event to a session parked for input")
    deliver.add_argument("session", help="the parked session's id")
    deliver.add_argument("--trigger", required=True, help="the trigger id of the event")
    deliver.add_argument("--variables", help=_VARIABLES_HELP)

    decide = sub.add_parser("decide", help="decide for a session parked at a human state")
    decide.add_argument("session", help="the parked session's id")
    decide.add_argument("--to", required=True, help="the transition to take")
    decide.add_argument("--comment", help="the reviewer's comment, noted in the transcript")

    reply = sub.add_parser("reply", help="message a session parked at a human state")
    reply.add_argument("session", help="the parked session's id")
    reply.add_argument("message", nargs="*", help="the message (the session stays parked)")

    sessions = sub.add_parser("sessions", help="list sessions, or show one")
    sessions.add_argument("session", nargs="?", help="show this session in detail")
    sessions.add_argument("--workflow", help="only sessions of this workflow")
    sessions.add_argument(
        "--status",
        choices=STATUSES,
        help="only sessions in this status",
    )
    sessions.add_argument(
        "--due", action="store_true", help="only sessions whose timed wake is past (overdue)"
    )
    sessions.add_argument(
        "--limit", type=int, default=100, help="list at most this many (default 100)"
    )
    sessions.add_argument("--json", action="store_true", help="print JSON instead of text")
    sessions.add_argument(
        "--outdated",
        action="store_true",
        help="only sessions whose run is on an older Worker Deployment build than the current",
    )

    events = sub.add_parser("events", help="a session's events, one JSON object per line")
    events.add_argument("session", help="the session's id")
    events.add_argument(
        "--follow",
        action="store_true",
        help="keep streaming as it runs, with the model's text as it is written",
    )
    events.add_argument("--after", type=int, default=0, help="only events after this seq")

    repair = sub.add_parser(
        "repair",
        help="rebuild a session's conversation log from its workflow history",
        description=(
            "Rebuild the session's checkpoints/transcript.jsonl (and the prompts its model "
            "calls name) in the store from the Temporal history, where every message is once: "
            "what a TranscriptLogDiverged turn failure asks for. A healthy log is left as it "
            "is. Run it between turns (a session mid-turn is refused)."
        ),
    )
    repair.add_argument("session", help="the session's id")
    repair.add_argument("--json", action="store_true", help="print the report as JSON")

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
    validate.add_argument("--json", action="store_true", help="the report as one JSON document")

    dev = sub.add_parser("dev", help="dev server + UI + worker in the foreground")
    dev.add_argument(
        "action",
        nargs="?",
        choices=["stop"],
        help="stop: end this root's background dev server and background worker",
    )
    worker = sub.add_parser(
        "worker", help="a long-lived worker against the configured Temporal (for production)"
    )
    _add_worker_flags(worker)
    _add_worker_flags(dev)

    serve = sub.add_parser("serve", help="the HTTP API: triggers in, events and notifications out")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")

    replay = sub.add_parser(
        "replay",
        help="replay exported session histories against the installed code",
        description=(
            "Replay workflow histories (JSON from `temporal workflow show --output json` or "
            "the Temporal UI's download) against the installed ArchmaxSession code: OK, or "
            "the nondeterminism found. Exit 0 when every file replays, else 1."
        ),
    )
    replay.add_argument("files", nargs="+", metavar="FILE", help="a history as JSON")
    replay.add_argument("--workflow-id", help="the session id to replay under (default: file name)")

    helper = sub.add_parser("help", help="this help, or a command's")
    helper.add_argument("topic", nargs="?", metavar="command", help="the command to explain")

    demo = sub.add_parser("demo", help="the support-inbox demo: park, deliver, answer")
    demo.add_argument("--conversation", help="conversation id (default: a fresh one)")
    for command in (deliver, decide, reply):
        command.add_argument("--workflow", help="the session's workflow (checked, optional)")
    for name in CONNECTING_COMMANDS:
        # after the command too (archmax worker --address host:7233); the global flag's
        # value stands unless the command's own is given
        _add_connection_flags(sub.choices[name], argparse.SUPPRESS)
    for name in COMMANDS_WITH_VERBOSE:
        # --verbose after the command too (archmax run wf hi --verbose), as archmax spells it
        sub.choices[name].add_argument(
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="narrate the turn's events on stderr",
        )
    return parser


def print_help(topic: str | None) -> int:
    """``archmax help [command]``: the help ``--help`` prints, exit 0."""
    parser = build_parser()
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
