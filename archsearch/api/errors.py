"""One table maps domain errors to HTTP statuses. Body: `{"error": ..., "detail": ...}`."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from archsearch.core.errors import UserError
from archsearch.core.spec import METHOD_NAMES, MODEL_NAMES
from archsearch.jobs.domain.accounts.service import Forbidden, Unauthenticated
from archsearch.jobs.domain.errors import (
    InvalidCursor,
    InvalidTransition,
    NotFound,
    SchemaBehind,
    TooLarge,
)
from archsearch.jobs.domain.service import QueueUnavailable

# (exception type, HTTP status, error code); the first match wins.
ERROR_TABLE: list[tuple[type[Exception], int, str]] = [
    (Unauthenticated, 401, "unauthenticated"),
    (Forbidden, 403, "forbidden"),
    (NotFound, 404, "not_found"),
    (InvalidTransition, 409, "invalid_state"),
    (InvalidCursor, 422, "invalid_cursor"),
    (TooLarge, 413, "too_large"),
    (UserError, 422, "invalid_job"),
    (QueueUnavailable, 503, "queue_unavailable"),
    (SchemaBehind, 503, "schema_behind"),
]

_UNION_TAGS = set(METHOD_NAMES) | set(MODEL_NAMES)


def field_path(loc: tuple[Any, ...]) -> str:
    """'training.optimizer.lr' from pydantic's loc, without 'body' and union tag names."""
    parts: list[str] = []
    previous = None
    for item in loc:
        is_tag = (
            isinstance(item, str) and item in _UNION_TAGS and previous in (None, "body", "model")
        )
        if item != "body" and not is_tag:
            parts.append(str(item))
        previous = item
    return ".".join(parts) or "body"


def _error_field(err: dict[str, Any]) -> str:
    loc = tuple(err["loc"])
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        # The offending field is the discriminator itself ('method', or a model's 'name').
        loc = (*loc, str(err.get("ctx", {}).get("discriminator", "")).strip("'"))
    return field_path(loc)


def _validation_detail(exc: RequestValidationError) -> list[dict[str, str]]:
    return [{"field": _error_field(err), "message": err["msg"]} for err in exc.errors()]


def _body(code: str, detail: Any) -> dict[str, Any]:
    return {"error": code, "detail": detail}


def install_error_handlers(app: FastAPI) -> None:
    async def on_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(_body("invalid_request", _validation_detail(exc)), status_code=422)

    async def on_domain(_: Request, exc: Exception) -> JSONResponse:
        for error_type, status, code in ERROR_TABLE:
            if isinstance(exc, error_type):
                field = getattr(exc, "field", None)
                detail: Any = [{"field": field, "message": str(exc)}] if field else str(exc)
                headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
                return JSONResponse(_body(code, detail), status_code=status, headers=headers)
        raise exc

    async def on_http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Routing errors (no such path, wrong method) keep the same body shape as ours.
        code = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_")
        return JSONResponse(
            _body(code, exc.detail), status_code=exc.status_code, headers=exc.headers
        )

    app.add_exception_handler(RequestValidationError, on_validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, on_http)  # type: ignore[arg-type]
    for error_type, _, _ in ERROR_TABLE:
        app.add_exception_handler(error_type, on_domain)
