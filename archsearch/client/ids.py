"""Ids as the caller types them: a full id, or any unique start of one (as `archsearch
list` shows them, like git's hashes), for every resource the client names by id."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from archsearch.client.errors import AmbiguousJobId, ApiError, ClientError

HEX_DIGITS = frozenset("0123456789abcdef")


def resolve_id(
    id_or_prefix: str | uuid.UUID, kind: str, ids_starting: Callable[[str], list[uuid.UUID]]
) -> uuid.UUID:
    """The full id of the caller's one `kind` whose id starts with `id_or_prefix`; a full id
    is taken as is, without a request. `ids_starting(hex_digits)` lists a few matching ids."""
    if isinstance(id_or_prefix, uuid.UUID):
        return id_or_prefix
    try:
        return uuid.UUID(id_or_prefix)
    except ValueError:
        pass
    prefix = id_or_prefix.strip().lower()
    hex_digits = prefix.replace("-", "")
    if not hex_digits or not set(hex_digits) <= HEX_DIGITS:
        raise ClientError(f"{id_or_prefix!r} is not a {kind} id nor the start of one (hex digits)")
    matches = ids_starting(hex_digits)
    if not matches:
        raise ApiError(404, "not_found", f"no {kind} id starts with {prefix!r}")
    if len(matches) > 1:
        raise AmbiguousJobId(prefix, [str(found) for found in matches], kind=kind)
    return matches[0]
