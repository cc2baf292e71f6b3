"""The durable driver on SQLite: asks up to `parallel`, tells finished trials, gives an
orphan trial (asked, then a crash before its job was stored) its job instead of a new ask,
and ends the study after `n_trials`."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.service import LOCAL_USER
from archsearch.jobs.domain.jobs import repository as jobs_repository
from archsearch.jobs.domain.studies import adaptive, service
from archsearch.jobs.domain.studies import repository as studies_repository
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.studies import StudyCreate

REQUEST = {
    "name": "tpe",
    "dataset": {"name": "digits"},
    "base": {"method": "prune", "model": {"name": "mlp", "hidden": [16]}},
    "sampler": "tpe",
    "space": {"density": {"low": 0.05, "high": 0.5, "log": True}},
    "n_trials": 4,
    "parallel": 2,
    "seeds": [3],
}


def new_study(session: Session) -> Study:
    request = StudyCreate.model_validate(REQUEST)
    study = service.new_study_row(request, LOCAL_USER, None, [])
    session.add(study)
    session.commit()
    return study


def finish(session: Session, study: Study, accuracy: float) -> None:
    for job in studies_repository.study_jobs(session, study.id):
        if not JobStatus(job.status).terminal:
            job.status = JobStatus.running
            metrics = {"test_accuracy": accuracy, "parameters": 1000.0 * job.spec["density"]}
            jobs_repository.finish_job(
                session, job.id, JobStatus.succeeded, "done", metrics=metrics
            )
    session.commit()


def optuna_trials(settings: Settings, study: Study) -> list[optuna.trial.FrozenTrial]:
    loaded = optuna.load_study(
        study_name=f"archsearch-{study.id.hex}",
        storage=adaptive.storage(settings.resolved_database_url),
    )
    return loaded.get_trials(deepcopy=False)


def test_asks_up_to_parallel_then_tells_and_ends(settings: Settings, session: Session) -> None:
    study = new_study(session)
    first = service.advance_study(session, settings, study.id)
    session.commit()
    assert len(first.new_jobs) == 2 and not first.ended
    again = service.advance_study(session, settings, study.id)  # nothing ended: no new ask
    session.commit()
    assert again.new_jobs == [] and len(optuna_trials(settings, study)) == 2

    for accuracy in (0.8, 0.9):
        finish(session, study, accuracy)
        step = service.advance_study(session, settings, study.id)
        session.commit()
    assert step.ended and study.status == "finished" and study.trials_asked == 4
    jobs = studies_repository.study_jobs(session, study.id)
    assert sorted(job.study_trial for job in jobs) == [0, 1, 2, 3]  # type: ignore[type-var]
    assert {job.study_arm for job in jobs} == {f"trial-{n}" for n in range(4)}
    assert all(0.05 <= job.spec["density"] <= 0.5 for job in jobs)
    assert all(job.spec["training"]["seed"] == 3 for job in jobs)
    states = [t.state for t in optuna_trials(settings, study)]
    assert states == [TrialState.COMPLETE] * 4
    assert (
        Path(settings.resolved_database_url.removeprefix("sqlite:///"))
        .with_name("archsearch-optuna.db")
        .is_file()
    )  # Optuna's tables beside ours, never in our file


def test_an_orphan_trial_gets_its_job_and_no_new_ask(settings: Settings, session: Session) -> None:
    study = new_study(session)
    service.advance_study(session, settings, study.id)
    session.commit()
    finish(session, study, 0.7)
    # A crash after Optuna's ask and before our commit: the trial exists, its job does not.
    ostudy = adaptive.open_optuna_study(study, settings.resolved_database_url)
    orphan = ostudy.ask(fixed_distributions=adaptive.distributions(study.config["space"]))
    session.rollback()

    step = service.advance_study(session, settings, study.id)
    session.commit()
    trials = [job.study_trial for job in studies_repository.study_jobs(session, study.id)]
    assert orphan.number in trials and len(step.new_jobs) == 2  # the orphan, and one more
    assert len(optuna_trials(settings, study)) == 4 == len(set(trials))


def test_a_failed_job_fails_its_trial(settings: Settings, session: Session) -> None:
    study = new_study(session)
    service.advance_study(session, settings, study.id)
    session.commit()
    job = studies_repository.study_jobs(session, study.id)[0]
    job.status = JobStatus.running
    jobs_repository.finish_job(session, job.id, JobStatus.failed, "crashed", error="boom")
    session.commit()
    service.advance_study(session, settings, study.id)
    session.commit()
    assert optuna_trials(settings, study)[job.study_trial or 0].state == TrialState.FAIL


def test_the_sampler_is_told_validation_accuracy_never_test(
    settings: Settings, session: Session
) -> None:
    study = new_study(session)
    service.advance_study(session, settings, study.id)
    session.commit()
    job = studies_repository.study_jobs(session, study.id)[0]
    job.status = JobStatus.running
    metrics = {"test_accuracy": 0.99, "val_accuracy": 0.71, "parameters": 50.0}
    jobs_repository.finish_job(session, job.id, JobStatus.succeeded, "done", metrics=metrics)
    session.commit()
    service.advance_study(session, settings, study.id)
    session.commit()
    told = optuna_trials(settings, study)[job.study_trial or 0]
    assert told.state == TrialState.COMPLETE and told.values == [0.71, 50.0]
