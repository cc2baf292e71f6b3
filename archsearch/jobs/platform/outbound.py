"""Outbound webhook requests: where they may go, how they are signed, and their bounds.

A target is checked when a webhook is created and again before every request (a name may
resolve elsewhere later): in team mode loopback, private, link-local, multicast and
reserved addresses are refused unless `webhook_allow_private_targets` is set; embedded mode
(one local user) allows loopback. Requests follow no redirect, time out after
`webhook_timeout_seconds`, and read at most `RESPONSE_PEEK_BYTES` of the answer.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from archsearch.core.errors import UserError
from archsearch.jobs.platform.settings import Settings

RESPONSE_PEEK_BYTES = 1024
USER_AGENT = "archsearch-webhooks/1"


class UnsafeTarget(UserError):
    """A webhook URL this server will not call; the message says why."""

    field = "url"


@dataclass(frozen=True)
class TargetPolicy:
    allow_loopback: bool
    allow_private: bool

    @classmethod
    def of(cls, settings: Settings) -> TargetPolicy:
        allowed = settings.webhook_allow_private_targets
        return cls(allow_loopback=allowed or not settings.tokens_required, allow_private=allowed)


def check_target(url: str, policy: TargetPolicy) -> None:
    """Raise `UnsafeTarget` unless `url` is http(s) to addresses the policy allows."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeTarget(f"webhook URL {url!r} must be http:// or https:// with a host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        found = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except (OSError, ValueError) as exc:
        raise UnsafeTarget(f"webhook host {parts.hostname!r} cannot be resolved ({exc})") from None
    for *_, sockaddr in found:
        _check_address(ipaddress.ip_address(sockaddr[0]), parts.hostname, policy)


def _check_address(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, host: str, policy: TargetPolicy
) -> None:
    if address.is_loopback:
        if not policy.allow_loopback:
            raise UnsafeTarget(
                f"webhook host {host!r} is a loopback address ({address}); an admin may allow "
                "it with ARCHSEARCH_WEBHOOK_ALLOW_PRIVATE_TARGETS"
            )
        return
    internal = (
        address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )
    if internal and not policy.allow_private:
        raise UnsafeTarget(
            f"webhook host {host!r} resolves to an internal address ({address}); an admin "
            "may allow it with ARCHSEARCH_WEBHOOK_ALLOW_PRIVATE_TARGETS"
        )


def signature(secret: str, body: bytes) -> str:
    """The `X-Archsearch-Signature` value: `sha256=` and the HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    error: str | None
    duration_ms: int

    @property
    def ok(self) -> bool:
        return self.error is None and self.status_code is not None and 200 <= self.status_code < 300


def post(
    client: httpx.Client, url: str, body: bytes, headers: dict[str, str], policy: TargetPolicy
) -> Outcome:
    """One bounded POST; a redirect, a refused target or a non-2xx answer is a failure."""
    started = time.monotonic()
    try:
        check_target(url, policy)
        with client.stream("POST", url, content=body, headers=headers) as response:
            peek = _peek(response)
    except (UnsafeTarget, httpx.HTTPError) as exc:
        return Outcome(None, f"{type(exc).__name__}: {exc}"[:500], _ms(started))
    error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}: {peek}"
    return Outcome(response.status_code, error, _ms(started))


def _peek(response: httpx.Response) -> str:
    """The start of the answer, for the delivery log; the rest is never read."""
    data = b""
    for chunk in response.iter_raw():
        data += chunk
        if len(data) >= RESPONSE_PEEK_BYTES:
            break
    return data[:RESPONSE_PEEK_BYTES].decode("utf-8", errors="replace")


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def new_client(settings: Settings) -> httpx.Client:
    return httpx.Client(
        timeout=settings.webhook_timeout_seconds,
        follow_redirects=False,
        headers={"User-Agent": USER_AGENT},
        trust_env=False,  # never through a proxy of the environment, to where it cannot see
    )
