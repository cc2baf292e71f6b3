"""API tokens: 256 random bits, shown once, stored only as SHA-256."""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "ast_"
SCOPES = ("read", "submit", "admin")  # each includes the ones before it
# Outside that ladder: a Prometheus scraper's token reads GET /metrics and nothing else.
METRICS_SCOPE = "metrics"
TOKEN_SCOPES = (METRICS_SCOPE, *SCOPES)


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def looks_like_token(value: str) -> bool:
    return value.startswith(TOKEN_PREFIX) and 20 <= len(value) <= 100 and value.isascii()


def scope_covers(granted: str, needed: str) -> bool:
    """Whether a token of scope `granted` may do what needs `needed`: the ladder read <
    submit < admin, and `metrics`, which an admin token covers too."""
    if METRICS_SCOPE in (granted, needed):
        return granted in (METRICS_SCOPE, "admin") and needed == METRICS_SCOPE
    return SCOPES.index(granted) >= SCOPES.index(needed)
