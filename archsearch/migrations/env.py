"""Alembic environment: targets every table of the domain (`jobs.domain.metadata`)."""

from __future__ import annotations

from alembic import context

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
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,  # SQLite needs batch mode to alter tables
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
