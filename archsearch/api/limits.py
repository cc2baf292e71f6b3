"""The one check of request sizes: a declared Content-Length over the limit of its kind of
body is refused with 413 before a byte of the body is read.

A JSON body (a job spec) is a few hundred bytes; a multipart body is a dataset upload,
limited by `upload_max_bytes` plus room for the form around the file. (An upload sent
without a length is counted as it is stored, by the dataset store.)

Plain ASGI rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware wraps
every response in extra tasks and streams, which costs more than the route it guards.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from archsearch.jobs.domain.errors import LimitExceeded
from archsearch.schemas.errors import ErrorBody

MAX_JSON_BODY = 1 << 20  # a job spec is a few hundred bytes; 1 MiB is generous
MULTIPART_OVERHEAD = 64 << 10  # boundaries and form fields around an uploaded file


class BodyLimit:
    def __init__(
        self, app: ASGIApp, upload_max_bytes: int, json_max_bytes: int = MAX_JSON_BODY
    ) -> None:
        self.app = app
        self.upload_max_bytes, self.json_max_bytes = upload_max_bytes, json_max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self._refusal(dict(scope["headers"])) if scope["type"] == "http" else None
        if refusal is None:
            await self.app(scope, receive, send)
            return
        body = ErrorBody(error="too_large", detail=str(refusal)).model_dump_json().encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _refusal(self, headers: dict[bytes, bytes]) -> LimitExceeded | None:
        length = headers.get(b"content-length", b"")
        if not length.isdigit():
            return None
        content_type = headers.get(b"content-type", b"")
        if content_type.startswith(b"application/json") and int(length) > self.json_max_bytes:
            return LimitExceeded("the request body", self.json_max_bytes, "json_max_bytes")
        too_big = self.upload_max_bytes + MULTIPART_OVERHEAD
        if content_type.startswith(b"multipart/form-data") and int(length) > too_big:
            return LimitExceeded("the uploaded file", self.upload_max_bytes, "upload_max_bytes")
        return None
