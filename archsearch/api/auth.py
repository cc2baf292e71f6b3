"""Who is calling. Team mode needs a bearer token on every /v1 route; embedded mode runs as
the local user, bound to localhost.

A verified token is remembered for `TOKEN_CACHE_SECONDS`, so polling clients do not pay a
database round trip per request; a revocation therefore takes effect within that time.
"""

from __future__ import annotations

from typing import Annotated

from cachetools import TTLCache
from fastapi import Depends, Request
from sqlalchemy.orm import Session

from archsearch.api.deps import app_state
from archsearch.api.freshness import VERIFIED_ENTRIES, VERIFIED_SECONDS
from archsearch.api.signing import WebSession
from archsearch.api.throttle import AuthThrottle, client_address
from archsearch.api.web.session import (
    check_csrf,
    principal_for_credentials,
    remembered_principal,
    session_of,
)
from archsearch.jobs.domain.accounts.service import LOCAL_USER, Principal
from archsearch.jobs.domain.accounts.tokens import token_digest
from archsearch.jobs.domain.errors import Unauthenticated
from archsearch.jobs.platform.services import Services

TOKEN_CACHE_SECONDS = VERIFIED_SECONDS
TOKEN_CACHE_SIZE = VERIFIED_ENTRIES
PRINCIPAL_KEY = "archsearch.principal"  # where a request keeps its authenticated caller


def new_token_cache() -> TTLCache[str, Principal]:
    """Verified principals by token digest (or session key), forgotten after
    `TOKEN_CACHE_SECONDS`; the least recently used go first beyond `TOKEN_CACHE_SIZE`."""
    return TTLCache(maxsize=TOKEN_CACHE_SIZE, ttl=TOKEN_CACHE_SECONDS)


async def current_principal(request: Request) -> Principal:
    """The caller, authenticated once per request: kept on the request for whichever
    dependency asks next (`v1_checks.checked_v1_request` asks first on /v1 routes)."""
    known: Principal | None = request.scope.get(PRINCIPAL_KEY)
    if known is None:
        known = request.scope[PRINCIPAL_KEY] = await _authenticate(request)
    return known


async def _authenticate(request: Request) -> Principal:
    # App state is read here rather than through sub-dependencies: every /v1 request comes
    # this way, and each dependency FastAPI resolves costs more than the lookup itself.
    state = app_state(request)
    services, throttle = state.services, state.auth_throttle
    if not services.settings.tokens_required:
        return LOCAL_USER
    header = request.headers.get("authorization") or ""
    if not header and (web := session_of(request)) is not None:
        # The dashboard's session cookie (api/web/session.py): CSRF-checked, then the same
        # token row as a bearer token, behind the same cache.
        check_csrf(request, request.method, web)
        return await _cached(request, services, web.principal_key, header, web, throttle)
    # The secret itself is never kept in memory: the cache is keyed by its digest.
    return await _cached(request, services, token_digest(header), header, None, throttle)


async def _cached(
    request: Request,
    services: Services,
    key: str,
    header: str,
    web: WebSession | None,
    throttle: AuthThrottle,
) -> Principal:
    cache = app_state(request).token_cache
    if (principal := cache.get(key)) is not None:
        return principal  # a token known good costs no connection
    # The credentials are checked before any count is consulted, so a correct token is
    # served however many failures its address or its prefix has seen.
    try:
        async with services.async_reader.connect() as connection:
            principal = await connection.run_sync(
                lambda conn: remembered_principal(
                    cache, key, lambda: principal_for_credentials(Session(bind=conn), header, web)
                )
            )
    except Unauthenticated:
        if bool(header.strip()) or web is not None:  # no credentials is no guess
            throttle.failed(client_address(request), "" if web is not None else header)
        raise
    return principal


CurrentUser = Annotated[Principal, Depends(current_principal)]


async def api_principal(principal: CurrentUser) -> Principal:
    """The caller of a /v1 route: any token but a `metrics` one, which reads /metrics only."""
    principal.require("read")
    return principal
