"""Failed sign-ins and wrong bearer tokens, counted per client address and per token prefix.

Past `auth_failures_per_minute` failures of one address, or of one token prefix (the
`ast_xxxx` part a guesser keeps while varying the rest), in the last minute, further
attempts that are not already known good answer 429 with Retry-After and are logged, before
any database lookup. A correct token is never slowed: a token verified in the last seconds is
served from the principal cache before this check, and other addresses and prefixes are not
counted together. The counts live in this process (each API process counts its own), which
bounds a guesser per process without a shared store.
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
        times = self._failures.get(key) or deque()
        while times and times[0] <= now - WINDOW_SECONDS:
            times.popleft()
        return times

    def check(self, address: str, token: str) -> None:
        """Raise `TooManyAttempts` if the address or the token prefix is over the limit."""
        now = time.monotonic()
        for key in self._keys(address, token):
            times = self._recent(key, now)
            if len(times) >= self.limit:
                wait = max(1, math.ceil(times[0] + WINDOW_SECONDS - now))
                log.warning("authentication throttled for %s: %d failures", key, len(times))
                raise TooManyAttempts(
                    f"too many failed authentications from this {key.split()[0]}; retry in {wait}s",
                    wait,
                )

    def failed(self, address: str, token: str) -> None:
        now = time.monotonic()
        for key in self._keys(address, token):
            times = self._recent(key, now)
            times.append(now)
            self._failures[key] = times  # re-set: the entry lives a window past its last failure
        log.warning("failed authentication from %s (token %s…)", address, token_prefix(token))
