"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from archsearch.api.deps import EnqueuerDep, SessionDep, StoreDep
from archsearch.jobs.platform.db import database_reachable
from archsearch.jobs.platform.objects import ObjectStore, StorageConfigError, StorageUnavailable

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    responses={503: {"description": "not ready: `checks` says which dependency is down"}},
)
def readyz(session: SessionDep, enqueuer: EnqueuerDep, store: StoreDep) -> JSONResponse:
    storage, problem = _object_store_check(store.objects)
    checks = {"database": database_reachable(session), "queue": enqueuer.ping(), **storage}
    ready = all(checks.values())
    body: dict[str, object] = {"status": "ready" if ready else "not_ready", "checks": checks}
    if problem:
        body["problems"] = {"object_store": problem}
    return JSONResponse(body, status_code=200 if ready else 503)


def _object_store_check(objects: ObjectStore) -> tuple[dict[str, bool], str | None]:
    """Whether the store answers, and what is wrong when it does not: unreachable (an
    outage) or misconfigured (a missing bucket, refused credentials)."""
    try:
        objects.check()
    except StorageUnavailable as exc:
        return {"object_store": False}, f"unreachable: {exc}"
    except StorageConfigError as exc:
        return {"object_store": False}, f"misconfigured: {exc}"
    return {"object_store": True}, None
