"""Failed sign-ins and wrong bearer tokens, counted per client address and per token prefix.

Only failures are counted, and only after the credentials were checked: a correct token is
served whatever the counts say, so no one can lock another out, neither the users behind
one NAT or proxy address nor a guesser aiming wrong tokens at a user's token prefix (the
`ast_xxxx` part a guesser keeps while varying the rest). Past `auth_failures_per_minute`
failures of one address, or of one prefix, in the last minute, a further failure answers
429 with Retry-After instead of 401, and is logged.

The address counted is the client's as uvicorn resolved it: the connection's peer, or the
X-Forwarded-For entry of a proxy named in `forwarded_allow_ips`. A forwarding header from
any other peer is ignored, so a guesser cannot pick the address its failures count against;
the users behind an untrusted proxy share its address, which costs them nothing but the 401
of a wrong token turning into a 429 sooner.

The counts live in this process (each API process counts its own), which bounds a guesser
per process without a shared store.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque

from cachetools import TTLCache
from starlette.requests import HTTPConnection

from archsearch.jobs.domain.errors import JobsError

log = logging.getLogger(__name__)
WINDOW_SECONDS = 60.0
PREFIX_CHARACTERS = 12
TRACKED_KEYS = 100_000  # addresses and prefixes remembered at once; the oldest go first


class TooManyAttempts(JobsError):
    """Too many failed authentications from this address or with this token prefix: 429."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def client_address(connection: HTTPConnection) -> str:
    """The caller's address (a trusted proxy's X-Forwarded-For applied by uvicorn)."""
    return connection.client.host if connection.client else "unknown"


def token_prefix(token: str) -> str:
    return token.strip().removeprefix("Bearer ").strip()[:PREFIX_CHARACTERS]


class AuthThrottle:
    def __init__(self, failures_per_minute: int) -> None:
        self.limit = failures_per_minute
        self._failures: TTLCache[str, deque[float]] = TTLCache(TRACKED_KEYS, WINDOW_SECONDS)

    def _keys(self, address: str, token: str) -> list[str]:
        prefix = token_prefix(token)
        return [f"address {address}"] + ([f"token {prefix}"] if prefix else [])

    def _recent(self, key: str, now: float) -> deque[float]:
        # Only the last `limit` failures matter: the oldest of them says when a try is due.
        times = self._failures.get(key) or deque(maxlen=max(1, self.limit))
        while times and times[0] <= now - WINDOW_SECONDS:
            times.popleft()
        return times

    def failed(self, address: str, token: str) -> None:
        """Count a failed authentication (call it only once the credentials were checked
        and refused); raise `TooManyAttempts` if its address or prefix was already at the
        limit, so the caller answers 429 instead of 401."""
        now, over = time.monotonic(), None
        for key in self._keys(address, token):
            times = self._recent(key, now)
            if over is None and len(times) >= self.limit:
                over = (key, max(1, math.ceil(times[0] + WINDOW_SECONDS - now)))
            times.append(now)
            self._failures[key] = times  # re-set: the entry lives a window past its last failure
        log.warning("failed authentication from %s (token %s…)", address, token_prefix(token))
        if over is not None:
            key, wait = over
            log.warning("authentication throttled for %s", key)
            raise TooManyAttempts(
                f"too many failed authentications from this {key.split()[0]}; retry in {wait}s",
                wait,
            )
