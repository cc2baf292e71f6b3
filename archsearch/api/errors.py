"""One table maps domain errors to HTTP statuses. Body: `ErrorBody`, `{"error", "detail"}`.

Every error response, ours or the framework's (validation, unknown path, wrong method), is
built through `schemas.errors.ErrorBody`, so the typed client parses all of them alike, and
`ERROR_RESPONSES` documents them in the OpenAPI schema.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from archsearch.api.throttle import TooManyAttempts
from archsearch.core.errors import UserError
from archsearch.jobs.domain.errors import (
    AmbiguousId,
    Busy,
    Forbidden,
    InvalidCursor,
    InvalidTransition,
    NotFound,
    PreviewUnavailable,
    TooLarge,
    Unauthenticated,
)
from archsearch.jobs.platform.db import DATABASE_REFUSED_INPUT, DATABASE_UNAVAILABLE
from archsearch.jobs.platform.migrate import SchemaBehind
from archsearch.jobs.platform.objects import StorageConfigError, StorageUnavailable
from archsearch.jobs.platform.secret_keys import SecretKeyProblem
from archsearch.schemas.errors import ErrorBody, FieldError
from archsearch.specs.errors import problem_field, problem_message

log = logging.getLogger(__name__)

# (exception type, HTTP status, error code); the first match wins.
ERROR_TABLE: list[tuple[type[Exception], int, str]] = [
    (Unauthenticated, 401, "unauthenticated"),
    (TooManyAttempts, 429, "too_many_attempts"),
    (Forbidden, 403, "forbidden"),
    (NotFound, 404, "not_found"),
    (PreviewUnavailable, 404, "no_preview"),
    (InvalidTransition, 409, "invalid_state"),
    (AmbiguousId, 409, "ambiguous_id"),
    (InvalidCursor, 422, "invalid_cursor"),
    (TooLarge, 413, "too_large"),
    # Any value of the request the server refuses, whoever noticed it (the schema or a check
    # against this deployment): one code, the detail names the field.
    (UserError, 422, "invalid_request"),
    (Busy, 503, "busy"),
    (SchemaBehind, 503, "schema_behind"),
    (StorageUnavailable, 503, "storage_unavailable"),
    (StorageConfigError, 503, "storage_misconfigured"),
    (SecretKeyProblem, 503, "secret_keys_missing"),  # the message names the setting to fix
    *((error, 503, "database_unavailable") for error in DATABASE_UNAVAILABLE),
    *((error, 422, "invalid_input") for error in DATABASE_REFUSED_INPUT),
]

# Errors of the database driver: their text names hosts and SQL, so the body says this.
FIXED_DETAIL = {
    "database_unavailable": "the database is unreachable; retry after the Retry-After seconds",
    "storage_unavailable": "the object store is unreachable; nothing was stored; retry after "
    "the Retry-After seconds",
    "storage_misconfigured": "the object store is misconfigured (a missing bucket or refused "
    "credentials): an infrastructure problem for the administrator, see the server log",
    "invalid_input": "a value of the request cannot be stored (a NUL byte, or a number "
    "out of range)",
}
CANDIDATE_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
RETRY_AFTER_SECONDS = 5  # a restarting database or broker is usually back within seconds

# What the OpenAPI schema says every /v1 route may answer besides its success.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": HTTPStatus(status).phrase}
    for status in sorted({status for _, status, _ in ERROR_TABLE})
}

# What a route reading a JSON body also answers: bytes that are not JSON text (not UTF-8)
# never reach validation; the framework refuses them with 400 before.
BODY_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "the body cannot be parsed as JSON"},
}


def _validation_detail(exc: RequestValidationError) -> list[FieldError]:
    return [
        FieldError(field=problem_field(err), message=problem_message(err)) for err in exc.errors()
    ]


def is_json_syntax_error(errors: Sequence[Any]) -> bool:
    return bool(errors) and errors[0].get("type") == "json_invalid"


def json_syntax_detail(body: bytes, error: Mapping[str, Any]) -> list[FieldError]:
    """Where a body that is not JSON breaks, as line and column (the framework reports a
    character offset, in the place of a field name)."""
    offset = error["loc"][-1] if isinstance(error["loc"][-1], int) else 0
    text = body.decode("utf-8", errors="replace")[:offset]
    line, column = text.count("\n") + 1, offset - (text.rfind("\n") + 1) + 1
    reason = error.get("ctx", {}).get("error", "not JSON")
    message = f"malformed JSON at line {line}, column {column}: {reason}"
    return [FieldError(field="body", message=message)]


async def _body_or_empty(request: Request) -> bytes:
    # Only a JSON body reaches a JSON syntax error, and it is read and kept by then; a
    # stream read elsewhere (a multipart upload) must never turn a 422 into a 500.
    try:
        return await request.body()
    except RuntimeError:
        return b""


def error_response(
    code: str,
    detail: str | list[FieldError],
    status: int,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(error=code, detail=detail)
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def _domain_detail(exc: Exception, code: str) -> str | list[FieldError]:
    if code in FIXED_DETAIL:
        return FIXED_DETAIL[code]
    field = getattr(exc, "field", None)
    return [FieldError(field=field, message=str(exc))] if field else str(exc)


def _status_headers(status: int) -> dict[str, str] | None:
    if status == 401:
        return {"WWW-Authenticate": "Bearer"}
    if status == 503:
        return {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return None


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of this path accepts. The router's own 405 names only the
    first route whose path matched, while one path is often served by several routes (one
    per method); each method is asked of every route through the public `matches`, which
    also reaches the routes of included routers."""
    allowed = []
    for method in CANDIDATE_METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return allowed


def install_error_handlers(app: FastAPI) -> None:
    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if is_json_syntax_error(errors):
            detail = json_syntax_detail(await _body_or_empty(request), errors[0])
            return error_response("invalid_json", detail, 422)
        return error_response("invalid_request", _validation_detail(exc), 422)

    async def on_domain(_: Request, exc: Exception) -> JSONResponse:
        for error_type, status, code in ERROR_TABLE:
            if isinstance(exc, error_type):
                if code in FIXED_DETAIL:  # the body hides the cause: the log keeps it
                    log.warning("%s: %s: %s", code, type(exc).__name__, exc)
                detail = _domain_detail(exc, code)
                headers = _status_headers(status)
                if isinstance(exc, TooManyAttempts):
                    headers = {"Retry-After": str(exc.retry_after)}
                return error_response(code, detail, status, headers)
        raise exc

    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Routing errors (no such path, wrong method) keep the same body shape as ours.
        code = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_")
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(exc.headers or {}), "Allow": ", ".join(allowed_methods(request))}
        return error_response(code, str(exc.detail), exc.status_code, headers)

    app.add_exception_handler(RequestValidationError, on_validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, on_http)  # type: ignore[arg-type]
    for error_type, _, _ in ERROR_TABLE:
        app.add_exception_handler(error_type, on_domain)
