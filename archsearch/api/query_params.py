"""A query parameter the route does not declare is refused: 422 naming it.

Without this, `GET /v1/jobs?lable=x` (a typo of `label`) answered every job, as if the
filter had been applied. One dependency of every API route compares the request's query
parameters with those the matched route declares (its own and its dependencies', by their
aliases, as FastAPI reads them), so a route that gains a parameter needs no list updated.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel

# Per route object (routes are built once, at start): APIRoute defines __eq__, not __hash__.
_declared: dict[int, tuple[APIRoute, frozenset[str]]] = {}


def declared_query_names(route: APIRoute) -> frozenset[str]:
    """The query parameter names `route` reads (a query model's fields included)."""
    known = _declared.get(id(route))
    if known is None or known[0] is not route:
        known = (route, frozenset(_query_names(route.dependant)))
        _declared[id(route)] = known
    return known[1]


def _query_names(dependant: Dependant) -> set[str]:
    names: set[str] = set()
    for field in dependant.query_params:
        annotation = field.field_info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names |= {info.alias or name for name, info in annotation.model_fields.items()}
        else:
            names.add(field.alias)
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


async def reject_unknown_query(request: Request) -> None:
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.scope.get("query_string"):
        return
    declared = declared_query_names(route)
    unknown = sorted(set(request.query_params.keys()) - declared)
    if unknown:
        accepted = ", ".join(sorted(declared)) or "none"
        raise RequestValidationError(
            [
                {
                    "loc": ("query", name),
                    "msg": f"unknown query parameter {name!r}; this route takes: {accepted}",
                    "type": "extra_forbidden",
                }
                for name in unknown
            ]
        )
