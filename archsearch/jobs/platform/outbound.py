"""Outbound webhook requests: where they may go, how they are signed, and their bounds.

A target is checked when a webhook is created and again before every request (a name may
resolve elsewhere later). In team mode only globally routable addresses are called, in
every spelling of one: an IPv4 address written as IPv6 (`::ffff:a.b.c.d`), inside 6to4
(`2002::/16`) or NAT64 (`64:ff9b::/96`), Teredo, the shared address space `100.64.0.0/10`
(where some clouds keep their metadata service), and the ranges the standard library's
`is_global` misses on older Pythons. `webhook_allow_private_targets` lifts this; embedded
mode (one local user) allows loopback.

The request then goes to the very address that was checked: the name is resolved once, the
URL's host is replaced by that address, and the Host header and TLS (SNI and certificate
check) keep the name, so a DNS answer that changes between the check and the connection
(DNS rebinding) cannot send it elsewhere. Requests follow no redirect, time out after
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

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
LOOPBACK, INTERNAL = "a loopback", "an internal"


def _networks(*cidrs: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)


# IANA's special-purpose IPv4 ranges that are not globally reachable, with multicast, the
# whole of 192.0.0.0/24 (anycast services there are no webhook receivers) and the retired
# 6to4 relay anycast; listed here because `is_global` leaves some out before Python 3.12.4.
NOT_GLOBAL_V4 = _networks(
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
# IPv6 unicast on the internet lies in 2000::/3; inside it, the IETF protocol block (Teredo
# and others), documentation (old and new) and the returned 6bone are not reachable there.
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
NOT_GLOBAL_V6 = _networks("2001::/23", "2001:db8::/32", "3fff::/20", "3ffe::/16")
SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix; 64:ff9b:1::/48 is local


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


@dataclass(frozen=True)
class Target:
    """A checked URL: its host name and the addresses it resolved to, each one allowed."""

    url: httpx.URL
    hostname: str
    addresses: tuple[IPAddress, ...]


def not_global(address: IPAddress) -> str | None:
    """None for a globally routable address; else `LOOPBACK` or `INTERNAL`."""
    if isinstance(address, ipaddress.IPv4Address):
        return _not_global_v4(address)
    if address.ipv4_mapped is not None:  # a dual-stack socket reaches the IPv4 address
        return _not_global_v4(address.ipv4_mapped)
    if address == ipaddress.IPv6Address("::1"):
        return LOOPBACK
    embedded = _embedded_v4(address)
    if embedded is not None:  # reached through a gateway: loopback there is no loopback here
        return None if _not_global_v4(embedded) is None else INTERNAL
    outside = address not in GLOBAL_UNICAST_V6 or any(address in n for n in NOT_GLOBAL_V6)
    return INTERNAL if outside or not address.is_global else None


def _not_global_v4(address: ipaddress.IPv4Address) -> str | None:
    if address.is_loopback:
        return LOOPBACK
    if any(address in network for network in NOT_GLOBAL_V4) or not address.is_global:
        return INTERNAL
    return None


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a 6to4 or NAT64 address carries, if it is one."""
    if address in SIX_TO_FOUR:
        return address.sixtofour
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def check_address(address: IPAddress, host: str, policy: TargetPolicy) -> None:
    """Raise `UnsafeTarget` unless the policy lets a webhook of `host` call `address`."""
    kind = not_global(address)
    if kind is None or (kind == LOOPBACK and policy.allow_loopback) or policy.allow_private:
        return
    raise UnsafeTarget(
        f"webhook host {host!r} resolves to {kind} address ({address}); an admin may allow "
        "it with ARCHSEARCH_WEBHOOK_ALLOW_PRIVATE_TARGETS"
    )


def resolve_target(url: str, policy: TargetPolicy) -> Target:
    """Resolve `url`'s host once and check every address; raise `UnsafeTarget` unless it is
    http(s) and all of them are allowed."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeTarget(f"webhook URL {url!r} must be http:// or https:// with a host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        found = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
        addresses = tuple(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in found))
        target = Target(httpx.URL(url), parts.hostname, addresses)
    except (OSError, ValueError, httpx.InvalidURL) as exc:
        raise UnsafeTarget(f"webhook host {parts.hostname!r} cannot be resolved ({exc})") from None
    if not addresses:
        raise UnsafeTarget(f"webhook host {parts.hostname!r} has no address")
    for address in addresses:
        check_address(address, parts.hostname, policy)
    return target


def check_target(url: str, policy: TargetPolicy) -> None:
    """Raise `UnsafeTarget` unless `url` is http(s) to addresses the policy allows."""
    resolve_target(url, policy)


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
        response, peek = _post_pinned(client, resolve_target(url, policy), body, headers)
    except (UnsafeTarget, httpx.HTTPError) as exc:
        return Outcome(None, f"{type(exc).__name__}: {exc}"[:500], _ms(started))
    error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}: {peek}"
    return Outcome(response.status_code, error, _ms(started))


def _post_pinned(
    client: httpx.Client, target: Target, body: bytes, headers: dict[str, str]
) -> tuple[httpx.Response, str]:
    """POST to the checked addresses in turn (the next only when one refuses to connect)."""
    for address in target.addresses[:-1]:
        try:
            return _post_to(client, target, address, body, headers)
        except httpx.ConnectError:
            continue
    return _post_to(client, target, target.addresses[-1], body, headers)


def _post_to(
    client: httpx.Client,
    target: Target,
    address: IPAddress,
    body: bytes,
    headers: dict[str, str],
) -> tuple[httpx.Response, str]:
    url = target.url.copy_with(host=str(address))
    pinned = {**headers, "Host": target.url.netloc.decode("ascii")}
    # TLS names the host, not the address: SNI, and the certificate is checked against it.
    name = target.url.raw_host.decode("ascii")  # an international name in its IDNA form
    extensions = {"sni_hostname": name} if target.url.scheme == "https" else {}
    request = client.build_request("POST", url, content=body, headers=pinned, extensions=extensions)
    response = client.send(request, stream=True, follow_redirects=False)
    try:
        return response, _peek(response)
    finally:
        response.close()


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
