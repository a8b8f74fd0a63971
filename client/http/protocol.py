"""The HTTP/1.1 protocol ``archmax serve`` runs under uvicorn: uvicorn's own h11 protocol, with
one change. A request its parser refuses before the app sees it (a malformed request line or
header, a negative or non-numeric ``Content-Length``) is answered with the same
``application/problem+json`` document as every other refusal, instead of uvicorn's plain-text
``400``.

uvicorn takes the protocol class as configuration (``uvicorn.Config(http=...)``);
:func:`uvicorn_config` is the one place the server's configuration is built, so the command and
the tests run the same thing. Importing this module loads uvicorn.
"""

from __future__ import annotations

import json
from typing import Any

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from archmax_temporal.client.http.problems import PROBLEM_JSON, MalformedRequestError, problem

UNPARSABLE = (
    "the request is not valid HTTP/1.1: a malformed request line or header, or a "
    "Content-Length that is not a non-negative number"
)


class ProblemH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, its parser's refusals answered as problem documents."""

    def send_400_response(self, msg: str) -> None:
        status, document = problem(MalformedRequestError(UNPARSABLE))
        body = json.dumps(document, separators=(",", ":")).encode()
        headers = [
            (b"content-type", PROBLEM_JSON.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=status, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()


def uvicorn_config(app: ASGIApp, **options: Any) -> uvicorn.Config:
    """The uvicorn configuration of ``app`` on :class:`ProblemH11Protocol` (``options`` as
    ``uvicorn.Config`` takes them)."""
    return uvicorn.Config(app, http=ProblemH11Protocol, **options)
