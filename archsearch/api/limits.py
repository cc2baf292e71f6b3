"""The one check of request sizes, in two places: a declared Content-Length over the limit
of its kind of body is refused with 413 before a byte of the body is read, and a body sent
without a length (chunked) is counted as it streams in and refused with 413 the moment it
passes the limit, so it is never spooled whole to memory or disk first.

A JSON body (a job spec) is a few hundred bytes; a multipart body is a dataset upload,
limited by `upload_max_bytes` plus room for the form around the file.

Plain ASGI rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware wraps
every response in extra tasks and streams, which costs more than the route it guards.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from archsearch.jobs.domain.errors import LimitExceeded
from archsearch.schemas.errors import ErrorBody

MAX_JSON_BODY = 1 << 20  # a job spec is a few hundred bytes; 1 MiB is generous
MULTIPART_OVERHEAD = 64 << 10  # boundaries and form fields around an uploaded file


class BodyTooLarge(Exception):
    """Raised from `receive` when a streamed body passes its limit; the parser reading it
    (Starlette's form parser closes its spooled files on any error) gives up there."""


class BodyLimit:
    def __init__(
        self, app: ASGIApp, upload_max_bytes: int, json_max_bytes: int = MAX_JSON_BODY
    ) -> None:
        self.app = app
        self.upload_max_bytes, self.json_max_bytes = upload_max_bytes, json_max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        refusal = self._refusal(headers)
        if refusal is not None:
            await _send_too_large(send, refusal)
            return
        if b"transfer-encoding" not in headers and b"content-length" not in headers:
            await self.app(scope, receive, send)  # HTTP/1.1: a request without a body
            return
        await self._streamed(scope, receive, send, *self._limit_of(headers))

    async def _streamed(
        self, scope: Scope, receive: Receive, send: Send, limit: LimitExceeded, allowed: int
    ) -> None:
        """Count the body as it arrives; past `allowed` bytes, answer 413 whatever the app
        did with the broken body."""
        received, refused, started = 0, False, False

        async def counting_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > allowed:
                    refused = True
                    raise BodyTooLarge(str(limit))
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:  # the app's own answer to the cut body (a 400 or 500) is replaced
                return
            started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except BodyTooLarge:
            pass
        if refused and not started:
            await _send_too_large(send, limit)

    def _limit_of(self, headers: dict[bytes, bytes]) -> tuple[LimitExceeded, int]:
        """The refusal to answer for this body, and how many bytes of it are allowed."""
        content_type = headers.get(b"content-type", b"")
        if content_type.startswith(b"application/json"):
            refusal = LimitExceeded("the request body", self.json_max_bytes, "json_max_bytes")
            return refusal, self.json_max_bytes
        # Multipart, or any other body: at most an upload and its form.
        refusal = LimitExceeded("the uploaded file", self.upload_max_bytes, "upload_max_bytes")
        return refusal, self.upload_max_bytes + MULTIPART_OVERHEAD

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


async def _send_too_large(send: Send, refusal: LimitExceeded) -> None:
    body = ErrorBody(error="too_large", detail=str(refusal)).model_dump_json().encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        # The rest of the body is not read: the client must not reuse this connection.
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
