"""The HTTP API of ``archmax serve``: a Starlette app over the host API.

Each route is a thin adapter: read and bound the body, authorize, parse into a typed body, call
``Agent.workflow`` / ``Agent.sessions``, answer the Outcome (or summary, or events) in archmax's
camelCase JSON. Every refusal is a problem document (:mod:`.problems`); the host API's typed
errors pass through unchanged, so a refusal means the same here as in Python.

``Idempotency-Key`` (for a signed webhook: its ``webhook-id``) names the firing's Temporal
update id, bound to the request and scoped to the caller (:mod:`.keys`): a retried request
applies nothing twice and gets the first Outcome back, also when the retries race; the same key
with another request is refused. ``Prefer: respond-async`` answers ``202`` as soon as the
session accepted the firing (its validators passed), with ``Location`` naming the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import unquote

from pydantic import BaseModel
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import UpdateWorkflowExecutionLifecycleStage
from temporalio.api.update.v1 import UpdateRef, WaitPolicy
from temporalio.api.workflowservice.v1 import PollWorkflowExecutionUpdateRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.activities.logs import get_logger
from archmax_temporal.client.events import LIVE_EVENT_TYPES
from archmax_temporal.client.host import Agent
from archmax_temporal.client.http import auth, reading
from archmax_temporal.client.http.agents import AgentFactory
from archmax_temporal.client.http.keys import KeyBindings, Keyed, file_digest
from archmax_temporal.client.http.listing import approvals_page, list_page
from archmax_temporal.client.http.notify import Notifier
from archmax_temporal.client.http.openapi import openapi_document
from archmax_temporal.client.http.problems import (
    PROBLEM_JSON,
    RETRY_AFTER_SECONDS,
    AuthenticationRequiredError,
    MalformedRequestError,
    MethodNotAllowedError,
    RouteNotFoundError,
    SignatureRejectedError,
    UnsupportedMediaTypeError,
    problem,
    status_of,
)
from archmax_temporal.client.http.settings import ServeSettings
from archmax_temporal.client.http.wire import (
    Decision,
    Delivery,
    Reply,
    SessionMessage,
    to_wire,
)
from archmax_temporal.client.runtime import translate
from archmax_temporal.client.session_ids import minted_for_key
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    InvalidSessionIdError,
    SessionBusyError,
    SessionNotFoundError,
    TemporalUnavailableError,
    UnknownTriggerError,
)
from archmax_temporal.workflows.identity import check_session_id
from archmax_temporal.workflows.models import Outcome, SessionStatus
from archmax_temporal.workflows.spec import SLUG

log = get_logger("archmax.http")

LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 200
ACCEPT_POLL_SECONDS = 0.05
"""How often a ``respond-async`` firing looks whether the session accepted it yet."""

SSE_PING_SECONDS = 15
"""The comment line an idle event stream sends so proxies keep it open."""

SESSIONS_PREFIX = b"/v1/sessions/"

ANONYMOUS = "anonymous"
"""The caller of a server with no tokens (loopback only): every request is the same caller."""

STATUSES: tuple[str, ...] = SessionStatus.__args__  # type: ignore[attr-defined]

T = TypeVar("T", bound=BaseModel)
Handler = Callable[[Request], Awaitable[Response]]


class HttpService:
    """The server's state: where agents come from, what it is configured with, the
    notifier, and the turns it still awaits for ``respond-async`` firings."""

    def __init__(self, agents: AgentFactory, settings: ServeSettings) -> None:
        self.agents = agents
        self.settings = settings
        self.notifier = (
            Notifier(settings.notify_url, settings.notify_secret)
            if settings.notify_url and settings.notify_secret
            else None
        )
        self.keys = KeyBindings()
        self.replays = auth.ReplayGuard()
        self._background: set[asyncio.Task[Any]] = set()
        self._document: dict[str, Any] | None = None

    async def aclose(self) -> None:
        """Stop awaiting async turns (they go on in Temporal), flush notifications, close the
        agents' runtime."""
        for task in list(self._background):
            task.cancel()
        for task in list(self._background):
            with contextlib.suppress(BaseException):
                await task
        if self.notifier is not None:
            await self.notifier.aclose()
        close = getattr(self.agents, "aclose", None)
        if close is not None:
            await close()

    # --- the pieces every route shares ---------------------------------------------------

    async def agent(self, workflow: str | None) -> Agent:
        return await self.agents(workflow)

    def authorize(self, request: Request) -> str:
        """The caller: who its bearer token says it is (``anonymous`` with no tokens). A read
        (``GET``) may show the inbox's login cookie instead; a change always needs the bearer
        token (the inbox's own forms carry a CSRF token instead)."""
        if not self.settings.tokens:
            return ANONYMOUS
        header = request.headers.get("authorization")
        cookie = request.cookies.get(auth.LOGIN_COOKIE)
        if header is None and cookie is not None and request.method in ("GET", "HEAD"):
            token = auth.check_login_cookie(self.settings.tokens, cookie)
        else:
            token = auth.check_bearer(self.settings.tokens, header)
        return auth.caller_of_token(token)

    def authorize_signed(
        self, request: Request, name: str, secret: str, body: bytes
    ) -> tuple[str, str | None]:
        """The caller and the signed key of a request to a trigger with a secret. A signed
        request: the caller is the trigger's signer and the ``webhook-id`` the firing's key
        (an ``Idempotency-Key`` may only repeat it); a signature received before is refused.
        A request that carries no signature may instead show a bearer token, when tokens are
        configured (then no signed key)."""
        if any(header in request.headers for header in auth.SIGNED_HEADERS):
            signed = auth.verify_signature(secret, request.headers, body)
            given = reading.update_id(request)
            if given is not None and given != signed.message_id:
                raise SignatureRejectedError(
                    f"the Idempotency-Key of a signed request is its {auth.ID_HEADER}, which "
                    "the signature covers: send the same value or leave the header out"
                )
            self.replays.admit(name, signed)
            return f"signed:{name}", signed.message_id
        if not self.settings.tokens:
            raise AuthenticationRequiredError(
                f"trigger {name} takes signed requests ({', '.join(auth.SIGNED_HEADERS)})"
            )
        return self.authorize(request), None

    def keyed(
        self, request: Request, caller: str, request_body: Any, key: str | None = None
    ) -> Keyed:
        """The update id of this request: its key (``Idempotency-Key``, or ``key`` when the
        signature names it) bound to the request and scoped to route and caller, else a fresh
        id."""
        key = key or reading.update_id(request)
        if key is None:
            return Keyed(uuid.uuid4().hex)
        raw_path = request.scope.get("raw_path")
        path = raw_path.decode("latin-1") if isinstance(raw_path, bytes) else request.url.path
        return self.keys.bind(key, scope=(request.method, path, caller), request=request_body)

    @contextlib.contextmanager
    def held(self, keyed: Keyed) -> Iterator[None]:
        """Keep ``keyed``'s binding unless what runs inside is refused (a 4xx: nothing was
        applied), which frees the key for a corrected request."""
        try:
            yield
        except Exception as exc:
            typed = translate(exc)
            if isinstance(typed, ArchmaxError) and status_of(typed) < 500:
                self.keys.release(keyed)
            raise

    def document(self) -> dict[str, Any]:
        if self._document is None:
            self._document = openapi_document()
        return self._document

    def spawn(self, awaitable: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``awaitable`` beyond the request; its failure is logged, never left unread."""
        task = asyncio.ensure_future(awaitable)
        self._background.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.info("async firing ended without an outcome", error=str(task.exception()))

    # --- firing --------------------------------------------------------------------------

    async def settle(
        self,
        request: Request,
        agent: Agent,
        session_id: str | None,
        keyed: Keyed,
        call: Callable[[], Awaitable[Outcome]],
    ) -> Response:
        """Run the host call that settles one turn; answer its Outcome, or ``202`` when the
        caller asked for ``respond-async`` (once the session accepted the firing). A refusal
        (4xx: nothing applied) releases the request's key for a corrected request."""
        with self.held(keyed):
            return await self._settle(request, agent, session_id, keyed, call)

    async def _settle(
        self,
        request: Request,
        agent: Agent,
        session_id: str | None,
        keyed: Keyed,
        call: Callable[[], Awaitable[Outcome]],
    ) -> Response:
        update_id = keyed.update_id
        if session_id is None or not reading.prefers_async(request):
            outcome = await call()
            self.notify(outcome, update_id)
            return _json(to_wire(outcome))
        task = self.spawn(self._notified(call, update_id))
        await _accepted(agent.client, session_id, update_id, task)
        if task.done() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        body = {"sessionId": session_id, "updateId": update_id, "status": "accepted"}
        headers = {
            "Location": f"/v1/sessions/{session_id}",
            "Preference-Applied": "respond-async",
        }
        return _json(body, 202, headers)

    async def _notified(self, call: Callable[[], Awaitable[Outcome]], update_id: str) -> Outcome:
        outcome = await call()
        self.notify(outcome, update_id)
        return outcome

    def notify(self, outcome: Outcome, update_id: str) -> None:
        if self.notifier is not None:
            self.notifier.outcome(outcome, key=update_id)


# --- routes ------------------------------------------------------------------------------


def _service(request: Request) -> HttpService:
    service: HttpService = request.app.state.archmax
    return service


def _endpoint(handler: Handler) -> Handler:
    """Answer every failure of ``handler`` as a problem document."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            return problem_response(exc, request)

    endpoint.__name__ = handler.__name__
    endpoint.__doc__ = handler.__doc__
    return endpoint


def problem_response(error: BaseException, request: Request | None = None) -> Response:
    """The problem document of any failure; an unexpected one is logged and answered 500
    without its details."""
    typed = translate(error)
    if not isinstance(typed, ArchmaxError):
        log.error("unexpected error", error=repr(error), exc_info=error)
        typed = ArchmaxError("the server failed to handle the request; see its log")
    status, body = problem(typed, instance=request.url.path if request is not None else None)
    headers: dict[str, str] = {}
    if status == 503 or isinstance(typed, SessionBusyError):
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(body, status, headers=headers, media_type=PROBLEM_JSON)


@_endpoint
async def healthz(request: Request) -> Response:
    """Whether the server can reach Temporal."""
    agent = await _service(request).agent(None)
    try:
        healthy = await agent.client.service_client.check_health(timeout=_seconds(2))
    except Exception as exc:
        raise TemporalUnavailableError(f"the Temporal server did not answer: {exc}") from exc
    if not healthy:
        raise TemporalUnavailableError("the Temporal server reports itself unhealthy")
    return _json({"status": "ok", "temporal": "ok"})


async def openapi(request: Request) -> Response:
    """The OpenAPI document of this API."""
    return _json(_service(request).document())


@_endpoint
async def fire_trigger(request: Request) -> Response:
    """``POST /v1/workflows/{slug}/triggers/{trigger}``: a firing, routed by the seed's
    session precedence and send rule."""
    service = _service(request)
    slug = request.path_params["slug"]
    trigger = request.path_params["trigger"]
    if not SLUG.match(slug):
        raise MalformedRequestError(f"workflow slug {slug!r} is not kebab-case")
    name = f"{slug}/{trigger}"
    secret = service.settings.secrets.get(name)
    signed_key: str | None = None
    if secret is None:
        caller = service.authorize(request)  # before reading a byte of an unauthorized body
        raw = await reading.body(request, service.settings.max_body)
    else:
        raw = await reading.body(request, service.settings.max_body)
        caller, signed_key = service.authorize_signed(request, name, secret, raw)
    firing, files = await reading.firing(request, raw)
    agent = await service.agent(slug)
    spec = agent.loaded.spec
    if spec.start_state_for(trigger) is None:
        declared = ", ".join(spec.trigger_ids()) or "(none)"
        raise UnknownTriggerError(
            f"trigger {trigger!r} is not declared by workflow {slug!r}; "
            f"declared triggers: {declared}"
        )
    reading.check_names({**firing.variables, **files})
    described = {
        "firing": firing.model_dump(mode="json"),
        "files": {variable: [part[0], file_digest(part[1])] for variable, part in files.items()},
    }
    keyed = service.keyed(request, caller, described, signed_key)
    key = keyed.update_id
    session_id = firing.session
    if reading.prefers_async(request) and session_id is None:
        with service.held(keyed):
            resolved = await agent.workflow.resolve_session(
                trigger=trigger,
                variables=firing.variables,
                session_path=firing.session_path,
            )
        session_id = minted_for_key(slug, trigger, key) if resolved.minted else resolved.session_id

    def call() -> Awaitable[Outcome]:
        return agent.workflow.send(
            session_id,
            firing.message,
            trigger=trigger,
            variables=firing.variables,
            session_path=firing.session_path,
            files=files,
            idempotency_key=key,
        )

    return await service.settle(request, agent, session_id, keyed, call)


@_endpoint
async def deliver(request: Request) -> Response:
    """``POST /v1/sessions/{id}/deliver``: resume a session parked for input."""
    service, caller, session_id, body = await _session_post(request, Delivery)
    reading.check_names(body.variables)
    agent = await service.agent(None)
    keyed = service.keyed(request, caller, body.model_dump(mode="json"))
    key = keyed.update_id

    def call() -> Awaitable[Outcome]:
        return agent.workflow.deliver(
            session_id,
            trigger=body.trigger,
            variables=body.variables,
            message=body.message,
            idempotency_key=key,
        )

    return await service.settle(request, agent, session_id, keyed, call)


@_endpoint
async def decide(request: Request) -> Response:
    """``POST /v1/sessions/{id}/decide``: route a session parked at a human state."""
    service, caller, session_id, body = await _session_post(request, Decision)
    agent = await service.agent(None)
    keyed = service.keyed(request, caller, body.model_dump(mode="json"))
    key = keyed.update_id

    def call() -> Awaitable[Outcome]:
        return agent.workflow.decide(
            session_id, to=body.to, comment=body.comment, idempotency_key=key, seq=body.seq
        )

    return await service.settle(request, agent, session_id, keyed, call)


@_endpoint
async def reply(request: Request) -> Response:
    """``POST /v1/sessions/{id}/reply``: a person's message to a session at a human state."""
    service, caller, session_id, body = await _session_post(request, Reply)
    agent = await service.agent(None)
    keyed = service.keyed(request, caller, body.model_dump(mode="json"))
    key = keyed.update_id

    def call() -> Awaitable[Outcome]:
        return agent.workflow.reply(session_id, body.message, idempotency_key=key)

    return await service.settle(request, agent, session_id, keyed, call)


@_endpoint
async def message(request: Request) -> Response:
    """``POST /v1/sessions/{id}/messages``: send to an existing session (the send rule)."""
    service, caller, session_id, body = await _session_post(request, SessionMessage)
    reading.check_names(body.variables)
    workflow = await _workflow_of(await service.agent(None), session_id)
    agent = await service.agent(workflow)
    keyed = service.keyed(request, caller, body.model_dump(mode="json"))
    key = keyed.update_id

    def call() -> Awaitable[Outcome]:
        return agent.workflow.send(
            session_id,
            body.message,
            trigger=body.trigger,
            variables=body.variables,
            idempotency_key=key,
        )

    return await service.settle(request, agent, session_id, keyed, call)


@_endpoint
async def list_sessions(request: Request) -> Response:
    """``GET /v1/sessions``: this deployment's open sessions, newest first, a page at a time."""
    service = _service(request)
    service.authorize(request)
    params = request.query_params
    status = params.get("status")
    workflow = params.get("workflow")
    due = reading.flag(params.get("due"), "due", default=False)
    limit = reading.integer(params.get("limit"), "limit", LIST_LIMIT_DEFAULT, 1, LIST_LIMIT_MAX)
    if status is not None and status not in STATUSES:
        raise MalformedRequestError(f"status must be one of {', '.join(STATUSES)}")
    if workflow is not None and not SLUG.match(workflow):
        raise MalformedRequestError(f"workflow slug {workflow!r} is not kebab-case")
    agent = await service.agent(None)
    sessions, cursor = await list_page(
        agent,
        status=status,
        workflow=workflow,
        due=due,
        limit=limit,
        cursor=params.get("cursor"),
    )
    return _json({"sessions": [to_wire(s) for s in sessions], "nextCursor": cursor})


@_endpoint
async def list_approvals(request: Request) -> Response:
    """``GET /v1/approvals``: the sessions awaiting a person's decision, across workflows, a
    page at a time (read from visibility, like the session list: no worker needed)."""
    service = _service(request)
    service.authorize(request)
    params = request.query_params
    workflow = params.get("workflow")
    limit = reading.integer(params.get("limit"), "limit", LIST_LIMIT_DEFAULT, 1, LIST_LIMIT_MAX)
    if workflow is not None and not SLUG.match(workflow):
        raise MalformedRequestError(f"workflow slug {workflow!r} is not kebab-case")
    agent = await service.agent(None)
    approvals, cursor = await approvals_page(
        agent, workflow=workflow, limit=limit, cursor=params.get("cursor")
    )
    return _json({"approvals": [to_wire(a) for a in approvals], "nextCursor": cursor})


@_endpoint
async def get_session(request: Request) -> Response:
    """``GET /v1/sessions/{id}``: the session's summary; with no worker to answer, what
    visibility knows (as the listing), never a 503."""
    service = _service(request)
    service.authorize(request)
    session_id = _session_id(request, whole=True)
    agent = await service.agent(None)
    return _json(to_wire(await agent.sessions.read(session_id)))


@_endpoint
async def session_events(request: Request) -> Response:
    """``GET /v1/sessions/{id}/events``: the session's events as Server-Sent Events, each
    named with its type (``event:``) and ``id:`` its ``seq`` (``seq.k`` for the k-th further
    event read off the same history event), resumable with ``Last-Event-ID``; live until the
    client leaves (``follow``), with the model's text as it is written (``agent-text-delta``,
    ``agent-text-reset``: advisory, sent without an ``id:`` so a resumed stream never
    replays them)."""
    service = _service(request)
    service.authorize(request)
    session_id = _session_id(request)
    params = request.query_params
    follow = reading.flag(params.get("follow"), "follow", default=True)
    after = (reading.integer(params.get("after"), "after", 0, 0, 2**62), 2**62)
    last = request.headers.get("last-event-id")
    if last:
        after = reading.event_position(last)
    agent = await service.agent(None)
    try:
        await agent.handle(session_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise SessionNotFoundError(f"no session {session_id!r}") from exc
        raise

    async def stream() -> AsyncIterator[dict[str, str]]:
        seq, index = -1, 0
        try:
            events = agent.sessions.events(session_id, after=after[0] - 1, follow=follow)
            async for event in events:
                data = json.dumps(to_wire(event), separators=(",", ":"))
                if event.type in LIVE_EVENT_TYPES:
                    yield {"event": event.type, "data": data}
                    continue
                index = index + 1 if event.seq == seq else 0
                seq = event.seq
                if (seq, index) <= after:
                    continue
                yield {
                    "id": str(seq) if index == 0 else f"{seq}.{index}",
                    "event": event.type,
                    "data": data,
                }
        except RPCError as exc:  # the stream is already open: end it, log why
            log.warning("event stream ended", session_id=session_id, error=str(exc))

    return EventSourceResponse(stream(), ping=SSE_PING_SECONDS)


# --- helpers -----------------------------------------------------------------------------


async def _session_post(request: Request, model: type[T]) -> tuple[HttpService, str, str, T]:
    """The service, the caller, the session id and the typed body of a session route."""
    service = _service(request)
    caller = service.authorize(request)
    session_id = _session_id(request)
    raw = await reading.body(request, service.settings.max_body)
    content_type = request.headers.get("content-type", "")
    if raw and content_type and not reading.is_json(content_type):
        raise UnsupportedMediaTypeError("this route takes application/json")
    return service, caller, session_id, reading.parse(model, reading.json_body(raw))


async def _workflow_of(agent: Agent, session_id: str) -> str:
    """The workflow a session runs: its search attribute, else its summary."""
    try:
        described = await agent.handle(session_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise SessionNotFoundError(f"no session {session_id!r}") from exc
        raise
    slug = described.typed_search_attributes.get(sa.WORKFLOW)
    if slug:
        return slug
    return (await agent.sessions.get(session_id)).workflow


async def _accepted(
    client: Client, session_id: str, update_id: str, task: asyncio.Task[Any]
) -> None:
    """Return once the session accepted update ``update_id`` (its validators passed), or once
    the call ``task`` ended (refused: the caller raises its error). A poll that answers with a
    failed outcome (a validator's rejection, or a failure after acceptance) waits for the call,
    which raises the typed error."""
    stages = UpdateWorkflowExecutionLifecycleStage
    poll = PollWorkflowExecutionUpdateRequest(
        namespace=client.namespace,
        update_ref=UpdateRef(
            workflow_execution=WorkflowExecution(workflow_id=session_id), update_id=update_id
        ),
        identity=client.identity,
        wait_policy=WaitPolicy(
            lifecycle_stage=stages.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED
        ),
    )
    while not task.done():
        try:
            answer = await client.workflow_service.poll_workflow_execution_update(
                poll, timeout=_seconds(1)
            )
        except RPCError as exc:
            if exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.DEADLINE_EXCEEDED):
                raise
        else:
            if answer.outcome.HasField("failure"):
                await asyncio.wait({task})
                return
            if answer.stage >= stages.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED:
                return
        await asyncio.wait({task}, timeout=ACCEPT_POLL_SECONDS)


def _session_id(request: Request, *, whole: bool = False) -> str:
    """The session id of a ``/v1/sessions/{id}...`` path, read from the raw path so that an id
    holding ``/`` (sent as ``%2F``) or ``%`` arrives exactly; checked like any id. ``whole``:
    the id must be the path's last segment (the summary route)."""
    raw = request.scope.get("raw_path")
    segment: str | None = None
    if isinstance(raw, bytes) and SESSIONS_PREFIX in raw:
        encoded, slash, _ = raw.split(SESSIONS_PREFIX, 1)[1].partition(b"/")
        if whole and slash:
            raise RouteNotFoundError(f"no route {request.url.path}")
        try:
            segment = unquote(encoded.decode("ascii"), errors="strict")
        except UnicodeError:
            raise InvalidSessionIdError("the session id in the path is not UTF-8") from None
    if segment is None:
        segment = str(request.path_params["id"]).split("/", 1)[0]
    return check_session_id(segment)


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return JSONResponse(body, status, headers=dict(headers or {}))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return problem_response(MethodNotAllowedError(f"{request.method} is not allowed here"))
    if exc.status_code == 404:
        return problem_response(RouteNotFoundError(f"no route {request.url.path}"), request)
    return problem_response(MalformedRequestError(str(exc.detail)), request)


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/openapi.json", openapi, methods=["GET"]),
    Route("/v1/workflows/{slug}/triggers/{trigger}", fire_trigger, methods=["POST"]),
    Route("/v1/sessions", list_sessions, methods=["GET"]),
    Route("/v1/approvals", list_approvals, methods=["GET"]),
    # ``{id:path}``: an id may hold "/" (sent as %2F, which routing sees decoded); the id
    # itself is read from the raw path (_session_id). The bare summary route comes last.
    Route("/v1/sessions/{id:path}/events", session_events, methods=["GET"]),
    Route("/v1/sessions/{id:path}/deliver", deliver, methods=["POST"]),
    Route("/v1/sessions/{id:path}/decide", decide, methods=["POST"]),
    Route("/v1/sessions/{id:path}/reply", reply, methods=["POST"]),
    Route("/v1/sessions/{id:path}/messages", message, methods=["POST"]),
    Route("/v1/sessions/{id:path}", get_session, methods=["GET"]),
]
