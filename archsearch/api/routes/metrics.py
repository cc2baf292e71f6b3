"""`GET /metrics`: Prometheus text format (see `api/observability.py` for what is in it).

In team mode only an admin user's `metrics` or `admin` token may read it: the figures
span every team. Embedded, the
API listens on localhost for its one user and the endpoint is open like every other.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import app_state
from archsearch.jobs.domain.accounts.tokens import METRICS_SCOPE, scope_covers
from archsearch.jobs.domain.errors import Forbidden

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=Response)
def read_prometheus_metrics(request: Request, principal: CurrentUser) -> Response:
    # A sync handler: the database reads of the collector run in the thread pool.
    # A `metrics` token is only ever issued to an admin user (`issue_token`).
    if not scope_covers(principal.scope, METRICS_SCOPE):
        raise Forbidden(
            "GET /metrics needs an admin user's 'metrics' or 'admin' token: its figures span "
            "every team (archsearch admin create-token USER --scope metrics)"
        )
    return Response(
        generate_latest(app_state(request).metrics_registry), media_type=CONTENT_TYPE_LATEST
    )
