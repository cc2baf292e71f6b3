"""The scheduler tick's queries on PostgreSQL, whose cost must not grow with the queue or the
fleet: they answer as the plain forms they replaced (a team's weekly device-seconds as the
Python sum over its attempts; the devices whose jobs waited long as a scan of the queue)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from random import Random

import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as accounts
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import queue_repository as queue
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.schemas.jobs import JobStatus

pytestmark = pytest.mark.service


@pytest.fixture
def session(sessions: sessionmaker[Session]) -> Iterator[Session]:
    with sessions() as session:
        yield session
        session.rollback()


def test_weekly_seconds_summed_in_sql_equal_the_python_sum(session: Session) -> None:
    rng, end = Random(7), utcnow()
    teams = [accounts.create_team(session, f"tick-{uuid.uuid4().hex[:6]}", None) for _ in range(3)]
    for _ in range(60):
        team = rng.choice(teams)
        job = jobs.create_job(session, "train", {}, None, jobs.Placement(team_id=team.id))
        job.status = JobStatus.succeeded
        started = end - timedelta(hours=rng.uniform(0, 240))  # some before the week
        seen = started + timedelta(hours=rng.uniform(0, 30))  # some past `end`
        session.add(
            JobAttempt(
                job_id=job.id, attempt=1, team_id=team.id, method="train", device="cpu",
                worker="w", started_at=started, last_seen_at=seen, seconds=0,
            )
        )  # fmt: skip
    session.flush()
    start, ids = end - quota.WINDOW, [team.id for team in teams]
    summed = quota.used_seconds_by_team(session, ids, start, end)
    for team_id in ids:
        assert summed.get(team_id, 0.0) == pytest.approx(
            quota.used_seconds(session, team_id, start, end), abs=1e-3
        )


def test_devices_waiting_long_are_found_by_one_probe_each(session: Session) -> None:
    now = utcnow()
    session.query(Job).filter(Job.status == JobStatus.queued).delete()  # in this transaction
    for device, age in (("cpu", 120), ("cuda", 5), ("auto", 300)):
        job = jobs.create_job(session, "train", {}, None, jobs.Placement(device=device))
        job.created_at = now - timedelta(seconds=age)
    session.flush()
    assert queue.devices_waiting_since(session, 60) == {"cpu", "auto"}
    assert queue.devices_waiting_since(session, 1) == {"cpu", "cuda", "auto"}
