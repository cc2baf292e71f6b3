"""Signing out of the dashboard ends the session on the server: the cookie, replayed after
sign-out (as a stolen copy would be), answers 401 on the API and sends the pages back to the
sign-in form, while another session of the same token stays signed in."""

from __future__ import annotations

import re

import httpx
import pytest

pytestmark = pytest.mark.service

COOKIE = "archsearch_session"


def _sign_in(api_url: str, token: str) -> str:
    answer = httpx.post(f"{api_url}/signin", data={"token": token}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return answer.cookies[COOKIE]


def _csrf(api_url: str, cookie: str) -> str:
    page = httpx.get(f"{api_url}/", cookies={COOKIE: cookie}, follow_redirects=False)
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def test_a_signed_out_cookie_replayed_is_refused(api_url: str, token: str) -> None:
    cookie, other = _sign_in(api_url, token), _sign_in(api_url, token)
    jobs = httpx.get(f"{api_url}/v1/jobs", cookies={COOKIE: cookie})
    assert jobs.status_code == 200, jobs.text  # cached as a verified session from here on

    form = {"csrf": _csrf(api_url, cookie)}
    out = httpx.post(
        f"{api_url}/signout", data=form, cookies={COOKIE: cookie}, follow_redirects=False
    )
    assert out.status_code == 303 and out.headers["location"] == "/signin"

    replayed = httpx.get(f"{api_url}/v1/jobs", cookies={COOKIE: cookie})
    assert replayed.status_code == 401, replayed.text
    assert "signed out" in replayed.json()["detail"]
    page = httpx.get(f"{api_url}/", cookies={COOKIE: cookie}, follow_redirects=False)
    assert page.status_code in (302, 303, 307) and "/signin" in page.headers["location"]
    # The same token's other session is not signed out.
    assert httpx.get(f"{api_url}/v1/jobs", cookies={COOKIE: other}).status_code == 200


def test_sign_out_without_the_csrf_token_ends_nothing(api_url: str, token: str) -> None:
    cookie = _sign_in(api_url, token)
    out = httpx.post(
        f"{api_url}/signout",
        data={"csrf": "forged"},
        cookies={COOKIE: cookie},
        follow_redirects=False,
    )
    assert out.status_code == 403, out.text
    assert httpx.get(f"{api_url}/v1/jobs", cookies={COOKIE: cookie}).status_code == 200
