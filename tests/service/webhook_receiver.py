"""A webhook receiver on loopback for the tests: records every request (delivery id, event,
signature, body), and can go down (its port refuses connections) and come back."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.service import procs


@dataclass
class Received:
    delivery: str
    event: str
    signature: str
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def signed_by(self, secret: str) -> bool:
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, self.signature)


@dataclass
class Receiver:
    port: int = field(default_factory=procs.free_port)
    status: int = 200  # what it answers; 302 answers a redirect to itself
    received: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append(
                    Received(
                        self.headers.get("X-Archsearch-Delivery", ""),
                        self.headers.get("X-Archsearch-Event", ""),
                        self.headers.get("X-Archsearch-Signature", ""),
                        body,
                    )
                )
                self.send_response(receiver.status)
                if receiver.status == 302:
                    self.send_header("Location", receiver.url)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
