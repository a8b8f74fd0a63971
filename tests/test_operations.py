"""Operating archmax: reading a session with no worker running, the log stream in JSON mode,
stdout carrying the program's output alone, a host's stderr after a server outage."""

from __future__ import annotations

import httpx

from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.http import ServeSettings, create_app
from tests.http_harness import serving
from tests.test_cli import Cli, _park, cli

__all__ = ["cli"]  # the fixture, shared with tests/test_cli.py


class TestReadingWithNoWorker:
    async def test_get_session_answers_from_visibility_when_no_worker_polls(self, cli: Cli) -> None:
        """``GET /v1/sessions/{id}`` reads as the listing and ``archmax sessions <id>`` do:
        with no worker polling, what visibility knows (200, saying no worker polls), not a
        503."""
        assert _park(cli, "ops-read-1").code == 0
        assert cli("dev", "stop").code == 0  # the only worker of the queue is gone
        config = RuntimeConfig.from_env(cli.env)
        app = create_app(config=config, settings=ServeSettings(), worker="external")
        async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=60) as http:
            shown = await http.get("/v1/sessions/ops-read-1")
            listed = await http.get("/v1/sessions")
        assert shown.status_code == 200, shown.text
        summary = shown.json()
        assert (summary["sessionId"], summary["status"]) == ("ops-read-1", "awaiting_input")
        assert summary["source"] == "visibility"
        assert "no worker is polling" in summary["waitingOn"]
        [same] = [s for s in listed.json()["sessions"] if s["sessionId"] == "ops-read-1"]
        assert (same["status"], same["state"]) == (summary["status"], summary["state"])
