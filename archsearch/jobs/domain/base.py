"""What every table of the domain shares: the declarative base, UTC timestamps, big ids.

A naming convention on the metadata keeps constraint names stable across migrations. The
tables themselves live with their room (`tables.py` for jobs, `accounts/tables.py`,
`datasets/tables.py`); `metadata.py` gathers them for Alembic.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, DateTime, Dialect, Integer, MetaData
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite returns naive datetimes; everything stored is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class UtcTimestamp(TypeDecorator[datetime]):
    """A timezone-aware column that reads back aware on every database.

    PostgreSQL returns `timestamptz` values with their zone, SQLite returns naive ones; both
    are UTC, so every row the domain hands out carries `tzinfo=UTC` and a response can
    print the zone without each caller remembering to convert.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


Timestamp = UtcTimestamp()

# BigInteger ids autoincrement on PostgreSQL; SQLite only autoincrements INTEGER keys.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
