"""`X-Content-Type-Options: nosniff` on every answer, JSON and errors included.

A browser that sniffs a JSON error echoing user input as HTML would run it; the pages have
carried the header since the dashboard came, the API's answers now do too. Plain ASGI (as
`limits.BodyLimit`), so streamed answers pass through untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

NOSNIFF = (b"x-content-type-options", b"nosniff")


class NoSniff:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", ())
                if not any(name.lower() == NOSNIFF[0] for name, _ in headers):
                    message = {**message, "headers": [*headers, NOSNIFF]}
            await send(message)

        await self.app(scope, receive, send_with_header)
