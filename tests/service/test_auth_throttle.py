"""Failed authentication is rate-limited per client address and per token prefix, and a
correct token is never refused: past the limit (5 a minute here) a wrong token answers 429
with Retry-After, on the API and on the dashboard's sign-in, while a correct token is served
from any address, whatever failures that address or its prefix has seen.

The API trusts X-Forwarded-For from loopback (its FORWARDED_ALLOW_IPS default), so the test
plays several client addresses from one machine; a second API trusts no proxy there, to play
a proxy it does not know. Each token below is used for the first time in its API process, so
it is checked against the database, not served from the cache of tokens verified in the last
seconds."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from archsearch.api.throttle import PREFIX_CHARACTERS
from tests.service import procs
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service

LIMIT = 5


def _api(name: str, env: dict[str, str], log_dir: Path) -> Iterator[str]:
    port = procs.free_port()
    env = {**env, "ARCHSEARCH_AUTH_FAILURES_PER_MINUTE": str(LIMIT)}
    proc = procs.start(name, ["api", "--port", str(port)], env, log_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        procs.wait_http(f"{url}/healthz", proc)
        yield url
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def throttled_api(service_env: dict[str, str], log_dir: Path) -> Iterator[str]:
    yield from _api("api-throttled", service_env, log_dir)


@pytest.fixture(scope="module")
def untrusting_api(service_env: dict[str, str], log_dir: Path) -> Iterator[str]:
    # Only a proxy at a documentation address is trusted: loopback, where the test calls
    # from, is a proxy this API does not know.
    env = {**service_env, "ARCHSEARCH_FORWARDED_ALLOW_IPS": "192.0.2.1"}
    yield from _api("api-untrusting", env, log_dir)


def _wrong_token(prefix: str | None = None) -> str:
    return (prefix or f"ast_{secrets.token_hex(4)}") + secrets.token_hex(16)


def _as(address: str, token: str) -> dict[str, str]:
    return {"X-Forwarded-For": address, "Authorization": f"Bearer {token}"}


def _statuses(url: str, headers: list[dict[str, str]]) -> list[int]:
    return [httpx.get(f"{url}/v1/jobs", headers=each).status_code for each in headers]


def test_wrong_tokens_from_one_address_are_throttled_not_the_right_one(
    throttled_api: str, accounts: Accounts
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
    # The right token from the same address is served at once.
    assert _statuses(throttled_api, [_as("203.0.113.9", accounts.tokens["alice"])]) == [200]


def test_a_nat_of_many_users_keeps_its_valid_tokens(throttled_api: str, accounts: Accounts) -> None:
    """One user behind a NAT sends 20 wrong tokens; the others, at the same address, with
    tokens not used in the last seconds, are served; a further wrong token is still 429."""
    nat = "198.51.100.44"
    wrong = _statuses(throttled_api, [_as(nat, _wrong_token()) for _ in range(20)])
    assert wrong == [401] * LIMIT + [429] * (20 - LIMIT)
    users = [accounts.tokens["bob"], accounts.tokens["dave"]]
    assert _statuses(throttled_api, [_as(nat, token) for token in users]) == [200, 200]
    assert _statuses(throttled_api, [_as(nat, _wrong_token())]) == [429]


def test_one_token_prefix_from_many_addresses_is_throttled(throttled_api: str) -> None:
    prefix = f"ast_{secrets.token_hex(4)}"
    statuses = _statuses(
        throttled_api, [_as(f"192.0.2.{i}", _wrong_token(prefix)) for i in range(2 * LIMIT)]
    )
    print("one prefix from many addresses:", Counter(statuses))
    assert statuses == [401] * LIMIT + [429] * LIMIT


def test_a_targeted_prefix_attack_never_locks_out_the_real_token(
    throttled_api: str, accounts: Accounts
) -> None:
    """20 wrong tokens sharing carol's prefix, from other addresses: the attacker is
    throttled, carol's own token (never used in this process) is served."""
    real = accounts.tokens["carol"]
    prefix = real[:PREFIX_CHARACTERS]
    attack = _statuses(
        throttled_api, [_as(f"192.0.2.{100 + i}", _wrong_token(prefix)) for i in range(20)]
    )
    assert attack == [401] * LIMIT + [429] * (20 - LIMIT)
    assert _statuses(throttled_api, [_as("198.51.100.80", real)]) == [200]
    assert _statuses(throttled_api, [_as("192.0.2.200", _wrong_token(prefix))]) == [429]


def test_behind_an_untrusted_proxy_failures_lock_no_valid_token_out(
    untrusting_api: str, accounts: Accounts
) -> None:
    """Through a proxy the API does not trust, every client has the proxy's address (their
    X-Forwarded-For, which anyone could write, is ignored, so a guesser cannot spread its
    failures over made-up addresses): past the limit wrong tokens get 429, while valid
    tokens of the other users behind it are served."""
    clients = [_as(f"203.0.113.{i}", _wrong_token()) for i in range(4 * LIMIT)]
    assert _statuses(untrusting_api, clients) == [401] * LIMIT + [429] * (3 * LIMIT)
    users = [accounts.tokens["alice"], accounts.tokens["carol"], accounts.admin_token]
    assert _statuses(untrusting_api, [_as("203.0.113.99", t) for t in users]) == [200] * 3
    assert _statuses(untrusting_api, [{"Authorization": f"Bearer {users[1]}"}]) == [200]


def test_sign_in_is_throttled_too(throttled_api: str, accounts: Accounts) -> None:
    def sign_in(address: str, candidate: str) -> httpx.Response:
        form = {"token": candidate}
        return httpx.post(
            f"{throttled_api}/signin", data=form, headers={"X-Forwarded-For": address}
        )

    statuses = [sign_in("203.0.113.77", _wrong_token()).status_code for _ in range(2 * LIMIT)]
    print("wrong sign-ins from one address:", Counter(statuses))
    assert statuses == [401] * LIMIT + [429] * LIMIT
    assert "retry-after" in sign_in("203.0.113.77", _wrong_token()).headers
    # A correct token signs in, from that very address as from any other.
    assert sign_in("203.0.113.77", accounts.tokens["alice"]).status_code == 303
    assert sign_in("198.51.100.8", accounts.tokens["bob"]).status_code == 303
