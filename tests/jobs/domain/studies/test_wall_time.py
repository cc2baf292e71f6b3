"""A study's dry run estimates its wall time from the device seconds this server measured
for past succeeded jobs of the same method and dataset, per training sample, with the
fastest and slowest rates as its range; "no measurement yet" when there is none."""

from __future__ import annotations

import statistics
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.service import LOCAL_USER
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.datasets import catalog
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.jobs.states import transition
from archsearch.jobs.domain.studies.planning import plan_study
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.jobs.platform.services import Services
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.studies import StudyCreate
from archsearch.specs import DatasetRef, parse_job_spec
from archsearch.specs.budget import planned_steps

DIGITS = {"name": "digits"}


def ran(session: Session, spec: dict[str, object], seconds: float, device: str = "cpu") -> None:
    """A succeeded job of `spec` whose one run held a `device` for `seconds`."""
    job = jobs.create_job(session, str(spec["method"]), spec, None)
    transition(job, JobStatus.running, "started", "w")
    transition(job, JobStatus.succeeded, "done", "w")
    session.flush()
    # The running transition opened the run's row; the test says how long it held what.
    (attempt,) = session.scalars(select(JobAttempt).where(JobAttempt.job_id == job.id))
    attempt.started_at = utcnow() - timedelta(seconds=seconds)
    attempt.seconds, attempt.device = seconds, device


def samples(session: Session, services: Services, spec: dict[str, object]) -> int:
    facts = catalog.resolve(session, services.settings, DatasetRef(name="digits"))
    parsed = parse_job_spec(spec)
    steps = planned_steps(parsed, facts.train_size, facts.num_classes)
    return steps * parsed.training.batch_size


def test_minutes_come_from_the_measured_rate_of_the_same_method_and_dataset(
    services: Services,
) -> None:
    two_epochs = {"method": "train", "dataset": DIGITS, "training": {"epochs": 2}}
    four_epochs = {"method": "train", "dataset": DIGITS, "training": {"epochs": 4}}
    with services.sessions() as session, session.begin():
        ran(session, two_epochs, 30.0)
        ran(session, four_epochs, 40.0)
        ran(session, two_epochs, 90.0)
        ran(session, {**two_epochs, "dataset": {"name": "mnist"}}, 5000.0)  # another dataset
        ran(session, two_epochs, 1.0, device="cuda")  # fewer measurements than the cpu's
        rates = [
            30.0 / samples(session, services, two_epochs),
            40.0 / samples(session, services, four_epochs),
            90.0 / samples(session, services, two_epochs),
        ]
        per_job = samples(session, services, {**two_epochs, "training": {"epochs": 3}})
    study = StudyCreate.model_validate(
        {
            "name": "s",
            "dataset": DIGITS,
            "base": {"method": "train", "training": {"epochs": 3}},
            "arms": [{"label": "t", "spec": {}}, {"label": "p", "spec": {"method": "prune"}}],
            "seeds": [0, 1],
        }
    )
    with services.sessions() as session:
        plan = plan_study(session, services.settings, study, LOCAL_USER)
    trained, pruned = plan.arms
    assert trained.training_samples == per_job
    estimate = trained.wall_time
    assert estimate is not None and estimate.device == "cpu" and estimate.measured_jobs == 3
    assert estimate.minutes == per_job * statistics.median(rates) / 60
    assert estimate.minutes_low == per_job * min(rates) / 60
    assert estimate.minutes_high == per_job * max(rates) / 60
    assert pruned.wall_time is not None and pruned.wall_time.minutes is None
    assert pruned.wall_time.basis.startswith("no measurement yet")
    # The study's own estimate waits for every arm's.
    assert plan.wall_time is not None and plan.wall_time.minutes is None
    assert "p" in plan.wall_time.basis


def test_the_study_sums_its_jobs_one_after_another(services: Services) -> None:
    spec = {"method": "train", "dataset": DIGITS, "training": {"epochs": 1}}
    with services.sessions() as session, session.begin():
        ran(session, spec, 12.0)
    study = StudyCreate.model_validate(
        {"name": "s", "dataset": DIGITS, "base": spec, "seeds": [0, 1, 2]}
    )
    with services.sessions() as session:
        plan = plan_study(session, services.settings, study, LOCAL_USER)
    (arm,) = plan.arms
    assert arm.wall_time is not None and arm.wall_time.minutes is not None
    assert arm.wall_time.minutes == arm.wall_time.minutes_low == pytest.approx(12.0 / 60)
    assert "no spread yet" in arm.wall_time.basis
    assert plan.wall_time is not None and plan.wall_time.minutes == pytest.approx(3 * 12.0 / 60)
