"""A fixed study's driver between its jobs: nothing to do while a job is open, and ended by
the call that finds every job done (on SQLite; the service tests run it on PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from archsearch.jobs.domain.studies import repository
from archsearch.jobs.domain.studies.service import advance_study
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.db import make_engine, make_session_factory
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus


@pytest.fixture()
def session(tmp_path: Path) -> Session:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    return make_session_factory(make_engine(url))()


def fixed_study(session: Session, statuses: list[JobStatus]) -> tuple[Study, list[Job]]:
    study = repository.new_study(
        name="fixed", dataset={"name": "digits"}, base_spec={}, budget=None, seeds=[0], config={}
    )
    session.add(study)
    jobs = [Job(method="train", spec={}, status=status) for status in statuses]
    for job in jobs:
        repository.tag_job(job, study.id, "a")
    session.add_all(jobs)
    session.commit()
    return study, jobs


def test_a_job_still_running_leaves_the_study_running(session: Session) -> None:
    study, _ = fixed_study(session, [JobStatus.succeeded, JobStatus.running])
    assert repository.fixed_with_open_jobs(session, study.id)

    step = advance_study(session, Settings(), study.id)
    session.commit()

    assert not step.ended and not step.new_jobs
    assert (study.status, study.finished_at) == ("running", None)


def test_the_last_job_done_ends_the_study_once(session: Session) -> None:
    study, (_, last) = fixed_study(session, [JobStatus.succeeded, JobStatus.running])
    last.status = JobStatus.failed
    session.commit()
    assert not repository.fixed_with_open_jobs(session, study.id)

    first = advance_study(session, Settings(), study.id)
    session.commit()
    again = advance_study(session, Settings(), study.id)

    assert first.ended and not again.ended
    assert study.status == "finished" and study.finished_at is not None
