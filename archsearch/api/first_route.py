"""GET /v1/jobs/{job_id}, the route clients poll, matched first and run as plain ASGI.

FastAPI keeps included routers as a tree: a request for the hottest route walked the app's
own routes and two routers before matching it (and matched the last router's routes twice),
then paid FastAPI's per-request machinery (two exit stacks, endpoint context, a dependency
solve of two levels) for a route whose only parameters are a path string and the request.
Measured in process, that was about half the cost of a hit kept in memory.

`FirstRoute` sits in front of every other route and claims a GET of `/v1/jobs/<id>` only
when the id parses as a UUID: no other route can claim such a path (the one sibling under
`/v1/jobs/` with one segment is `/v1/jobs/stream`), so it takes exactly the requests that
the documented route would take, and anything else (a malformed id, another method) walks
the tree as before and gets the same answer. It runs what FastAPI would have run, in the
same order: the router's `/v1` checks (401, 403, 422), then the handler (404). Errors
propagate to the app's exception middleware, which answers them with the same handlers.

The documented route stays where it was (the OpenAPI document and the routes' order are
unchanged), and `FirstRoute` refuses to be built (TypeError) unless that route still takes
exactly what it passes: a `job_id` path string and the request, no dependency of its own or
of its router, and one dependency where the app includes it, the `/v1` checks it runs.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from starlette.datastructures import URLPath
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send

Handler = Callable[..., Awaitable[Response]]


class FirstRoute(BaseRoute):
    """The documented `route` (`GET {prefix}/{job_id}`), claimed before the tree walk."""

    def __init__(self, router: APIRouter, route: APIRoute, included_with: Sequence[Any]) -> None:
        """`included_with`: the dependencies the app includes `router` with."""
        _require_plain(router, route)
        self.route, self.checks = route, _the_one_check(included_with)
        self.prefix = route.path.removesuffix("{job_id}")
        self.handler: Handler = route.endpoint
        self.path_format = route.path_format  # what the framework's telemetry names

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or scope["method"] != "GET" or scope.get("root_path"):
            return Match.NONE, {}
        path: str = scope["path"]
        if not path.startswith(self.prefix):
            return Match.NONE, {}
        job_id = path[len(self.prefix) :]
        if "/" in job_id or not _is_uuid(job_id):
            return Match.NONE, {}
        # The same keys the framework's match writes: metrics label the request by
        # `route.path`, and the /v1 checks read the route's declared query parameters.
        return Match.FULL, {
            "endpoint": self.handler,
            "path_params": {"job_id": job_id},
            "route": self.route,
        }

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        await self.checks(request)
        response = await self.handler(job_id=scope["path_params"]["job_id"], request=request)
        await response(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        # URLs are built from the documented route, which stays in the tree.
        raise NoMatchFound(name, path_params)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _the_one_check(included_with: Sequence[Any]) -> Callable[[Request], Awaitable[Any]]:
    """The one dependency the router is included with, which takes the request alone."""
    calls = [getattr(d, "dependency", None) for d in included_with]
    check = calls[0] if len(calls) == 1 else None
    if check is None or [*inspect.signature(check).parameters] != ["request"]:
        raise TypeError(f"FirstRoute runs one check of the request, not {included_with!r}")
    return cast(Callable[[Request], Awaitable[Any]], check)


def _require_plain(router: APIRouter, route: APIRoute) -> None:
    """`route` takes a `job_id` path string and the request and nothing else, as the
    handler's call in `FirstRoute.handle` assumes; its router adds no dependency."""
    dependant = route.dependant
    plain = (
        route.path.endswith("/{job_id}")
        and route.methods == {"GET"}
        and not router.dependencies
        and not dependant.dependencies
        and [p.name for p in dependant.path_params] == ["job_id"]
        and not (dependant.query_params or dependant.header_params or dependant.cookie_params)
        and not dependant.body_params
        and dependant.request_param_name == "request"
    )
    if not plain:  # not an assert: it must hold under `python -O` too
        raise TypeError(f"{route.path} takes more than FirstRoute passes; serve it from the tree")
