"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from archsearch.api.deps import EnqueuerDep, SessionDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(session: SessionDep, enqueuer: EnqueuerDep) -> JSONResponse:
    checks = {"database": _database_ok(session), "queue": enqueuer.ping()}
    ready = all(checks.values())
    body = {"status": "ready" if ready else "not_ready", "checks": checks}
    return JSONResponse(body, status_code=200 if ready else 503)


def _database_ok(session: SessionDep) -> bool:
    try:
        session.execute(text("SELECT 1"))
        return True
    except Exception:  # any database failure means "not ready"
        return False
