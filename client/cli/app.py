"""``archmax``: the command line, following archmax's conventions.

stdout carries results only (a reply, a listing, JSON); stderr narrates (session header, state
flow, park reports with the resume command, verdicts). Exit codes: 0 when the command did its
job (a park counts: waiting is success), 1 for a failure (failed or rejected session, a refused
delivery, an invalid workflow), 2 for a usage error; 141 when the reader of stdout went away
(``archmax events … | head``), quietly, as a tool ended by SIGPIPE.

Imports are lazy: parsing and ``archmax help`` load only :mod:`.parser` (the standard
library); a command loads the runtime when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from archmax_temporal.client.cli.parser import UsageError, build_parser, print_help


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Parse and run one command; the exit code (never raises for expected failures)."""
    args: argparse.Namespace | None = None
    try:
        args = build_parser().parse_args(argv)
        if args.command == "help":
            return print_help(args.topic)
        return _run_command(args)
    except UsageError as exc:
        if exc.command is None and args is not None:
            exc.command = args.command
        _err(f"archmax: {exc}")
        _err(f"try archmax {exc.command + ' ' if exc.command else ''}--help")
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _stdout_closed()


def _stdout_closed() -> int:
    """The reader of stdout went away (``archmax events … | head``): stop quietly, as a tool
    ended by SIGPIPE does (exit 141), with stdout pointed at /dev/null so the final flush
    cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # SIGPIPE


def _run_command(args: argparse.Namespace) -> int:
    import asyncio

    from archmax_temporal.client.cli.commands import dispatch
    from archmax_temporal.client.devserver import DevServerError
    from archmax_temporal.client.logs import configure_logging
    from archmax_temporal.workflows.errors import ArchmaxError

    try:
        configure_logging(verbose=args.verbose or args.command in ("worker", "dev"))
        from archmax_temporal.connection import forward_core_logs

        forward_core_logs()  # the core's lines through the chain above: never on stdout
        from archmax_temporal.activities.tracing import configure_tracing

        configure_tracing()
        return asyncio.run(dispatch(args))
    except (ArchmaxError, DevServerError) as exc:
        _err(f"✖ {type(exc).__name__}: {exc}")
        if args.debug:
            traceback.print_exc()
        return 1
    except (KeyboardInterrupt, UsageError, BrokenPipeError):
        raise
    except Exception as exc:  # never a traceback unless asked for
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        _err(f"✖ {type(exc).__name__}: {first}" if first else f"✖ {type(exc).__name__}")
        if args.debug:
            traceback.print_exc()
        else:
            _err("  (an unexpected error: run again with --debug for its stack)")
        return 1


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console entry point. Exits through ``os._exit`` after flushing: a process that used the
    Temporal client can abort at interpreter exit (sdk-python#300)."""
    code = run_cli(argv)
    if "opentelemetry" in sys.modules:  # spans a command recorded, exported before leaving
        from archmax_temporal.activities.tracing import flush_tracing

        flush_tracing()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
