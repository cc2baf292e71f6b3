"""Engine and session factory for PostgreSQL (team mode) or SQLite (embedded mode)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import Session, sessionmaker

# What a request meets while the database is down or restarting: no connection (refused,
# reset, timed out), a pooled one found dead, or no free slot in the pool. All of them pass
# once the database is back: the API answers 503 with Retry-After, never 500. The pool
# needs no pre-ping for that: SQLAlchemy invalidates it on the first dead connection.
DATABASE_UNAVAILABLE: tuple[type[Exception], ...] = (
    exc.OperationalError,
    exc.InterfaceError,
    exc.TimeoutError,
)
# What the database refuses to store (a NUL in a text value, a number out of its column's
# range): the caller's input, never the server's fault.
DATABASE_REFUSED_INPUT: tuple[type[Exception], ...] = (exc.DataError,)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the API read while the local runner writes; foreign keys are off by default.
    # synchronous=NORMAL, SQLite's advice for WAL: a commit no longer waits for an fsync
    # (a running job commits its progress twice a second), and the database stays
    # consistent. A killed process loses nothing; only a power cut may undo the last commits.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    # No pre-ping: it costs a round trip per request; a connection found dead raises once,
    # SQLAlchemy then invalidates the pool, and callers retry (the worker task does).
    return create_engine(url, pool_recycle=1800, pool_size=10, max_overflow=20)


def make_async_reader(url: str) -> AsyncEngine:
    """An autocommit async engine for the API's reads: no thread hop, no BEGIN/ROLLBACK.

    Handlers run the same repository functions on it through `AsyncSession.run_sync`.
    """
    if url.startswith("sqlite:///"):
        url = "sqlite+aiosqlite:///" + url.removeprefix("sqlite:///")
    elif url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    # Autocommit leaves no transaction to reset, so returning a connection costs nothing.
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT", pool_reset_on_return=None)
    if url.startswith("sqlite"):
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commits on success, rolls back on error."""
    with factory() as session, session.begin():
        yield session


@contextmanager
def single_statement(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session for work that PostgreSQL does in one statement, run in autocommit: the
    statement is its own transaction, with no BEGIN and no COMMIT round trip, which cost a
    one-row write as much server CPU as the write itself (and PgBouncer a pooled connection
    for three round trips instead of one). On SQLite, where the same work may take two
    statements, an ordinary transaction."""
    engine = factory.kw["bind"]
    if engine.dialect.name != "postgresql":
        with transaction(factory) as session:
            yield session
        return
    with engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT")
        with factory(bind=connection) as session:
            yield session


def database_reachable(session: Session) -> bool:
    """Whether the database answers a trivial query (the readiness check)."""
    try:
        session.execute(text("SELECT 1"))
        return True
    except Exception:  # any database failure means "not ready"
        return False
