"""Study pruners on SQLite: a trial reports each epoch to Optuna's pruner and is told to stop
when it trails (median, successive halving); an arm is judged by its first seed, its other
seeds stopped with it (those not started never start); a resumed job finds its own trial
again; an ended job's trial is settled once; an adaptive study's sampler learns a pruned
trial was PRUNED, not failed."""

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
    settings: Settings,
    study_id: uuid.UUID,
    config: dict[str, object],
    curve: list[float],
    arm: pruning.Arm | None = None,
) -> int | None:
    """Report `curve` epoch by epoch; the epoch the pruner stopped it at, or None."""
    url = settings.resolved_database_url
    ask = pruning.TrialPruning(uuid.uuid4(), study_id, config, url, arm)
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


def test_an_arm_is_judged_by_its_first_seed_and_stopped_with_it(settings: Settings) -> None:
    study_id = uuid.uuid4()
    good = [0.5, 0.7, 0.8, 0.9]
    for _ in range(2):  # the median's startup
        assert run_trial(settings, study_id, MEDIAN, good) is None
    slow_second_seed = pruning.Arm("slow", first_seed=False)
    # A later seed trailing every epoch is not judged: the arm's first seed ran to the end.
    assert run_trial(settings, study_id, MEDIAN, good, pruning.Arm("slow", True)) is None
    assert run_trial(settings, study_id, MEDIAN, [0.1] * 4, slow_second_seed) is None

    url = settings.resolved_database_url
    hopeless, hopeless_later = pruning.Arm("hopeless", True), pruning.Arm("hopeless", False)
    second = pruning.TrialPruning(uuid.uuid4(), study_id, MEDIAN, url, hopeless_later)
    assert not second(1, 0.1)  # running beside its first seed, not judged
    assert run_trial(settings, study_id, MEDIAN, [0.2] * 4, hopeless) == 1
    assert second.arm_stopped_at() == 1 and second(2, 0.95)  # stopped with its arm
    third = pruning.TrialPruning(uuid.uuid4(), study_id, MEDIAN, url, hopeless_later)
    assert third(1, 0.95)  # a seed that started late stops at its first question
    assert run_trial(settings, study_id, MEDIAN, [0.1] * 4, slow_second_seed) is None


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


def test_a_pruned_first_seed_ends_its_arms_seeds_not_started(
    settings: Settings, session: Session
) -> None:
    study = studies_repository.new_study(
        name="fixed",
        dataset={"name": "digits"},
        base_spec={},
        budget=None,
        seeds=[3, 4, 5],
        config=MEDIAN,
    )
    session.add(study)

    def seed_job(arm: str, seed: int, status: JobStatus) -> Job:
        job = Job(method="train", spec={"training": {"seed": seed}}, status=status)
        studies_repository.tag_job(job, study.id, arm)
        session.add(job)
        return job

    first = seed_job("hopeless", 3, JobStatus.pruned)
    running = seed_job("hopeless", 4, JobStatus.running)
    queued = seed_job("hopeless", 5, JobStatus.queued)
    other_arm = seed_job("good", 3, JobStatus.queued)
    session.commit()
    assert service.is_first_seed(study, first) and not service.is_first_seed(study, running)

    service.settle_pruning_trial(session, settings, running)  # a later seed: nothing more
    assert queued.status is JobStatus.queued
    service.settle_pruning_trial(session, settings, first)
    session.commit()

    assert (queued.status, queued.started_at) == (JobStatus.pruned, None)
    assert queued.events[-1].reason == "not started: its arm's first seed (seed 3) was pruned"
    assert (running.status, other_arm.status) == (JobStatus.running, JobStatus.queued)
