"""Schema migrations (Alembic, in `migrations/`) and the start-up check that the database
is not behind the code."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine


class SchemaBehind(Exception):
    """The database schema is older than the code: an operator must run the migrations."""


MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Alembic's ini interpolation treats '%' specially; URLs may contain escaped characters.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def head_revision() -> str | None:
    return ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def ensure_schema_current(engine: Engine) -> None:
    """Refuse to serve or work against a database whose schema is behind the code."""
    current, head = current_revision(engine), head_revision()
    if current != head:
        raise SchemaBehind(
            f"the database schema is at revision {current or '(empty)'} but this archsearch "
            f"needs {head}; run `archsearch db upgrade` (with the same ARCHSEARCH_DATABASE_URL)"
        )
