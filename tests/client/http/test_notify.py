"""Signed outbound notifications: :mod:`archmax_temporal.client.http.notify`."""

from __future__ import annotations

import httpx
from standardwebhooks import Webhook

from archmax_temporal.client.http.notify import Notifier, notification_id
from archmax_temporal.workflows.models import Outcome

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"""The Standard Webhooks reference libraries' test secret (24 bytes)."""


class TestNotifier:
    async def test_one_notification_per_firing_however_often_it_settles(self) -> None:
        """The same firing (session and update id) settling three times is posted once; its
        webhook-id is derived, free of '.', and verifies with the reference library."""
        posted: list[httpx.Request] = []

        def answer(request: httpx.Request) -> httpx.Response:
            posted.append(request)
            return httpx.Response(200)

        notifier = Notifier(
            "http://receiver.test/hook", SECRET, transport=httpx.MockTransport(answer)
        )
        outcome = Outcome(
            session_id="s.1", kind="completed", disposition="turn", status="completed"
        )
        for _ in range(3):
            notifier.outcome(outcome, key="evt.7.abc")
        notifier.outcome(outcome, key="evt.8.abc")
        await notifier.aclose()
        ids = [request.headers["webhook-id"] for request in posted]
        assert len(posted) == 2 and len(set(ids)) == 2
        assert ids[0] == notification_id("s.1", "evt.7.abc") and "." not in ids[0]
        for request in posted:
            Webhook(SECRET).verify(request.content, dict(request.headers))
