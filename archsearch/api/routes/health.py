"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from archsearch.api.deps import EnqueuerDep, SessionDep
from archsearch.jobs.platform.db import database_reachable

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    responses={503: {"description": "not ready: `checks` says which dependency is down"}},
)
def readyz(session: SessionDep, enqueuer: EnqueuerDep) -> JSONResponse:
    checks = {"database": database_reachable(session), "queue": enqueuer.ping()}
    ready = all(checks.values())
    body = {"status": "ready" if ready else "not_ready", "checks": checks}
    return JSONResponse(body, status_code=200 if ready else 503)
