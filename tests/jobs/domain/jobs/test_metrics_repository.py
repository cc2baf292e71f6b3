"""The job figures of /metrics computed in SQL, on SQLite (embedded); the service test
checks the same figures on PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import metrics_repository as figures
from archsearch.jobs.domain.tables import Job, JobEvent
from archsearch.jobs.platform.db import make_engine, make_session_factory
from archsearch.jobs.platform.migrate import upgrade
from archsearch.schemas.jobs import JobStatus


@pytest.fixture()
def session(tmp_path: Path) -> Session:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    return make_session_factory(make_engine(url))()


def finished(method: str, status: JobStatus, waited: float, ran: float) -> Job:
    created = utcnow() - timedelta(hours=1)
    started = created + timedelta(seconds=waited)
    return Job(
        method=method,
        spec={},
        status=status,
        created_at=created,
        started_at=started,
        finished_at=started + timedelta(seconds=ran),
    )


def test_histograms_counts_and_failure_classes(session: Session) -> None:
    session.add_all(
        [
            finished("train", JobStatus.succeeded, waited=0.2, ran=2.0),
            finished("train", JobStatus.failed, waited=3.0, ran=30.0),
            finished("prune", JobStatus.succeeded, waited=0.2, ran=0.5),
            Job(method="train", spec={}, status=JobStatus.queued, device="cpu"),
        ]
    )
    session.flush()
    failed = session.query(Job).filter(Job.status == JobStatus.failed).one()
    session.add(
        JobEvent(job_id=failed.id, from_status="running", to_status="failed", reason="crashed")
    )
    session.commit()

    runs = {h.label: h for h in figures.run_seconds_by_method(session, (1.0, 5.0, 60.0))}
    assert runs["train"].bucket_counts == [0, 1, 2, 2] and runs["train"].count == 2
    assert runs["train"].total == pytest.approx(32.0, abs=1e-3)
    assert runs["prune"].bucket_counts == [1, 1, 1, 1]
    claims = {h.label: h for h in figures.claim_seconds_by_method(session, (1.0,))}
    assert claims["train"].bucket_counts == [1, 2] and claims["train"].total == pytest.approx(
        3.2, abs=1e-3
    )

    counts = set(figures.jobs_by_status_and_method(session))
    assert {("succeeded", "train", 1), ("failed", "train", 1), ("queued", "train", 1)} <= counts
    queued = figures.queued_by_device(session)
    assert queued["cpu"][0] == 1 and (utcnow() - queued["cpu"][1]).total_seconds() < 60
    assert figures.failures_by_reason(session) == {"crashed": 1}
