"""A spec's validation errors named as the user wrote them: the field's dotted path without
pydantic's union tags (`density`, not `prune.density`), the validator's sentence without
pydantic's "Value error, " prefix. The API, the CLI's local check and study planning all
name a spec's problems this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archsearch.specs import METHOD_NAMES
from archsearch.specs.families import MODEL_NAMES

UNION_TAGS = frozenset(METHOD_NAMES) | frozenset(MODEL_NAMES)


def field_path(loc: Sequence[Any], whole: str = "body") -> str:
    """'training.optimizer.lr' from pydantic's loc, without 'body' and union tag names;
    `whole` when the problem is the object itself."""
    parts: list[str] = []
    previous = None
    for item in loc:
        is_tag = (
            isinstance(item, str) and item in UNION_TAGS and previous in (None, "body", "model")
        )
        if item != "body" and not is_tag:
            parts.append(str(item))
        previous = item
    return ".".join(parts) or whole


def problem_field(err: Any, whole: str = "body") -> str:
    loc = tuple(err["loc"])
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        # The offending field is the discriminator itself ('method', or a model's 'name').
        loc = (*loc, str(err.get("ctx", {}).get("discriminator", "")).strip("'"))
    return field_path(loc, whole)


def problem_message(err: Any) -> str:
    # pydantic prefixes what a validator raised with "Value error, ": the user wrote no
    # Python; the validator's own sentence is the message.
    return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
