"""A study's accuracy curves (what `curves.png` draws), read in one query for all its jobs:
each job's own test accuracy in step order, grouped by arm in the jobs' creation order, on
SQLite (embedded); the service test draws them on PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.studies import repository, summary
from archsearch.jobs.domain.tables import Job, Metric
from archsearch.jobs.platform.db import make_engine, make_session_factory
from archsearch.jobs.platform.migrate import upgrade
from archsearch.schemas.jobs import JobStatus


@pytest.fixture()
def session(tmp_path: Path) -> Session:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    return make_session_factory(make_engine(url))()


def study_with_jobs(session: Session, arms: list[str]) -> tuple[uuid.UUID, list[Job]]:
    study = repository.new_study(
        name="curves", dataset={"name": "digits"}, base_spec={}, budget=None, seeds=[0], config={}
    )
    session.add(study)
    start = utcnow()
    jobs = [
        Job(method="train", spec={}, status=JobStatus.succeeded, created_at=start + timedelta(i))
        for i in range(len(arms))
    ]
    for job, arm in zip(jobs, arms, strict=True):
        repository.tag_job(job, study.id, arm)
    session.add_all(jobs)
    session.flush()
    return study.id, jobs


def points(job: Job, name: str, values: dict[int, float]) -> list[Metric]:
    return [Metric(job_id=job.id, name=name, step=s, value=v) for s, v in values.items()]


def test_each_jobs_accuracy_in_step_order_by_arm(session: Session) -> None:
    study_id, (a0, b0, a1) = study_with_jobs(session, ["a", "b", "a"])
    _, (elsewhere,) = study_with_jobs(session, ["a"])  # another study's job
    session.add_all(
        points(a0, "test_accuracy", {20: 0.8, 10: 0.5})  # written out of step order
        + points(a0, "train_loss", {10: 1.0, 20: 0.4})
        + points(a1, "test_accuracy", {10: 0.6})
        + points(elsewhere, "test_accuracy", {10: 0.1})
    )  # b0 reported nothing
    session.commit()

    curves = summary.accuracy_curves(session, study_id)

    assert curves == {"a": [[(10, 0.5), (20, 0.8)], [(10, 0.6)]], "b": [[]]}


def test_a_study_without_jobs_has_no_curves(session: Session) -> None:
    study_id, _ = study_with_jobs(session, [])
    assert summary.accuracy_curves(session, study_id) == {}
