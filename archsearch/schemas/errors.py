"""The body of every error response: `{"error": <code>, "detail": <text or field errors>}`.

`error` is a stable machine-readable code (`not_found`, `invalid_request`, ...); `detail` is
a sentence for a person, or, for invalid input, one entry per offending field.
"""

from __future__ import annotations

from pydantic import BaseModel


class FieldError(BaseModel):
    field: str  # dotted path into the request, e.g. "training.optimizer.lr" or "id_prefix"
    message: str


class ErrorBody(BaseModel):
    error: str
    detail: str | list[FieldError]
