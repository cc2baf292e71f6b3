"""What every /v1 route checks, in this order, as one dependency: the caller (401), its
token's scope (403), then storable text and known query parameters (422).

One dependency rather than several because FastAPI's resolution of each costs more than
most of these checks. It keeps the caller on the request (`current_principal` does), so a
route's `CurrentUser` does not authenticate again, and the hottest route (GET
/v1/jobs/{id}) reads it with `checked_caller`, resolving no dependency of its own.
"""

from __future__ import annotations

from fastapi import Request

from archsearch.api.auth import PRINCIPAL_KEY, api_principal, current_principal
from archsearch.api.query_params import reject_unknown_query
from archsearch.api.storable import reject_unstorable_text
from archsearch.jobs.domain.accounts.service import Principal


async def checked_v1_request(request: Request) -> Principal:
    # The caller is authenticated here, not through a sub-dependency: `current_principal`
    # remembers it on the request, so a route's own `CurrentUser` does not authenticate again.
    principal = await api_principal(await current_principal(request))
    await reject_unstorable_text(request)
    await reject_unknown_query(request)
    return principal


def checked_caller(request: Request) -> Principal:
    """The caller that `checked_v1_request`, a dependency of every /v1 router, let through:
    no dependency for FastAPI to solve (the hottest route's way). Outside a /v1 router
    there is none: a KeyError, never another caller."""
    principal: Principal = request.scope[PRINCIPAL_KEY]
    return principal
