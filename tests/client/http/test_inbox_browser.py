"""The inbox in a real browser: Playwright drives Debian's ``chromium`` against ``archmax
serve``'s app under uvicorn on 127.0.0.1, over the real dev server, with a scripted model.

A person signs in with a bearer token, sees the sessions awaiting a decision (new ones appear
without a reload), opens one (transcript, variables, handoff), replies, decides along an edge
with a comment, and sees the outcome; a refused decision (a stale form, an edge that is not
the state's, a session another person already decided) is shown as an error and writes
nothing.

The browser is ``/usr/bin/chromium`` (``ARCHMAX_CHROMIUM`` names another). When it is missing
these tests fail, saying so; ``ARCHMAX_SKIP_BROWSER_TESTS=1`` skips them instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect
from temporalio.client import Client

from archmax_temporal.client.http import inbox as inbox_pages
from archmax_temporal.client.http.auth import LOGIN_COOKIE
from tests.support.agents import Scripted
from tests.support.http_harness import Api, ApiFor, http_api
from tests.support.inbox_harness import (
    APPROVED,
    HANDOFF,
    PLAYBOOK,
    REFUND,
    SETTINGS,
    STILL_WITH_FINANCE,
    TOKEN,
    accepted_updates,
    park,
    ticket,
    two_workflows,
)

CHROMIUM = Path(os.environ.get("ARCHMAX_CHROMIUM") or "/usr/bin/chromium")
SKIP = "ARCHMAX_SKIP_BROWSER_TESTS"

PAGE_TIMEOUT_MS = 30_000
"""How long an expectation waits: a decision runs the session's turn before the page answers,
on two shared cores."""

POLL_MS = 300
"""The list's refresh interval in these tests (the page's own is a few seconds)."""

expect.set_options(timeout=PAGE_TIMEOUT_MS)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    """One headless chromium for the module; each person gets a context of their own."""
    if not CHROMIUM.is_file():
        message = (
            f"the inbox's browser tests need chromium at {CHROMIUM} (apt-get install chromium, "
            f"or set ARCHMAX_CHROMIUM); set {SKIP}=1 to skip them"
        )
        if os.environ.get(SKIP) == "1":
            pytest.skip(message)
        pytest.fail(message)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
def fast_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbox_pages, "POLL_MS", POLL_MS)


@pytest.fixture
def refund_api(client: Client, task_queue: str, scripted: Scripted, tmp_path: Path) -> ApiFor:
    """Opens the HTTP API over the refund and support workflows (the scripted playbook),
    under the inbox's settings."""

    def open_api() -> AbstractAsyncContextManager[Api]:
        return http_api(
            client,
            task_queue,
            two_workflows(tmp_path),
            REFUND,
            scripted(PLAYBOOK),
            store=tmp_path / "s",
            settings=SETTINGS,
        )

    return open_api


@pytest.fixture
async def person(browser: Browser) -> AsyncIterator[BrowserContext]:
    """A person: a browser context of their own (their own cookies)."""
    context = await browser.new_context()
    try:
        yield context
    finally:
        await context.close()


@pytest.fixture
async def second_person(browser: Browser) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context()
    try:
        yield context
    finally:
        await context.close()


async def _sign_in(context: BrowserContext, url: str) -> Page:
    """Open ``url``, be sent to the login, sign in with the token, and land back on it."""
    page = await context.new_page()
    await page.goto(url)
    await expect(page).to_have_url(re.compile(r"/inbox/login\?next="))
    await page.get_by_label("Bearer token").fill(TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(url)
    return page


class TestSignIn:
    async def test_no_page_without_a_login_and_logout_ends_it(
        self,
        refund_api: ApiFor,
        person: BrowserContext,
    ) -> None:
        """Every page sends to the login first (a wrong token is told so); the login cookie
        is HttpOnly, SameSite=Strict and not the token; it reads the API from the page; logging
        out ends it."""
        session_id = ticket()
        async with refund_api() as api:
            await park(api, session_id)
            page = await person.new_page()
            await page.goto(f"{api.base}/inbox/session?id={session_id}")
            await expect(page).to_have_url(re.compile(r"/inbox/login\?next="))
            await page.get_by_label("Bearer token").fill("not-the-token")
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.get_by_role("alert")).to_have_text(
                "That token is not one this server accepts."
            )
            await page.get_by_label("Bearer token").fill(TOKEN)
            await page.get_by_role("button", name="Sign in").click()
            await expect(page).to_have_url(f"{api.base}/inbox/session?id={session_id}")
            await expect(page.locator("#handoff")).to_have_text(HANDOFF)
            (cookie,) = [c for c in await person.cookies() if c["name"] == LOGIN_COOKIE]
            script_sees = await page.evaluate("document.cookie")
            api_status = await page.evaluate("fetch('/v1/approvals').then(r => r.status)")
            await page.get_by_role("button", name="Log out").click()
            await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
            await page.goto(f"{api.base}/inbox")
            await expect(page).to_have_url(re.compile(r"/inbox/login\?next="))
            signed_out = await page.evaluate("fetch('/v1/approvals').then(r => r.status)")
        assert cookie.get("httpOnly") is True and cookie.get("sameSite") == "Strict"
        assert TOKEN not in cookie["value"]
        assert script_sees == ""
        assert api_status == 200
        assert signed_out == 401
        assert LOGIN_COOKIE not in {c["name"] for c in await person.cookies()}


class TestDeciding:
    async def test_list_live_open_reply_decide_and_see_the_outcome(
        self,
        refund_api: ApiFor,
        person: BrowserContext,
    ) -> None:
        """The list shows a parked session; another one parking appears without a reload;
        the session page shows the transcript, variables and handoff; a reply is answered and
        the session keeps waiting; a decision with a comment completes it, the comment in its
        trail; the list then drops it."""
        first, second = ticket(), ticket()
        async with refund_api() as api:
            await park(api, first)
            page = await _sign_in(person, f"{api.base}/inbox")
            row = page.locator(f'tr[data-session="{first}"]')
            await expect(row).to_contain_text(HANDOFF)
            await expect(row).to_contain_text("refund-closed")
            await expect(row).to_contain_text("Finance review")
            await page.evaluate("window.stayed = true")
            await park(api, second)
            await expect(page.locator(f'tr[data-session="{second}"]')).to_be_visible()
            stayed = await page.evaluate("window.stayed === true")  # no reload happened

            await row.get_by_role("link", name=first).click()
            await expect(page.get_by_role("heading", name=f"Session {first}")).to_be_visible()
            await expect(page.locator("#handoff")).to_have_text(HANDOFF)
            transcript = page.locator("ol.transcript")
            await expect(transcript).to_contain_text("I'd like a refund for order ORD-1001")
            await expect(page.locator("table.variables")).to_contain_text("ticket_id")
            await expect(page.locator("table.variables")).to_contain_text(first)

            await page.get_by_label("A message to the session").fill("Any news?")
            await page.get_by_role("button", name="Send reply").click()
            await expect(page.get_by_role("heading", name="Reply sent")).to_be_visible()
            await expect(page.locator("#outcome-status")).to_have_text("awaiting_decision")
            await expect(page.locator("#outcome-reply")).to_have_text(STILL_WITH_FINANCE)

            await page.get_by_role("link", name="Open the session").click()
            await page.get_by_label("Comment (optional)").fill("Verified against the policy.")
            await page.get_by_role("button", name="refund-closed (approve)").click()
            await expect(page.get_by_role("heading", name="Decided: refund-closed")).to_be_visible()
            await expect(page.locator("#outcome-status")).to_have_text("completed")
            await expect(page.locator("#outcome-reply")).to_have_text(APPROVED)

            await page.get_by_role("link", name="Back to the inbox").click()
            await expect(page.locator(f'tr[data-session="{second}"]')).to_be_visible()
            await expect(page.locator(f'tr[data-session="{first}"]')).to_have_count(0)
            view = await api.agent.sessions.view(first)
        assert stayed
        human = [step for step in view.trail if step.kind == "human"]
        assert [(s.to, s.reason) for s in human] == [
            ("refund-closed", "Verified against the policy.")
        ]


class TestRefusals:
    async def test_a_stale_form_and_a_second_person_see_it_already_decided(
        self,
        refund_api: ApiFor,
        client: Client,
        person: BrowserContext,
        second_person: BrowserContext,
    ) -> None:
        """Two people open one session. The first sends it back for refinement (it parks
        again); the second's decision from the stale page is refused, shown as an error, and
        writes nothing. The first approves it; the second, deciding again, sees it already
        decided."""
        session_id = ticket()
        async with refund_api() as api:
            await park(api, session_id)
            url = f"{api.base}/inbox/session?id={session_id}"
            alice = await _sign_in(person, url)
            bob = await _sign_in(second_person, url)

            await alice.get_by_role("button", name="refund-request (refine)").click()
            await expect(
                alice.get_by_role("heading", name="Decided: refund-request")
            ).to_be_visible()
            await expect(alice.locator("#outcome-status")).to_have_text("awaiting_decision")
            updates = await accepted_updates(client, session_id)

            await bob.get_by_role("button", name="refund-closed (approve)").click()
            refusal = bob.get_by_role("alert")
            await expect(refusal).to_contain_text("Not decided")
            await expect(refusal).to_contain_text("already decided")
            await expect(refusal).to_have_attribute("data-kind", "SessionNotParkedError")
            await expect(bob.locator("#status")).to_have_text("awaiting_decision")
            stale_wrote = await accepted_updates(client, session_id) - updates

            await alice.get_by_role("link", name="Open the session").click()
            await alice.get_by_role("button", name="refund-closed (approve)").click()
            await expect(alice.locator("#outcome-status")).to_have_text("completed")
            updates = await accepted_updates(client, session_id)

            await bob.get_by_role("button", name="refund-request (refine)").click()
            await expect(bob.get_by_role("alert")).to_contain_text("Not decided")
            await expect(bob.locator("#status")).to_have_text("completed")
            await expect(bob.get_by_role("button", name="refund-request (refine)")).to_have_count(0)
            late_wrote = await accepted_updates(client, session_id) - updates
        assert stale_wrote == 0
        assert late_wrote == 0

    async def test_an_edge_the_state_lacks_is_refused_and_transcripts_are_text(
        self,
        refund_api: ApiFor,
        client: Client,
        person: BrowserContext,
    ) -> None:
        """A form altered to name an edge the state lacks is refused by the session's
        validator, shown as an error, and writes nothing; the page it answers with keeps the
        comment the person typed; markup in a customer's message or a kept comment is shown as
        text and runs nothing."""
        session_id = ticket()
        markup = '<img src=x onerror="window.pwned=1"><script>window.pwned=1</script>'
        async with refund_api() as api:
            await park(api, session_id, message=f"A refund for ORD-1001, please. {markup}")
            page = await _sign_in(person, f"{api.base}/inbox/session?id={session_id}")
            await expect(page.locator("ol.transcript")).to_contain_text(markup)
            pwned = await page.evaluate("window.pwned === undefined")
            updates = await accepted_updates(client, session_id)
            edge = page.get_by_role("button", name="refund-closed (approve)")
            await edge.evaluate("button => { button.value = 'nowhere'; }")
            await page.locator("#comment").fill(f"Approved. {markup}")
            await edge.click()
            refusal = page.get_by_role("alert")
            await expect(refusal).to_have_attribute("data-kind", "InvalidDecisionTargetError")
            await expect(refusal).to_contain_text("'nowhere' is not a transition")
            await expect(page.locator("#status")).to_have_text("awaiting_decision")
            await expect(page.locator("#comment")).to_have_value(f"Approved. {markup}")
            pwned = pwned and await page.evaluate("window.pwned === undefined")
            wrote = await accepted_updates(client, session_id) - updates
        assert pwned
        assert wrote == 0
