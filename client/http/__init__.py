"""``archmax serve``: the HTTP way in for external systems, and the live way out.

::

    from archmax_temporal.client.http import create_app

    app = create_app()                      # every workflow of ARCHMAX_ROOT, auth from the env
    # or mounted in your own Starlette/FastAPI app:
    Mount("/archmax", app=create_app(lambda slug: create_agent(slug, root="...")))

Routes, errors and the wire format: :mod:`.app` and ``GET /openapi.json``. Importing this
package loads Starlette; importing the host API never does.
"""

from archmax_temporal.client.http.agents import AgentFactory, RootAgents
from archmax_temporal.client.http.auth import new_secret, signed_headers, verify_signature
from archmax_temporal.client.http.problems import STATUS
from archmax_temporal.client.http.server import create_app, serve
from archmax_temporal.client.http.settings import ServeSettings

__all__ = [
    "STATUS",
    "AgentFactory",
    "RootAgents",
    "ServeSettings",
    "create_app",
    "new_secret",
    "serve",
    "signed_headers",
    "verify_signature",
]
