"""The dashboard's sign-in session: a signed, expiring cookie that names an API token.

Team mode. Signing in with an API token sets an HttpOnly, SameSite=Strict cookie
(Secure when the request came over TLS) holding, signed with `session_secret`, the token's
digest (the key of its row, not the token: a stolen cookie is no bearer token) and a random
CSRF token. Every request with the cookie re-checks the token's row (cached as bearer
tokens are, `auth.TOKEN_CACHE_SECONDS`), so a revoked or expired token ends the session.
Signing out ends it on the server too: a copy of the cookie replayed later is refused.

CSRF: SameSite=Strict already keeps the cookie off cross-site requests; in depth, every
state-changing request authenticated by the cookie must also send the session's CSRF token
in `X-CSRF-Token` (a custom header a cross-site form or image cannot set, and whose value a
foreign page cannot read) and, when the browser sends `Origin`, come from our own origin.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from datetime import timedelta

from cachetools import TTLCache
from sqlalchemy.orm import Session
from starlette.requests import HTTPConnection

from archsearch.api.deps import app_state
from archsearch.api.signing import WebSession
from archsearch.jobs.domain.accounts import repository as accounts
from archsearch.jobs.domain.accounts.service import (
    Principal,
    authenticate,
    principal_for_digest,
)
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.errors import Forbidden, Unauthenticated

log = logging.getLogger(__name__)

COOKIE = "archsearch_session"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def session_of(connection: HTTPConnection) -> WebSession | None:
    cookie = connection.cookies.get(COOKIE)
    signer = app_state(connection).session_signer
    return signer.loads(cookie) if cookie else None


def check_csrf(connection: HTTPConnection, method: str, session: WebSession) -> None:
    """Refuse a state-changing request that a page of ours did not send (403)."""
    if method in SAFE_METHODS:
        return
    check_origin(connection)
    sent = connection.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        raise Forbidden("missing or wrong X-CSRF-Token for this session; reload the page")


def check_origin(connection: HTTPConnection) -> None:
    origin = connection.headers.get("origin")
    if origin is not None and origin != own_origin(connection):
        raise Forbidden(f"cross-site request from {origin} refused; use the dashboard's pages")


def check_form_csrf(connection: HTTPConnection, session: WebSession, sent: str) -> None:
    """A form of ours (sign-out) sends the CSRF token as a field instead of a header."""
    check_origin(connection)
    if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        raise Forbidden("missing or wrong CSRF token for this session; reload the page")


def own_origin(connection: HTTPConnection) -> str:
    return f"{connection.url.scheme}://{connection.url.netloc}"


def principal_for_session(session: Session, web: WebSession) -> Principal:
    """The token's owner, by the same check as a bearer token's (`accounts.service`), unless
    this session was signed out."""
    if accounts.is_signed_out(session, web.session_digest):
        raise Unauthenticated("this session was signed out; sign in again")
    return principal_for_digest(
        session,
        web.token_digest,
        unknown="this session's token no longer exists; sign in again",
        renew="sign in with a new one",
    )


def remembered_principal(
    cache: TTLCache[str, Principal], key: str, look_up: Callable[[], Principal]
) -> Principal:
    """The principal verified under `key`: remembered, or `look_up()`'s (then remembered).

    The one path of the API's routes (through their connection) and of the dashboard's pages
    (through a session of their own); an `Unauthenticated` from `look_up` is never cached."""
    if (principal := cache.get(key)) is not None:
        return principal
    principal = cache[key] = look_up()
    return principal


def principal_for_credentials(session: Session, header: str, web: WebSession | None) -> Principal:
    """Who a bearer token's `Authorization` header (or, with `web`, a dashboard session) is."""
    return authenticate(session, header) if web is None else principal_for_session(session, web)


def sign_out(connection: HTTPConnection, session: Session, web: WebSession) -> None:
    """End the session on the server: remembered as signed out until its cookie would have
    expired, and forgotten by this process's cache at once (another API process's cache
    holds it for at most `auth.TOKEN_CACHE_SECONDS`)."""
    state = app_state(connection)
    expires_at = utcnow() + timedelta(seconds=state.session_signer.max_age)
    accounts.sign_out_session(session, web.session_digest, expires_at)
    state.token_cache.pop(web.principal_key, None)
