"""The id a user typed: a whole id, or any unique start of one, like git's hashes.

The CLI and the jobs table show 8 hex digits of an id, and a user pastes what they see into
a URL, a compare link or a command: every place that takes the id of a job or a study takes
such a start too. A start shared by several ids is refused with some of them (409), one
shared by none is an unknown id (404), and only the caller's team's ids count, so another
team's ids are never hinted at. The lookup is a range scan of the primary key.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute, Session

from archsearch.jobs.domain.errors import AmbiguousId, NotFound

MIN_PREFIX = 4  # as git: shorter starts name too many ids to be meant
CANDIDATES_SHOWN = 10
_PREFIX = re.compile(r"[0-9a-fA-F-]+")


def whole_id(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def id_range(prefix: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The first and last id starting with `prefix` (hex digits): a range scan of the
    primary key on both databases (uuids order as their hex digits on PostgreSQL and in
    SQLite's text)."""
    digits = prefix.replace("-", "").lower()
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


def is_prefix(text: str) -> bool:
    digits = text.replace("-", "")
    return bool(_PREFIX.fullmatch(text)) and MIN_PREFIX <= len(digits) < 32


def resolve(
    session: Session,
    id_column: InstrumentedAttribute[Any],
    team_column: InstrumentedAttribute[Any],
    text: str,
    team_id: uuid.UUID | None,
    noun: str,
) -> uuid.UUID:
    """The one id of the caller's team (`team_id` None: any team) that `text` names."""
    found = whole_id(text)
    if found is not None:
        return found
    if not is_prefix(text):
        raise NotFound(f"no {noun} {text}")
    query = select(id_column).where(id_column.between(*id_range(text)))
    if team_id is not None:
        query = query.where(team_column == team_id)
    ids = list(session.scalars(query.order_by(id_column).limit(CANDIDATES_SHOWN + 1)))
    if not ids:
        raise NotFound(f"no {noun} {text}")
    if len(ids) > 1:
        shown = [str(i) for i in ids[:CANDIDATES_SHOWN]]
        more = ", ..." if len(ids) > CANDIDATES_SHOWN else ""
        message = f"{text} starts several {noun} ids: {', '.join(shown)}{more}; give more digits"
        raise AmbiguousId(message, shown)
    return uuid.UUID(str(ids[0]))
