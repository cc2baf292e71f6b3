"""Alembic environment: targets every table of the domain (`jobs.domain.metadata`)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from archsearch.jobs.domain.metadata import metadata
from archsearch.jobs.platform.db import make_engine

target_metadata = metadata


def run_migrations_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    assert url, "set sqlalchemy.url (archsearch passes ARCHSEARCH_DATABASE_URL)"
    engine = make_engine(url)
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            _enforce_foreign_keys(connection, False)
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,  # SQLite needs batch mode to alter tables
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        if sqlite:
            _check_foreign_keys(connection)
    engine.dispose()


def _enforce_foreign_keys(connection: Connection, on: bool) -> None:
    # SQLite alters a table by copying it and dropping the old one (batch mode); with foreign
    # keys enforced, that drop would cascade into every child table (a job's tags, attempts,
    # events). The pragma is a no-op inside a transaction, so it is set before one begins.
    connection.exec_driver_sql(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
    connection.commit()


def _check_foreign_keys(connection: Connection) -> None:
    """With enforcement off while the tables were copied, check what it would have."""
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
    _enforce_foreign_keys(connection, True)
    if broken:
        raise RuntimeError(f"the migration left rows with dangling foreign keys: {broken[:5]}")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
