"""A plain ASGI middleware refusing oversized JSON bodies with 413 before they are read.

Plain ASGI rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware wraps
every response in extra tasks and streams, which costs more than the route it guards.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

MAX_JSON_BODY = 1 << 20  # a job spec is a few hundred bytes; 1 MiB is generous
# Uploads (multipart) are streamed to disk and limited by their own settings, not here.


class JsonBodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int = MAX_JSON_BODY) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._too_large(dict(scope["headers"])):
            body = json.dumps(
                {"error": "too_large", "detail": f"request body over {self.max_bytes} bytes"}
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 413,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def _too_large(self, headers: dict[bytes, Any]) -> bool:
        length = headers.get(b"content-length", b"")
        is_json = headers.get(b"content-type", b"").startswith(b"application/json")
        return is_json and length.isdigit() and int(length) > self.max_bytes
