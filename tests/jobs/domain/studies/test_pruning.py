"""Study pruners on SQLite: a trial reports each epoch to Optuna's pruner and is told to stop
when it trails (median, successive halving); a resumed job finds its own trial again; an
ended job's trial is settled once; an adaptive study's sampler learns a pruned trial was
PRUNED, not failed."""

from __future__ import annotations

import uuid

import optuna
from optuna.trial import TrialState
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.service import LOCAL_USER
from archsearch.jobs.domain.jobs import repository as jobs_repository
from archsearch.jobs.domain.studies import pruning, service
from archsearch.jobs.domain.studies import repository as studies_repository
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.studies import StudyCreate
from tests.jobs.domain.studies.test_adaptive import REQUEST, optuna_trials

MEDIAN = {"pruner": {"name": "median", "startup_trials": 2, "warmup_epochs": 1}}
ASHA = {"pruner": {"name": "asha", "min_epochs": 1, "reduction_factor": 2}}


def run_trial(
    settings: Settings, study_id: uuid.UUID, config: dict[str, object], curve: list[float]
) -> int | None:
    """Report `curve` epoch by epoch; the epoch the pruner stopped it at, or None."""
    ask = pruning.TrialPruning(uuid.uuid4(), study_id, config, settings.resolved_database_url)
    for epoch, value in enumerate(curve, start=1):
        if ask(epoch, value):
            ask.ostudy.tell(ask.trial(), state=TrialState.PRUNED)
            return epoch
    ask.ostudy.tell(ask.trial(), curve[-1])
    return None


def test_the_median_pruner_stops_a_trailing_trial_after_its_startup(settings: Settings) -> None:
    study_id = uuid.uuid4()
    good = [0.5, 0.7, 0.8, 0.9]
    assert run_trial(settings, study_id, MEDIAN, [0.1, 0.1, 0.1, 0.1]) is None  # startup
    assert run_trial(settings, study_id, MEDIAN, good) is None
    assert run_trial(settings, study_id, MEDIAN, good) is None
    assert run_trial(settings, study_id, MEDIAN, [0.2, 0.2, 0.2, 0.2]) == 1
    assert run_trial(settings, study_id, MEDIAN, [0.6, 0.9, 0.9, 0.9]) is None


def test_successive_halving_keeps_the_better_half_at_each_rung(settings: Settings) -> None:
    study_id = uuid.uuid4()
    assert run_trial(settings, study_id, ASHA, [0.8, 0.9, 0.9, 0.9]) is None
    assert run_trial(settings, study_id, ASHA, [0.1, 0.1, 0.1, 0.1]) == 1


def test_a_resumed_job_reports_to_the_same_trial(settings: Settings) -> None:
    study_id, job_id = uuid.uuid4(), uuid.uuid4()
    url = settings.resolved_database_url
    first = pruning.TrialPruning(job_id, study_id, MEDIAN, url)
    first(1, 0.4)
    resumed = pruning.TrialPruning(job_id, study_id, MEDIAN, url)  # a new attempt, a new process
    resumed(2, 0.5)
    (trial,) = resumed.ostudy.get_trials(deepcopy=False)
    assert trial.intermediate_values == {1: 0.4, 2: 0.5}


def test_an_ended_job_settles_its_trial_once(settings: Settings) -> None:
    study_id = uuid.uuid4()
    url = settings.resolved_database_url
    jobs = {
        status: Job(id=uuid.uuid4(), status=status, study_id=study_id, latest_metrics={})
        for status in (JobStatus.succeeded, JobStatus.pruned, JobStatus.failed)
    }
    jobs[JobStatus.succeeded].latest_metrics = {"test_accuracy": 0.9}
    for job in jobs.values():
        pruning.TrialPruning(job.id, study_id, MEDIAN, url)(1, 0.5)
        pruning.settle_trial(job, MEDIAN, url)
        pruning.settle_trial(job, MEDIAN, url)  # the job's end seen twice: no error
    ostudy = pruning.open_pruning_study(study_id, optuna.pruners.NopPruner(), url)
    states = {t.user_attrs["job_id"]: t.state for t in ostudy.get_trials(deepcopy=False)}
    assert states == {
        str(jobs[JobStatus.succeeded].id): TrialState.COMPLETE,
        str(jobs[JobStatus.pruned].id): TrialState.PRUNED,
        str(jobs[JobStatus.failed].id): TrialState.FAIL,
    }


def test_an_adaptive_study_tells_its_sampler_a_pruned_trial(
    settings: Settings, session: Session
) -> None:
    request = StudyCreate.model_validate({**REQUEST, "pruner": "median"})
    assert request.pruner is not None and request.pruner.name == "median"
    study = service.new_study_row(request, LOCAL_USER, None, [])
    session.add(study)
    session.commit()
    assert service.has_pruner(study.config)
    service.advance_study(session, settings, study.id)
    session.commit()
    job = studies_repository.study_jobs(session, study.id)[0]
    job.status = JobStatus.running
    jobs_repository.finish_job(session, job.id, JobStatus.pruned, "pruned after epoch 1")
    session.commit()
    service.advance_study(session, settings, study.id)
    session.commit()
    assert optuna_trials(settings, study)[job.study_trial or 0].state == TrialState.PRUNED
