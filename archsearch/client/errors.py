"""What the client raises: the API's error answers, an unreachable server, an ambiguous id.

Every message is one line a person can act on; the CLI prints it as it is.
"""

from __future__ import annotations

import httpx
from pydantic import ValidationError

from archsearch.schemas.errors import ErrorBody, FieldError


class ClientError(Exception):
    """Anything the client could not do; the base of the errors below."""


class ApiError(ClientError):
    """An error answer of the API, with its status, code and detail."""

    def __init__(self, status: int, error: str, detail: str | list[FieldError]) -> None:
        super().__init__(f"HTTP {status} {error}: {format_detail(detail)}")
        self.status, self.error, self.detail = status, error, detail

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        """Decode `{"error": ..., "detail": ...}`; a proxy's HTML page keeps its text."""
        try:
            body = ErrorBody.model_validate_json(response.content)
        except ValidationError:
            return cls(response.status_code, "error", response.text.strip()[:200])
        return cls(response.status_code, body.error, body.detail)


class ServerUnreachable(ClientError):
    """No archsearch server answers at the client's address."""

    def __init__(self, url: str) -> None:
        super().__init__(f"no archsearch server at {url}: start one with `archsearch serve`")
        self.url = url


class ServerStoppedAnswering(ClientError):
    """The server took the request but the connection broke or timed out before its answer."""

    def __init__(self, url: str, error: httpx.TransportError) -> None:
        super().__init__(f"the archsearch server at {url} stopped answering ({error!r})")
        self.url = url


class AmbiguousJobId(ClientError):
    """A job id prefix that more than one of the caller's jobs starts with."""

    def __init__(self, prefix: str, candidates: list[str], kind: str = "job") -> None:
        super().__init__(
            f"{kind} id {prefix!r} is ambiguous: it starts {', '.join(candidates)}; "
            "give more characters"
        )
        self.prefix, self.candidates = prefix, candidates


def format_detail(detail: str | list[FieldError]) -> str:
    if isinstance(detail, list):
        return "; ".join(f"{d.field}: {d.message}" for d in detail)
    return detail
