"""``create_app`` (the ASGI app, to run or to mount) and ``serve`` (``archmax serve``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException

from archmax_temporal.activities.logs import get_logger
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.http import inbox
from archmax_temporal.client.http.agents import AgentFactory, RootAgents
from archmax_temporal.client.http.app import ROUTES, HttpService, _http_error
from archmax_temporal.client.http.settings import ServeSettings

log = get_logger("archmax.http")


def create_app(
    agent_factory: AgentFactory | None = None,
    *,
    config: RuntimeConfig | None = None,
    settings: ServeSettings | None = None,
    worker: str | None = None,
) -> Starlette:
    """The HTTP API as an ASGI app, with the inbox's pages at ``/inbox``.

    ``agent_factory`` gives the agent of a workflow slug (``None``: one for session routes);
    by default :class:`RootAgents` serves every workflow of ``config``'s authoring root over
    one runtime (``worker`` as in ``create_agent``). ``settings`` default to the environment
    (:meth:`ServeSettings.from_env`).

    Run standalone, the app's lifespan closes what it opened. Mounted in a host's own app
    (``Mount("/archmax", app=create_app(...))``), whose lifespan Starlette does not run for a
    mounted app, call ``await app.state.archmax.aclose()`` from the host's own shutdown.
    """
    resolved = settings or ServeSettings.from_env()
    agents = agent_factory or RootAgents(
        config or RuntimeConfig.from_env(), worker=worker, session_path=resolved.session_path
    )
    service = HttpService(agents, resolved)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            await service.agent(None)  # connect (and start a worker) before the first request
        except Exception as exc:  # Temporal down: serve anyway, answering 503 until it is up
            log.warning("temporal not reachable yet", error=str(exc))
        try:
            yield
        finally:
            await service.aclose()

    app = Starlette(
        routes=[*ROUTES, *inbox.ROUTES],
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.state.archmax = service
    app.state.inbox = inbox.Inbox(service)
    return app


async def serve(
    config: RuntimeConfig,
    settings: ServeSettings,
    *,
    worker: str | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Run the API under uvicorn until SIGINT/SIGTERM (``archmax serve``), then shut down
    gracefully and return (exit 0, as ``archmax worker`` does)."""
    import uvicorn

    from archmax_temporal.client.http.protocol import uvicorn_config

    class Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            """uvicorn's handlers, without re-raising the signal after the graceful shutdown
            (which would end the process by the signal instead of exiting 0)."""
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    settings.check_exposure()
    app = create_app(config=config, settings=settings, worker=worker)
    server = Server(
        uvicorn_config(
            app,
            host=settings.host,
            port=settings.port,
            log_level="warning",
            proxy_headers=False,
            timeout_graceful_shutdown=5,
        )
    )
    if announce is not None:
        auth = "bearer tokens" if settings.auth_enabled else "no auth (loopback only)"
        announce(f"serving  http://{settings.host}:{settings.port}  ·  {auth}")
        announce(f"inbox    http://{settings.host}:{settings.port}/inbox")
    await server.serve()
