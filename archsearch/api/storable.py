"""Text that PostgreSQL cannot store is refused at the door: a 422 naming the field.

PostgreSQL's text and jsonb values cannot hold a NUL character (U+0000), and a lone
surrogate (a JSON `"\\ud800"`) is not UTF-8 at all; either one, sent to the database, would
fail the request with a 500. One dependency of every /v1 route checks the query and path
parameters and a JSON body before the handler runs; the form fields of an upload are checked
by their route (`require_storable`), after FastAPI parsed the form.

Fields are named as FastAPI names them in its own 422s: `query.method`, `path.name`, and a
JSON body's fields by their path (`label`, `dataset.id`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

MESSAGE = "must not contain NUL characters (\\u0000) or unpaired surrogates"


def is_storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _unstorable(value: Any, loc: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
    """The location of every string (or object key) in a parsed JSON value that is not."""
    if isinstance(value, str):
        if not is_storable(value):
            yield loc
    elif isinstance(value, dict):
        for key, item in value.items():
            if not is_storable(key):
                yield loc
            yield from _unstorable(item, (*loc, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unstorable(item, (*loc, index))


def _refuse(locations: list[tuple[str | int, ...]]) -> None:
    if locations:
        raise RequestValidationError(
            [
                {"loc": loc, "msg": f"Value {MESSAGE}", "type": "string_unstorable"}
                for loc in locations
            ]
        )


def require_storable(location: str, fields: Mapping[str, str | None]) -> None:
    """Refuse (422) the named fields whose text the database could not store."""
    _refuse([(location, name) for name, text in fields.items() if text and not is_storable(text)])


async def _json_body(request: Request) -> Any:
    # Only routes that take a body: FastAPI has read (and cached) it already, so this
    # costs no second read and never pulls an unbounded body into memory.
    route = request.scope.get("route")
    if getattr(route, "body_field", None) is None:
        return None
    if not request.headers.get("content-type", "").startswith("application/json"):
        return None
    body = await request.body()
    if b"\\u" not in body:  # a NUL or a surrogate in JSON is always written escaped
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None  # FastAPI answers malformed JSON itself


async def reject_unstorable_text(request: Request) -> None:
    """The dependency: every query and path parameter, and the JSON body, storable."""
    locations: list[tuple[str | int, ...]] = []
    # Parsing an empty query string still builds a multidict: most requests have none.
    query = request.query_params.multi_items() if request.scope.get("query_string") else ()
    for name, text in query:
        if not (is_storable(name) and is_storable(text)):
            locations.append(("query", name))
    for name, text in request.path_params.items():
        if isinstance(text, str) and not is_storable(text):
            locations.append(("path", name))
    locations.extend(_unstorable(await _json_body(request), ("body",)))
    _refuse(locations)
