"""Timestamps read back with their zone on SQLite (which stores them naive) as on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select

from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade


def test_sqlite_timestamps_come_back_in_utc(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'base.db'}"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    with transaction(sessions) as session:
        job_id = repository.create_job(session, "train", {"method": "train"}, None).id
    with sessions() as session:
        created = session.scalars(select(Job.created_at).where(Job.id == job_id)).one()
        row = repository.read_job_row(session, job_id)
    engine.dispose()
    assert created.tzinfo is UTC and row.created_at.tzinfo is UTC
    assert abs((datetime.now(UTC) - created).total_seconds()) < 60
