"""A running job's flush (progress, the metric rows reported since the last one, the cancel
flag read back) is one statement on PostgreSQL, sent in autocommit: no BEGIN and no COMMIT
beside it. On SQLite the same call is an ordinary transaction of two statements."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import event, select, update
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.tables import Job, Metric
from archsearch.jobs.platform.db import (
    make_engine,
    make_session_factory,
    single_statement,
    transaction,
)
from archsearch.jobs.platform.migrate import upgrade

ROWS = [(10, "train_loss", 0.9), (10, "train_loss", 0.8), (20, "density", 0.5)]


def _new_job(sessions: sessionmaker[Session]) -> uuid.UUID:
    with transaction(sessions) as session:
        return repository.create_job(session, "train", {"method": "train"}, None).id


@pytest.fixture()
def sqlite_sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    yield make_session_factory(engine)
    engine.dispose()


@contextmanager
def sent_sql(sessions: sessionmaker[Session]) -> Iterator[list[str]]:
    """Every SQL text the engine sends, BEGIN and COMMIT included, while the caller runs."""
    engine = sessions.kw["bind"]
    sent: list[str] = []

    def statement(conn, cursor, text, params, context, many) -> None:  # type: ignore[no-untyped-def]
        sent.append(text.split()[0].upper())

    def autocommit(conn) -> bool:  # type: ignore[no-untyped-def]
        # psycopg's flag; Python 3.11's sqlite3 has none (and begins transactions itself).
        return bool(getattr(conn.connection.dbapi_connection, "autocommit", False))

    def begin(conn) -> None:  # type: ignore[no-untyped-def]
        if not autocommit(conn):
            sent.append("BEGIN")

    def commit(conn) -> None:  # type: ignore[no-untyped-def]
        if not autocommit(conn):
            sent.append("COMMIT")

    listeners = (("before_cursor_execute", statement), ("begin", begin), ("commit", commit))
    for name, listener in listeners:
        event.listen(engine, name, listener)
    try:
        yield sent
    finally:
        for name, listener in listeners:
            event.remove(engine, name, listener)


def _flush(sessions: sessionmaker[Session], job_id: uuid.UUID) -> bool:
    with single_statement(sessions) as session:
        return repository.record_progress(session, job_id, 20, 100, {"loss": 0.5}, ROWS)


def _stored(sessions: sessionmaker[Session], job_id: uuid.UUID) -> tuple[int, dict[str, float]]:
    with sessions() as session:
        step = session.scalar(select(Job.step).where(Job.id == job_id))
        rows = session.execute(select(Metric).where(Metric.job_id == job_id)).scalars()
        return step or 0, {f"{m.name}@{m.step}": m.value for m in rows}


def test_a_flush_is_one_autocommitted_statement_on_postgresql(
    sessions: sessionmaker[Session],
) -> None:
    job_id = _new_job(sessions)
    with sent_sql(sessions) as sent:
        assert _flush(sessions, job_id) is False
    assert sent == ["WITH"], f"a flush sent {sent}"
    # Written, committed, and the same (step, name) twice in one flush kept once, the last.
    assert _stored(sessions, job_id) == (20, {"train_loss@10": 0.8, "density@20": 0.5})
    with transaction(sessions) as session:
        session.execute(update(Job).where(Job.id == job_id).values(cancel_requested=True))
    assert _flush(sessions, job_id) is True  # the cancel flag comes back with the write


def test_a_flush_without_metric_rows_is_the_update_alone(
    sessions: sessionmaker[Session],
) -> None:
    job_id = _new_job(sessions)
    with sent_sql(sessions) as sent, single_statement(sessions) as session:
        repository.record_progress(session, job_id, 5, 100, {})
    assert sent == ["UPDATE"]
    assert _stored(sessions, job_id) == (5, {})


def test_a_flush_on_sqlite_is_one_transaction(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    job_id = _new_job(sqlite_sessions)
    with sent_sql(sqlite_sessions) as sent:
        _flush(sqlite_sessions, job_id)
    assert sent == ["BEGIN", "INSERT", "UPDATE", "COMMIT"]
    assert _stored(sqlite_sessions, job_id) == (20, {"train_loss@10": 0.8, "density@20": 0.5})
