"""Team mode in the browser: a session cookie from a token, only your team's jobs, forged
cross-site and header-less writes refused, revocation honoured, sign out."""

from __future__ import annotations

import time

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, Route, expect
from sqlalchemy.orm import Session, sessionmaker

from archsearch.api.auth import TOKEN_CACHE_SECONDS
from archsearch.jobs.domain.accounts.service import revoke_token
from tests.browser.conftest import EVENT_TIMEOUT_MS, sign_in
from tests.browser.test_dashboard import FAST, submit
from tests.service.conftest import Accounts

pytestmark = [pytest.mark.service, pytest.mark.browser]


def job_of(api_url: str, token: str, job_id: str) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {token}"}
    return dict(httpx.get(f"{api_url}/v1/jobs/{job_id}", headers=headers).json())


def test_the_session_cookie_is_http_only_strict_and_signed(
    alice: Page, context: BrowserContext, api_url: str
) -> None:
    (cookie,) = [c for c in context.cookies() if c["name"] == "archsearch_session"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["secure"] is False  # plain http here; set over TLS
    assert "ast_" not in cookie["value"]  # the token's digest is signed in, not the token
    jar = {"Cookie": f"archsearch_session={cookie['value']}"}
    assert httpx.get(f"{api_url}/v1/jobs", headers=jar).status_code == 200
    altered = cookie["value"][:-3] + ("xyz" if not cookie["value"].endswith("xyz") else "abc")
    jar = {"Cookie": f"archsearch_session={altered}"}
    assert httpx.get(f"{api_url}/v1/jobs", headers=jar).status_code == 401


def test_a_bad_token_does_not_sign_in(context: BrowserContext, api_url: str) -> None:
    page = context.new_page()
    page.goto(f"{api_url}/signin")
    page.fill("#token", "ast_not-a-real-token")
    page.click("button[type=submit]")
    expect(page.get_by_test_id("signin-error")).to_be_visible()
    page.goto(f"{api_url}/queue")
    assert "/signin?next=/queue" in page.url


def test_only_your_team_and_another_teams_job_is_a_404(
    alice: Page, api_url: str, accounts: Accounts
) -> None:
    carols = submit(api_url, accounts.tokens["carol"], FAST, ("teamcheck",))
    bobs = submit(api_url, accounts.tokens["bob"], FAST, ("teamcheck",))
    alice.goto(f"{api_url}/?tag=teamcheck")
    expect(alice.locator(f'#jobs tr[data-id="{bobs}"]')).to_be_visible()  # same team
    expect(alice.locator(f'#jobs tr[data-id="{carols}"]')).to_have_count(0)
    response = alice.goto(f"{api_url}/jobs/{carols}")
    assert response is not None and response.status == 404
    expect(alice.get_by_test_id("not-found")).to_be_visible()


def test_forged_and_header_less_writes_are_refused(
    alice: Page, context: BrowserContext, api_url: str, accounts: Accounts
) -> None:
    token = accounts.tokens["alice"]
    job_id = submit(api_url, token, {**FAST, "training": {"epochs": 500}})
    # A page of another site posts a form to the API: the Strict cookie stays home.
    forged = f"""<form method=post action="{api_url}/v1/jobs/{job_id}/cancel"></form>
        <script>document.forms[0].submit()</script>"""
    context.route(
        "http://attacker.test/**",
        lambda route: route.fulfill(content_type="text/html", body=forged),
    )
    attacker = context.new_page()
    with attacker.expect_navigation(url=f"{api_url}/v1/jobs/{job_id}/cancel") as navigation:
        attacker.goto("http://attacker.test/")
    response = navigation.value
    assert response is not None and response.status == 401
    # Even with the cookie (same browser, no CSRF header, as a plugin or a tool could send):
    refused = alice.request.post(f"{api_url}/v1/jobs/{job_id}/cancel")
    assert refused.status == 403 and "X-CSRF-Token" in refused.text()
    job = job_of(api_url, token, job_id)
    assert job["cancel_requested"] is False and job["status"] in ("queued", "running")
    # The page's own request carries the token and is accepted.
    alice.goto(f"{api_url}/jobs/{job_id}")
    alice.click("#cancel")
    expect(alice.locator("#status")).to_have_text("cancelled", timeout=EVENT_TIMEOUT_MS)


def test_the_cancels_late_answer_leaves_an_ended_job_ended(
    alice: Page, api_url: str, accounts: Accounts
) -> None:
    """The cancel's answer (running, cancel requested) held until the stream has told the
    page the job ended: the page keeps showing it cancelled."""
    token = accounts.tokens["alice"]
    job_id = submit(api_url, token, {**FAST, "training": {"epochs": 500}})
    alice.goto(f"{api_url}/jobs/{job_id}")
    expect(alice.locator("#status")).to_have_text("running", timeout=EVENT_TIMEOUT_MS)

    def answer_after_the_end(route: Route) -> None:
        answer = route.fetch()  # the cancel reaches the API now; its answer waits
        deadline = time.monotonic() + EVENT_TIMEOUT_MS / 1000
        while job_of(api_url, token, job_id)["status"] != "cancelled":
            assert time.monotonic() < deadline, "the job was not cancelled"
            time.sleep(0.1)
        time.sleep(2.0)  # the stream's terminal event reaches the page (it is sent at once)
        route.fulfill(response=answer)

    alice.route(f"**/v1/jobs/{job_id}/cancel", answer_after_the_end)
    with alice.expect_response(f"**/v1/jobs/{job_id}/cancel", timeout=EVENT_TIMEOUT_MS):
        alice.click("#cancel")
    alice.wait_for_timeout(1000)  # the page handles the late answer
    assert alice.locator("#status").text_content() == "cancelled"


def test_a_revoked_token_ends_the_session(
    context: BrowserContext,
    api_url: str,
    accounts: Accounts,
    sessions: sessionmaker[Session],
) -> None:
    page = context.new_page()
    sign_in(page, api_url, accounts.tokens["dave"])
    expect(page.get_by_test_id("user")).to_have_text("dave")
    with sessions.begin() as session:
        revoke_token(session, accounts.tokens["dave"][:12])
    # Pages and API routes share the process's cache of verified principals, so a
    # revocation ends the session within its lifetime, as it does for a bearer token.
    deadline = time.monotonic() + TOKEN_CACHE_SECONDS + 5
    while "/signin" not in page.url and time.monotonic() < deadline:
        page.goto(f"{api_url}/queue")
    assert "/signin" in page.url


def test_sign_out(alice: Page, api_url: str) -> None:
    expect(alice.get_by_test_id("user")).to_have_text("alice")
    alice.get_by_role("button", name="Sign out").click()
    alice.wait_for_url(f"{api_url}/signin")
    alice.goto(f"{api_url}/")
    assert "/signin" in alice.url
