"""moto's S3 application (what ``python -m moto.server`` serves), run as a script by
:class:`tests.support.s3server.S3Server` (``python tests/support/moto_server.py --port N``), with
its requests handled one at a time.

S3 checks a conditional put (``If-Match``, ``If-None-Match``) and writes in one step; moto
checks, then writes, so two concurrent puts could both pass its check. One request at a time
gives S3's answer, and a test of racing writers sees exactly one win, every run. (A script with
no imports from ``tests``: it runs with only its own folder on the path.)
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Iterable
from typing import Any


def serve(host: str, port: int) -> None:
    """moto's application, its requests handled one at a time (see the module docstring)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    application = DomainDispatcherApplication(create_backend_app)
    one_at_a_time = threading.Lock()

    def serialised(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        with one_at_a_time:
            return list(application(environ, start_response))

    run_simple(host, port, serialised, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    serve(arguments.host, arguments.port)
