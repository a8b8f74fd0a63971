"""``/inbox``: the web page of the people who decide, served by ``archmax serve``.

Plain server-rendered HTML (Jinja2, every value escaped: a transcript is anyone's text), a
stylesheet and a few lines of plain JavaScript that refresh the list (no build step), and the
same host calls as the API: a decision goes through ``Agent.workflow.decide``, so the
session's validators refuse it before anything is written, and a refusal is shown on the page.

::

    GET  /inbox                  the sessions awaiting a decision (?workflow=&cursor=)
    GET  /inbox/approvals        the list alone: what the page's script polls
    GET  /inbox/session?id=      one session: handoff, decide and reply, transcript, variables
    POST /inbox/decide           decide along an edge, with a comment
    POST /inbox/reply            a message to the session; it answers and stays parked
    GET  /inbox/login, POST      exchange a bearer token for the login cookie
    POST /inbox/logout           clear it
    GET  /inbox/static/...       the page's CSS and JS

Authentication is the API's: with ``ARCHMAX_SERVE_TOKENS`` set, a person signs in with one
of the tokens and the page keeps a login cookie (:mod:`.auth`: HttpOnly, SameSite=Strict,
Secure over https; an HMAC of the token, never the token). With no tokens (loopback only)
every visitor is the anonymous caller, and the cookie is issued without asking. Every form
that changes state carries a CSRF token derived from the login cookie, and is refused when
sent from another origin.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from archmax_temporal.activities.logs import get_logger
from archmax_temporal.client.host import Agent
from archmax_temporal.client.http import auth, reading
from archmax_temporal.client.http.app import ANONYMOUS, LIST_LIMIT_DEFAULT, HttpService
from archmax_temporal.client.http.listing import approvals_page
from archmax_temporal.client.http.problems import (
    AuthenticationRequiredError,
    CsrfRejectedError,
    MalformedRequestError,
    UnsupportedMediaTypeError,
    status_of,
)
from archmax_temporal.client.runtime import translate
from archmax_temporal.client.times import span
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    IdempotencyKeyReusedError,
    SessionNotParkedError,
    SessionUnavailableError,
)
from archmax_temporal.workflows.identity import check_session_id
from archmax_temporal.workflows.models import Message, Outcome, SessionSummary
from archmax_temporal.workflows.spec import SLUG

log = get_logger("archmax.http")

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

POLL_MS = 3000
"""How often the open list asks for the sessions awaiting a decision (milliseconds)."""

VALUE_CHARS = 4000
"""How much of one variable's JSON the session page shows."""

FORM = "application/x-www-form-urlencoded"

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
"""Every page's headers: only this server's own script and style run, nothing frames it, no
page is cached, and no address leaves for another site (a form still says its origin)."""


@dataclass(frozen=True)
class Login:
    """A signed-in person: the token their cookie was issued for, the cookie, the caller."""

    token: str
    cookie: str
    caller: str
    fresh: bool = False
    """Issued by this response (no tokens configured): the response sets it."""

    @property
    def csrf(self) -> str:
        return auth.csrf_token(self.token, self.cookie)


@dataclass(frozen=True)
class Refusal:
    """A refused action, as the page shows it."""

    title: str
    detail: str
    kind: str


class Inbox:
    """The pages' state: the service the API runs on, the templates, and the key that signs
    anonymous logins when no tokens are configured."""

    def __init__(self, service: HttpService) -> None:
        self.service = service
        self._anonymous = secrets.token_urlsafe(32)
        self.templates = Environment(
            loader=FileSystemLoader(TEMPLATES),
            autoescape=True,
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters.update(ago=_ago, until=_until, utc=_utc, shown=_shown)

    @property
    def open(self) -> bool:
        """Whether no tokens are configured (loopback only): everyone is anonymous."""
        return not self.service.settings.tokens

    def login(self, request: Request, *, issue: bool = False) -> Login:
        """The request's login; with no tokens configured and ``issue``, a fresh one.
        Otherwise :class:`AuthenticationRequiredError`."""
        cookie = request.cookies.get(auth.LOGIN_COOKIE)
        tokens = self.service.settings.tokens or {self._anonymous}
        try:
            token = auth.check_login_cookie(tokens, cookie)
        except AuthenticationRequiredError:
            if not (self.open and issue):
                raise
            fresh = auth.login_cookie(self._anonymous)
            return Login(self._anonymous, fresh, ANONYMOUS, fresh=True)
        assert cookie is not None
        caller = ANONYMOUS if self.open else auth.caller_of_token(token)
        return Login(token, cookie, caller)

    async def form(self, request: Request, login: Login) -> dict[str, str]:
        """The fields of a form that changes state, once it is shown to come from this
        login's page: sent from this origin, with its CSRF token."""
        _same_origin(request)
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != FORM:
            raise UnsupportedMediaTypeError(f"a form is sent as {FORM}")
        raw = await reading.body(request, self.service.settings.max_body)
        try:
            parsed = parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise MalformedRequestError("the form is not UTF-8") from None
        fields = {name: values[0] for name, values in parsed.items()}
        auth.check_csrf(login.token, login.cookie, fields.get("csrf"))
        return fields

    def render(
        self,
        request: Request,
        template: str,
        login: Login | None,
        *,
        status: int = 200,
        **context: Any,
    ) -> Response:
        base = _base(request)
        page = self.templates.get_template(template).render(
            base=base,
            static=f"{base}/static",
            login=login,
            open=self.open,
            **context,
        )
        response = HTMLResponse(page, status, headers=HEADERS)
        if login is not None and login.fresh:
            self.keep(request, response, login.cookie)
        return response

    def keep(self, request: Request, response: Response, cookie: str) -> None:
        """Set the login cookie on ``response``."""
        response.set_cookie(
            auth.LOGIN_COOKIE,
            cookie,
            max_age=auth.LOGIN_MAX_AGE,
            path=_cookie_path(request),
            secure=_https(request),
            httponly=True,
            samesite="strict",
        )

    def forget(self, request: Request, response: Response) -> None:
        """Clear the login cookie on ``response``."""
        response.delete_cookie(
            auth.LOGIN_COOKIE,
            path=_cookie_path(request),
            secure=_https(request),
            httponly=True,
            samesite="strict",
        )

    # --- what the pages show ---------------------------------------------------------------

    async def approvals(self, request: Request) -> dict[str, Any]:
        """The list's context: a page of approvals, each with its link, and the next page's."""
        params = request.query_params
        workflow = params.get("workflow") or None
        if workflow is not None and not SLUG.match(workflow):
            raise MalformedRequestError(f"workflow {workflow!r} is not a workflow slug")
        agent = await self.service.agent(None)
        approvals, cursor = await approvals_page(
            agent, workflow=workflow, limit=LIST_LIMIT_DEFAULT, cursor=params.get("cursor")
        )
        base = _base(request)
        query = {k: v for k, v in (("workflow", workflow), ("cursor", params.get("cursor"))) if v}
        following = {**query, "cursor": cursor} if cursor else None
        return {
            "workflow": workflow,
            "rows": [(a, f"{base}/session?{urlencode({'id': a.session_id})}") for a in approvals],
            "next_url": f"{base}?{urlencode(following)}" if following else None,
            "poll_url": f"{base}/approvals?{urlencode(query)}",
            "poll_ms": POLL_MS,
        }

    async def session(
        self,
        request: Request,
        login: Login,
        session_id: str,
        *,
        refusal: Refusal | None = None,
        status: int = 200,
        kept: Mapping[str, str] | None = None,
    ) -> Response:
        """One session's page: its summary, the handoff and the forms while it awaits a
        decision, its variables and its transcript (with no worker to answer, what visibility
        knows and no transcript). ``kept``: what a refused form held (its comment or message),
        filled in again so the person need not type it twice."""
        agent = await self.service.agent(None)
        transcript: list[Message] | None
        try:
            view = await agent.sessions.view(session_id)
            summary, transcript = view.summary, view.transcript
        except SessionUnavailableError:
            summary, transcript = await agent.sessions.read(session_id), None
        pending = summary.pending_decision if summary.status == "awaiting_decision" else None
        if pending is not None and summary.delegation is not None:
            pending = None  # its sub-workflow's park: decided on the child session
        return self.render(
            request,
            "session.html",
            login,
            status=status,
            summary=summary,
            pending=pending,
            handoff=_handoff(transcript, summary),
            transcript=[m for m in transcript if m.role != "system"] if transcript else None,
            variables=_variables(summary),
            refusal=refusal,
            kept={name: (kept or {}).get(name, "") for name in ("comment", "message")},
            key=uuid.uuid4().hex,
            self_url=_session_url(request, session_id),
        )


# --- routes --------------------------------------------------------------------------------

Page = Callable[[Inbox, Request], Awaitable[Response]]


def _page(handler: Page) -> Callable[[Request], Awaitable[Response]]:
    """Serve ``handler`` as a page: a missing login sends a page request to sign in, and any
    other failure is an error page (never a traceback)."""

    async def endpoint(request: Request) -> Response:
        inbox: Inbox = request.app.state.inbox
        try:
            return await handler(inbox, request)
        except Exception as exc:
            return _failed(inbox, request, exc)

    endpoint.__name__ = handler.__name__
    endpoint.__doc__ = handler.__doc__
    return endpoint


def _failed(inbox: Inbox, request: Request, error: BaseException) -> Response:
    typed = translate(error)
    if isinstance(typed, AuthenticationRequiredError):
        if request.url.path.endswith("/approvals"):  # the page's script: it signs in itself
            return PlainTextResponse(str(typed), 401, headers=HEADERS)
        target = f"{_base(request)}/login"
        if request.method == "GET":
            target += "?" + urlencode({"next": _here(request)})
        return RedirectResponse(target, 303, headers=HEADERS)
    if not isinstance(typed, ArchmaxError):
        log.error("unexpected error", error=repr(error), exc_info=error)
        typed = ArchmaxError("the server failed to handle the request; see its log")
    status = status_of(typed)
    return inbox.render(
        request, "error.html", None, status=status, title=_title(typed), detail=str(typed)
    )


@_page
async def inbox_list(inbox: Inbox, request: Request) -> Response:
    """The sessions awaiting a decision, refreshed while the page is open."""
    login = inbox.login(request, issue=True)
    return inbox.render(request, "list.html", login, **await inbox.approvals(request))


@_page
async def inbox_rows(inbox: Inbox, request: Request) -> Response:
    """The list alone, for the page's script."""
    login = inbox.login(request)
    return inbox.render(request, "approvals.html", login, **await inbox.approvals(request))


@_page
async def inbox_session(inbox: Inbox, request: Request) -> Response:
    """One session."""
    login = inbox.login(request, issue=True)
    session_id = check_session_id(request.query_params.get("id") or "")
    return await inbox.session(request, login, session_id)


@_page
async def inbox_decide(inbox: Inbox, request: Request) -> Response:
    """Decide along the edge the person pressed, with their comment; the outcome, or the
    session page with the refusal."""
    login = inbox.login(request)
    fields = await inbox.form(request, login)
    session_id = check_session_id(fields.get("id", ""))
    to = fields.get("to", "")
    comment = fields.get("comment", "").strip() or None
    seq = _seq(fields.get("seq"))
    body = {"id": session_id, "to": to, "comment": comment, "seq": seq}

    def call(agent: Agent, key: str) -> Awaitable[Outcome]:
        return agent.workflow.decide(
            session_id, to=to, comment=comment, idempotency_key=key, seq=seq
        )

    return await _act(inbox, request, login, fields, body, call, done=f"Decided: {to}")


@_page
async def inbox_reply(inbox: Inbox, request: Request) -> Response:
    """Send the person's message; the agent's answer, or the session page with the refusal."""
    login = inbox.login(request)
    fields = await inbox.form(request, login)
    session_id = check_session_id(fields.get("id", ""))
    message = fields.get("message", "")
    body = {"id": session_id, "message": message}

    def call(agent: Agent, key: str) -> Awaitable[Outcome]:
        return agent.workflow.reply(session_id, message, idempotency_key=key)

    return await _act(inbox, request, login, fields, body, call, done="Reply sent")


async def _act(
    inbox: Inbox,
    request: Request,
    login: Login,
    fields: Mapping[str, str],
    body: dict[str, Any],
    call: Callable[[Agent, str], Awaitable[Outcome]],
    *,
    done: str,
) -> Response:
    """Run a form's host call under the form's key (a double submit applies once) as the
    API would; answer the outcome, or the session page showing why it was refused."""
    service = inbox.service
    session_id = str(body["id"])
    agent = await service.agent(None)
    key = fields.get("key", "")
    given = key if reading.IDEMPOTENCY_KEY.match(key) else None
    try:
        keyed = service.keyed(request, login.caller, body, given)
        with service.held(keyed):
            outcome = await call(agent, keyed.update_id)
    except Exception as exc:
        typed = translate(exc)
        if not isinstance(typed, ArchmaxError) or status_of(typed) >= 500:
            raise
        refusal = Refusal(_title(typed), str(typed), type(typed).__name__)
        return await inbox.session(
            request, login, session_id, refusal=refusal, status=status_of(typed), kept=fields
        )
    service.notify(outcome, keyed.update_id)
    return inbox.render(
        request,
        "outcome.html",
        login,
        done=done,
        outcome=outcome,
        session_url=_session_url(request, session_id),
    )


async def login_page(request: Request) -> Response:
    """The sign-in form (with no tokens configured, straight to the inbox)."""
    inbox: Inbox = request.app.state.inbox
    if inbox.open:
        return RedirectResponse(_base(request), 303, headers=HEADERS)
    return inbox.render(
        request, "login.html", None, next=_next(request.query_params.get("next"), request)
    )


async def login_submit(request: Request) -> Response:
    """Exchange a bearer token for the login cookie; a wrong one is asked again (401)."""
    inbox: Inbox = request.app.state.inbox
    if inbox.open:
        return RedirectResponse(_base(request), 303, headers=HEADERS)
    fields: dict[str, str] = {}
    try:
        _same_origin(request)
        raw = await reading.body(request, inbox.service.settings.max_body)
        fields = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
        token = auth.check_bearer(
            inbox.service.settings.tokens, f"Bearer {fields.get('token', '')}"
        )
    except ArchmaxError as exc:
        error = (
            "That token is not one this server accepts."
            if isinstance(exc, AuthenticationRequiredError)
            else str(exc)
        )
        return inbox.render(
            request,
            "login.html",
            None,
            status=status_of(exc),
            error=error,
            next=_next(fields.get("next"), request),
        )
    response = RedirectResponse(_next(fields.get("next"), request), 303, headers=HEADERS)
    inbox.keep(request, response, auth.login_cookie(token))
    return response


async def logout(request: Request) -> Response:
    """Clear the login cookie (a form with the login's CSRF token)."""
    inbox: Inbox = request.app.state.inbox
    try:
        login = inbox.login(request)
        await inbox.form(request, login)
    except AuthenticationRequiredError:
        pass  # no login to end: clear whatever cookie there is
    except ArchmaxError as exc:
        return _failed(inbox, request, exc)
    target = _base(request) if inbox.open else f"{_base(request)}/login"
    response = RedirectResponse(target, 303, headers=HEADERS)
    inbox.forget(request, response)
    return response


# --- helpers -------------------------------------------------------------------------------


def _base(request: Request) -> str:
    """The inbox's path, under the prefix the app is mounted at."""
    return f"{request.scope.get('root_path', '')}/inbox"


def _same_origin(request: Request) -> None:
    """Refuse a form a browser says was sent from a page of another origin."""
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise CsrfRejectedError("the form was sent from another site")


def _cookie_path(request: Request) -> str:
    return str(request.scope.get("root_path", "")) or "/"


def _https(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


def _here(request: Request) -> str:
    query = request.url.query
    return f"{request.scope.get('root_path', '')}{request.url.path}" + (
        f"?{query}" if query else ""
    )


def _next(raw: str | None, request: Request) -> str:
    """Where to go after signing in: an inbox page of this server, nowhere else."""
    base = _base(request)
    if raw and raw.startswith(base) and "//" not in raw and "\\" not in raw:
        rest = raw[len(base) :]
        if not rest or rest[0] in "/?":
            return raw
    return base


def _session_url(request: Request, session_id: str) -> str:
    return f"{_base(request)}/session?{urlencode({'id': session_id})}"


def _seq(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or len(raw) > 12:
        raise MalformedRequestError("seq must be a number")
    return int(raw)


def _title(error: ArchmaxError) -> str:
    """What a refusal is, in a person's words."""
    if isinstance(error, SessionNotParkedError):
        return "Not decided: the session no longer awaits this decision."
    if isinstance(error, IdempotencyKeyReusedError):
        return "This form was already used: reload the session to act again."
    if isinstance(error, CsrfRejectedError):
        return "This form has expired: reload the page."
    status = status_of(error)
    if status == 404:
        return "Not found."
    if status == 503:
        return "Temporal or a worker is unavailable: try again shortly."
    if status >= 500:
        return "Something went wrong."
    return "Refused."


def _handoff(transcript: list[Message] | None, summary: SessionSummary) -> str | None:
    """The agent's whole handoff (its latest text), or the summary's first line of it."""
    for message in reversed(transcript or []):
        if message.role == "assistant" and message.note is None and (message.content or "").strip():
            return message.content
    return summary.handoff


def _variables(summary: SessionSummary) -> list[tuple[str, str | None, bool]]:
    """Each variable's name, its JSON (cut to :data:`VALUE_CHARS`; None when not read), and
    whether it is locked."""
    shown: list[tuple[str, str | None, bool]] = []
    for name in sorted(summary.variables):
        variable = summary.variables[name]
        text: str | None = None
        if summary.source == "session" or variable.value is not None:
            text = json.dumps(variable.value, indent=2, ensure_ascii=False, default=str)
            if len(text) > VALUE_CHARS:
                text = text[: VALUE_CHARS - 1] + "…"
        shown.append((name, text, variable.locked))
    return shown


def _ago(moment: datetime) -> str:
    seconds = (datetime.now(UTC) - moment).total_seconds()
    return f"{span(seconds)} ago" if seconds >= 0 else f"in {span(-seconds)}"


def _until(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    seconds = (moment - datetime.now(UTC)).total_seconds()
    return f"in {span(seconds)}" if seconds >= 0 else f"overdue by {span(-seconds)}"


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _shown(text: str | None, limit: int = 200) -> str:
    value = text or ""
    return value if len(value) <= limit else value[: limit - 1] + "…"


ROUTES = [
    Route("/inbox", inbox_list, methods=["GET"]),
    Route("/inbox/approvals", inbox_rows, methods=["GET"]),
    Route("/inbox/session", inbox_session, methods=["GET"]),
    Route("/inbox/decide", inbox_decide, methods=["POST"]),
    Route("/inbox/reply", inbox_reply, methods=["POST"]),
    Route("/inbox/login", login_page, methods=["GET"]),
    Route("/inbox/login", login_submit, methods=["POST"]),
    Route("/inbox/logout", logout, methods=["POST"]),
    Mount("/inbox/static", app=StaticFiles(directory=STATIC), name="inbox-static"),
]
"""The inbox's routes: pages, not API (so not in the OpenAPI document)."""

__all__ = ["ROUTES", "Inbox"]
