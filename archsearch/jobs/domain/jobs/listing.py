"""Listing jobs as a runs table: filters, a sort key, and cursor paging that stays correct
under any sort.

A page is a keyset walk on (sort key, id): the cursor carries the sort, the key of the last
row and its id, so the next page starts exactly after it whatever was inserted or finished
in between. A job without the key (a queued job has no test accuracy yet) sorts last in
both directions: the key is coalesced to a sentinel beyond every real value. Besides the
fixed keys, a sort may name any metric or spec field (`-metrics.test_accuracy`,
`spec.training.optimizer.lr`) and filters may compare them (`columns.py`).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Float, Select, cast, func, select, tuple_
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from archsearch.jobs.domain import ids
from archsearch.jobs.domain.errors import InvalidCursor
from archsearch.jobs.domain.ids import id_range
from archsearch.jobs.domain.jobs.columns import (
    Condition,
    FieldKey,
    InvalidColumn,
    condition_clause,
    parse_key,
    sort_keys,
)
from archsearch.jobs.domain.tables import Job, JobTag
from archsearch.schemas.jobs import JobStatus

# What `sort` may name (a leading `-` sorts descending); the default is newest first.
SORT_KEYS = ("created_at", "test_accuracy", "parameters", "duration", "status", "method")
DEFAULT_SORT = "-created_at"
_MISSING_LOW, _MISSING_HIGH = -1e300, 1e300  # sentinels: a missing key sorts last


@dataclass(frozen=True)
class JobFilters:
    """Which jobs a listing keeps (every filter given must hold)."""

    statuses: Sequence[JobStatus] = ()
    methods: Sequence[str] = ()
    team_id: uuid.UUID | None = None
    id_prefix: str | None = None
    tags: Sequence[str] = ()
    owner_id: uuid.UUID | None = None
    dataset: str | None = None
    study_id: uuid.UUID | None = None
    include_study_jobs: bool = True
    conditions: Sequence[Condition] = ()  # e.g. metrics.test_accuracy > 0.9


def parse_sort(sort: str) -> tuple[str | FieldKey, bool]:
    """(key, descending) of a `sort` value: `-test_accuracy`, `spec.training.optimizer.lr`."""
    descending = sort.startswith("-")
    key = sort.removeprefix("-")
    if key in SORT_KEYS:
        return key, descending
    if key.startswith(("metrics.", "spec.")):
        return parse_key(key, "query.sort"), descending
    raise InvalidColumn(
        f"unknown sort key {key!r}; one of {', '.join(SORT_KEYS)}, metrics.<name> or "
        "spec.<path>, with a leading - for descending",
        "query.sort",
    )


def _duration(session: Session) -> ColumnElement[Any]:
    """Seconds from start to end of a finished run (NULL while it has not ended)."""
    seconds: ColumnElement[Any]
    if session.get_bind().dialect.name == "postgresql":
        seconds = func.extract("epoch", Job.finished_at - Job.started_at)
    else:
        seconds = (func.julianday(Job.finished_at) - func.julianday(Job.started_at)) * 86400.0
    return cast(seconds, Float)


def sort_expressions(
    session: Session, key: str | FieldKey, descending: bool
) -> list[ColumnElement[Any]]:
    """The columns a page is ordered by, before the id that breaks ties."""
    if isinstance(key, FieldKey):
        return sort_keys(session, key, descending)
    return [sort_expression(session, key, descending)]


def sort_expression(session: Session, key: str, descending: bool) -> ColumnElement[Any]:
    if key in ("created_at", "status", "method"):
        column: ColumnElement[Any] = getattr(Job, key)
        return column
    if key == "duration":
        value = _duration(session)
    else:
        value = Job.latest_metrics[key].as_float()
    return func.coalesce(value, _MISSING_LOW if descending else _MISSING_HIGH)


def encode_cursor(sort: str, key: Any, job_id: uuid.UUID) -> str:
    value = key.isoformat() if isinstance(key, datetime) else key
    raw = json.dumps([sort, value, job_id.hex]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str) -> tuple[Any, uuid.UUID]:
    """The (key, id) after which the page starts; refuses a cursor of another sort."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        cursor_sort, value, job_hex = json.loads(raw)
        if cursor_sort != sort:
            raise InvalidCursor(
                f"cursor belongs to sort={cursor_sort}, not sort={sort}; start without it"
            )
        key = datetime.fromisoformat(value) if sort.lstrip("-") == "created_at" else value
        if isinstance(key, dict):
            raise TypeError("a key is a value or a list of values")
        return key, uuid.UUID(hex=job_hex)
    except (ValueError, TypeError) as exc:
        raise InvalidCursor("cursor is not one this server issued; start without it") from exc


def _filtered(query: Select[Any], filters: JobFilters) -> Select[Any]:
    if filters.team_id is not None:
        query = query.where(Job.team_id == filters.team_id)
    if filters.id_prefix:
        query = query.where(Job.id.between(*id_range(filters.id_prefix)))
    if filters.statuses:
        query = query.where(Job.status.in_(filters.statuses))
    if filters.methods:
        query = query.where(Job.method.in_(filters.methods))
    for tag in filters.tags:
        query = query.where(Job.id.in_(select(JobTag.job_id).where(JobTag.tag == tag)))
    if filters.owner_id is not None:
        query = query.where(Job.owner_id == filters.owner_id)
    if filters.study_id is not None:
        query = query.where(Job.study_id == filters.study_id)
    if not filters.include_study_jobs:
        query = query.where(Job.study_id.is_(None))
    if filters.dataset:
        ref, wanted = Job.spec["dataset"], filters.dataset
        query = query.where((ref["name"].as_string() == wanted) | (ref["id"].as_string() == wanted))
    return query


def _compared(session: Session, query: Select[Any], filters: JobFilters) -> Select[Any]:
    for condition in filters.conditions:
        query = query.where(condition_clause(session, condition))
    return query


def list_jobs(
    session: Session,
    filters: JobFilters = JobFilters(),
    *,
    sort: str = DEFAULT_SORT,
    limit: int = 50,
    cursor: str | None = None,
) -> tuple[list[Job], str | None]:
    """One page of jobs in `sort` order (ties by id), and the cursor of the next page (None
    at the end). Raises InvalidColumn for an unknown sort key, InvalidCursor for a bad
    cursor."""
    key_name, descending = parse_sort(sort)
    keys = [
        k.label(f"sort_key_{i}")
        for i, k in enumerate(sort_expressions(session, key_name, descending))
    ]
    order = [k.desc() if descending else k.asc() for k in (*keys, Job.id)]
    query = _filtered(select(Job, *keys), filters)
    query = _compared(session, query, filters).order_by(*order).limit(limit + 1)
    if cursor:
        after = tuple_(*keys, Job.id)
        bound = tuple_(*_cursor_values(decode_cursor(cursor, sort), len(keys)))
        query = query.where(after < bound if descending else after > bound)
    rows = session.execute(query).all()
    next_cursor = None
    if len(rows) > limit:
        last_job, *last_keys = rows[limit - 1]
        last_key = last_keys[0] if len(last_keys) == 1 else list(last_keys)
        next_cursor = encode_cursor(sort, last_key, last_job.id)
    return [row[0] for row in rows[:limit]], next_cursor


def _cursor_values(decoded: tuple[Any, uuid.UUID], n_keys: int) -> list[Any]:
    """The cursor's key values and id, as many keys as the sort has."""
    key, job_id = decoded
    values = key if n_keys > 1 else [key]
    shaped = isinstance(values, list) and len(values) == n_keys
    shaped = shaped and not any(isinstance(v, list | dict) for v in values)
    if not shaped or (n_keys > 1 and not _number_and_text(values)):
        raise InvalidCursor("cursor is not one this server issued; start without it")
    return [*values, job_id]


def resolve_job_id(session: Session, text: str, team_id: uuid.UUID | None) -> uuid.UUID:
    """The job of the caller's team that `text`, a whole id or a unique start of one, names."""
    return ids.resolve(session, Job.id, Job.team_id, text, team_id, "job")


def _number_and_text(values: list[Any]) -> bool:
    number, text = values
    return (
        isinstance(number, int | float) and not isinstance(number, bool) and isinstance(text, str)
    )
