"""A scripted model: an OpenAI-compatible Chat Completions server driven by a YAML playbook.

Why: archmax sessions call a model through the real ``openai`` client. To test a workflow end to
end — states, tool calls, waits, event deliveries, retries — without a model bill and without
flaky, non-deterministic answers, point that client at this server instead. It speaks just
enough of the Chat Completions HTTP API (``POST /v1/chat/completions``, ``GET /v1/models``) for
the production code path to run unchanged; only the model is replaced. It is a test double for
the model, nothing more: it never calls out, and answers from the playbook alone.

The playbook (:mod:`archmax_temporal.client.testing.playbook`) says what the model answers; the
answers are written as the Chat Completions API writes them
(:mod:`archmax_temporal.client.testing.completions`), or streamed
(:mod:`archmax_temporal.client.testing.completion_stream`).

Use it in-process (``with ScriptedModelServer(Playbook.load(path)) as srv: ... srv.url``) or
from a shell: ``python -m archmax_temporal.client.testing.scripted_model PLAYBOOK [--port N]``
prints the base URL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self, cast

from archmax_temporal.client.testing.completion_stream import sse_events
from archmax_temporal.client.testing.completions import (
    MODEL_ID,
    completion,
    error_body,
    fill_template,
    render_reply,
)
from archmax_temporal.client.testing.playbook import (
    ConversationView,
    ErrorReply,
    Playbook,
    PlaybookError,
    Reply,
    Rule,
    ScriptedToolCall,
    StreamShape,
    When,
    rule_label,
)

# What a user of the scripted model imports from here (its in-process use above), wherever
# each name lives.
__all__ = [
    "MODEL_ID",
    "ConversationView",
    "ErrorReply",
    "Playbook",
    "PlaybookError",
    "RecordedRequest",
    "Reply",
    "Rule",
    "ScriptedModelServer",
    "ScriptedToolCall",
    "StreamShape",
    "When",
    "fill_template",
    "main",
]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class RecordedRequest:
    """One chat.completions request the server answered."""

    path: str
    body: dict[str, Any]
    rule: str | None
    """The answering rule's name (``rules[i]`` when unnamed); None for default / no match."""
    rule_index: int | None
    had_authorization: bool
    status: int
    state: str | None
    handoff: bool
    response: dict[str, Any]
    """The JSON answered (for a streamed answer, the equivalent ``chat.completion``)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.body.get("messages", []))


@dataclass(frozen=True)
class _Answer:
    status: int
    payload: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    raw: tuple[bytes, str] | None = None
    """A verbatim body and its content type, sent instead of ``payload``."""
    stream: StreamShape | None = None
    """How a streamed answer is written (None: at once)."""


class ScriptedModelServer:
    """The playbook served over HTTP on ``host:port`` (0 = a free port) in a daemon thread."""

    def __init__(self, playbook: Playbook, host: str = "127.0.0.1", port: int = 0) -> None:
        self.playbook = playbook
        self.host = host
        self._port = port
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._counts: dict[int, int] = {}
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self.stream_gate: threading.Event | None = None
        """When set to an event, a stream's last chunk waits for it (up to a minute): a test
        can show that text reached a client while the answer was still being written."""
        self.gate_opened: bool | None = None
        """Whether the last stream's gate opened in time (``None``: no gate was waited on)."""

    # lifecycle

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        """The request handler the server runs (a subclass may wrap it, e.g. to time it)."""
        return _Handler

    def start(self) -> Self:
        """Bind and serve; idempotent. Returns self."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer((self.host, self._port), self.handler_class())
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-model:{self.port}",
            daemon=True,
        )
        self._thread.start()
        logger.info("scripted model serving at %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving and close open connections; idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (the requested one before :meth:`start`)."""
        if self._httpd is None:
            return self._port
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for ``openai.OpenAI(base_url=...)``, including ``/v1``."""
        if self._httpd is None:
            raise RuntimeError("ScriptedModelServer is not started")
        return f"http://{self.host}:{self.port}/v1"

    def reset_counters(self) -> None:
        """Forget how often each rule answered, so ``times`` counts from zero again."""
        with self._lock:
            self._counts.clear()

    # answering

    def _answer_chat(
        self, path: str, body: dict[str, Any], had_authorization: bool
    ) -> tuple[_Answer, bool]:
        """The answer for one chat.completions request, recorded; and whether to stream."""
        view = ConversationView.from_body(body)
        with self._lock:
            chosen: tuple[int, Rule, dict[str, str]] | None = None
            for index, rule in enumerate(self.playbook.rules):
                if rule.times is not None and self._counts.get(index, 0) >= rule.times:
                    continue
                groups = rule.when.match(view)
                if groups is not None:
                    self._counts[index] = self._counts.get(index, 0) + 1
                    chosen = (index, rule, groups)
                    break
        answer: _Answer
        if chosen is not None:
            index, rule, groups = chosen
            label: str | None = rule_label(rule, index)
            delay_s = rule.delay_ms / 1000
            if rule.error is not None:
                error = rule.error
                headers: tuple[tuple[str, str], ...] = ()
                if error.retry_after is not None:
                    headers = (("Retry-After", _format_seconds(error.retry_after)),)
                answer = _Answer(
                    error.status,
                    error_body(
                        error.status, fill_template(error.message, groups), error.type, error.code
                    ),
                    headers,
                    delay_s,
                    None
                    if error.body is None
                    else (fill_template(error.body, groups).encode("utf-8"), error.content_type),
                )
            else:
                assert rule.reply is not None
                content, calls = render_reply(rule.reply, groups, view)
                answer = _Answer(
                    200, completion(body, content, calls), (), delay_s, stream=rule.stream
                )
        else:
            label = None
            if self.playbook.default is not None:
                content, calls = render_reply(self.playbook.default, {}, view)
            else:
                last_user = None if view.last_user is None else view.last_user[:80]
                content = (
                    f"[scripted-model] no rule matched (state={view.state}, last_user={last_user})"
                )
                calls = []
                logger.warning("scripted model: %s", content)
            answer = _Answer(200, completion(body, content, calls))
        record = RecordedRequest(
            path=path,
            body=body,
            rule=label,
            rule_index=chosen[0] if chosen is not None else None,
            had_authorization=had_authorization,
            status=answer.status,
            state=view.state,
            handoff=view.handoff,
            response=answer.payload,
        )
        with self._lock:
            self.requests.append(record)
        logger.info(
            "scripted model: %s state=%s handoff=%s rule=%s status=%d",
            path,
            view.state,
            view.handoff,
            label,
            answer.status,
        )
        return answer, bool(body.get("stream")) and answer.status == 200

    def _track(self, connection: socket.socket, active: bool) -> None:
        with self._lock:
            if active:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)


def _format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ScriptedModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request (a worker SIGKILLed during a model call) is no
        error of the server's: dropped quietly. Anything else is printed as usual."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            logger.debug("scripted model: client %s went away mid-request", client_address)
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-model"
    disable_nagle_algorithm = True  # headers and body leave at once (no 40 ms ACK stall)
    timeout = 60  # an idle keep-alive connection frees its thread after this

    @property
    def _owner(self) -> ScriptedModelServer:
        return cast(_HTTPServer, self.server).owner

    def setup(self) -> None:
        super().setup()
        self._owner._track(self.connection, True)

    def finish(self) -> None:
        self._owner._track(self.connection, False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("scripted model http: " + format, *args)

    def _route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def do_GET(self) -> None:
        route = self._route()
        model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "scripted"}
        if route in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [model]})
        elif route.startswith(("/v1/models/", "/models/")):
            self._send_json(200, {**model, "id": route.rsplit("/", 1)[1]})
        else:
            self._send_json(404, error_body(404, f"no route GET {route}", None, None))

    def do_POST(self) -> None:
        route = self._route()
        body = self._read_body()
        if route not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, error_body(404, f"no route POST {route}", None, None))
            return
        if body is None:
            return
        if not isinstance(body.get("messages"), list):
            self._send_json(400, error_body(400, "'messages' must be a list", None, None))
            return
        had_authorization = bool(self.headers.get("Authorization"))
        answer, stream = self._owner._answer_chat(route, body, had_authorization)
        if answer.delay_s > 0:
            time.sleep(answer.delay_s)
        shape = answer.stream
        if answer.raw is not None:
            self._send(answer.status, answer.raw[0], answer.raw[1], answer.headers)
        elif stream:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            events = sse_events(answer.payload, include_usage, shape)
            if shape is None:
                self._send(200, b"".join(e for e, _ in events), "text/event-stream", ())
            else:
                self._send_stream(events, shape)
        elif shape is not None:  # a slow writer takes as long to answer whole
            written = shape.chunks if shape.break_after is None else shape.break_after
            time.sleep(written * shape.delay_ms / 1000)
            if shape.break_after is not None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._send_json(answer.status, answer.payload, answer.headers)
        else:
            self._send_json(answer.status, answer.payload, answer.headers)

    def _send_stream(self, events: list[tuple[bytes, bool]], shape: StreamShape) -> None:
        """``events`` in chunked transfer encoding, each written and flushed on its own, with
        ``shape.delay_ms`` before each that carries content; broken off as ``shape`` says."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for sent, (event, text) in enumerate(events):
            if sent == shape.break_after:
                if shape.break_with == "close":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                error: dict[str, Any] = {"message": shape.error_message, "type": "server_error"}
                if shape.error_status is not None:
                    error["code"] = shape.error_status
                self._write_chunk(f"data: {json.dumps({'error': error})}\n\n".encode())
                break
            if shape.delay_ms and text:
                time.sleep(shape.delay_ms / 1000)
            gate = self._owner.stream_gate
            if gate is not None and sent == len(events) - 1:
                self._owner.gate_opened = gate.wait(timeout=60)
            self._write_chunk(event)
        self.wfile.write(b"0\r\n\r\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _read_body(self) -> dict[str, Any] | None:
        """The JSON object body; on failure an error is already sent (none to a client gone
        before its body was whole) and None returned."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._send_json(400, error_body(400, "bad Content-Length", None, None))
            return None
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:  # the client went away before its body was whole
            self.close_connection = True
            return None
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            self._send_json(400, error_body(400, f"body is not JSON: {exc}", None, None))
            return None
        if not isinstance(body, dict):
            self._send_json(400, error_body(400, "body must be a JSON object", None, None))
            return None
        return body

    def _send_json(
        self, status: int, payload: Mapping[str, Any], headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        try:
            data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in the playbook: send it as an escape
            data = json.dumps(payload).encode("ascii")
        self._send(status, data, "application/json", headers)

    def _send(
        self, status: int, data: bytes, content_type: str, headers: Sequence[tuple[str, str]]
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m client.scripted_model PLAYBOOK``: serve until interrupted; print the URL."""
    parser = argparse.ArgumentParser(
        prog="python -m client.scripted_model",
        description="Serve a scripted, OpenAI-compatible model from a YAML playbook.",
    )
    parser.add_argument("playbook", type=Path, help="the YAML playbook")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (0 = a free one)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    try:
        playbook = Playbook.load(args.playbook)
    except PlaybookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server = ScriptedModelServer(playbook, host=args.host, port=args.port).start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    with server:
        print(server.url, flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
