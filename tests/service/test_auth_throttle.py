"""Failed authentication is rate-limited per client address and per token prefix: past
the limit (5 a minute here) a wrong token answers 429 with Retry-After, on the API and on
the dashboard's sign-in, while a correct token from another address is served as before.

The API trusts X-Forwarded-For from loopback (its FORWARDED_ALLOW_IPS default), so the test
plays several client addresses from one machine."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service import procs

pytestmark = pytest.mark.service

LIMIT = 5


@pytest.fixture(scope="module")
def throttled_api(service_env: dict[str, str], log_dir: Path) -> Iterator[str]:
    port = procs.free_port()
    env = {**service_env, "ARCHSEARCH_AUTH_FAILURES_PER_MINUTE": str(LIMIT)}
    proc = procs.start("api-throttled", ["api", "--port", str(port)], env, log_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        procs.wait_http(f"{url}/healthz", proc)
        yield url
    finally:
        proc.stop()


def _wrong_token(prefix: str | None = None) -> str:
    return (prefix or f"ast_{secrets.token_hex(4)}") + secrets.token_hex(16)


def _as(address: str, token: str) -> dict[str, str]:
    return {"X-Forwarded-For": address, "Authorization": f"Bearer {token}"}


def test_wrong_tokens_from_one_address_are_throttled_not_the_right_one(
    throttled_api: str, token: str
) -> None:
    statuses = [
        httpx.get(f"{throttled_api}/v1/jobs", headers=_as("203.0.113.9", _wrong_token()))
        for _ in range(3 * LIMIT)
    ]
    print("wrong tokens from one address:", Counter(r.status_code for r in statuses))
    assert [r.status_code for r in statuses] == [401] * LIMIT + [429] * (2 * LIMIT)
    refused = statuses[-1]
    assert refused.json()["error"] == "too_many_attempts"
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    # The right token from the same address is refused too while the address cools down,
    # but from any other address it is served at once.
    good = httpx.get(f"{throttled_api}/v1/jobs", headers=_as("198.51.100.7", token))
    assert good.status_code == 200


def test_one_token_prefix_from_many_addresses_is_throttled(throttled_api: str) -> None:
    prefix = f"ast_{secrets.token_hex(4)}"
    statuses = [
        httpx.get(
            f"{throttled_api}/v1/jobs", headers=_as(f"192.0.2.{i}", _wrong_token(prefix))
        ).status_code
        for i in range(2 * LIMIT)
    ]
    print("one prefix from many addresses:", Counter(statuses))
    assert statuses == [401] * LIMIT + [429] * LIMIT


def test_sign_in_is_throttled_too(throttled_api: str, token: str) -> None:
    def sign_in(address: str, candidate: str) -> httpx.Response:
        form = {"token": candidate}
        return httpx.post(
            f"{throttled_api}/signin", data=form, headers={"X-Forwarded-For": address}
        )

    statuses = [sign_in("203.0.113.77", _wrong_token()).status_code for _ in range(2 * LIMIT)]
    print("wrong sign-ins from one address:", Counter(statuses))
    assert statuses == [401] * LIMIT + [429] * LIMIT
    assert "retry-after" in sign_in("203.0.113.77", _wrong_token()).headers
    assert sign_in("198.51.100.8", token).status_code == 303
