"""Study use cases: submit (expand into jobs), read (aggregate), cancel, and advance.

A study's jobs go through the jobs' own path: each spec is validated as a submitted job
would be (dataset here, model fits its inputs), placed with the submitter's priority,
team and quota, and queued; the scheduler treats them like any other job. `advance` is
the durable driver (see `adaptive.py`): callers hold no state between calls.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from archsearch.core.errors import UserError
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.datasets import catalog
from archsearch.jobs.domain.datasets.catalog import DatasetFacts
from archsearch.jobs.domain.errors import UnknownUploadedDataset
from archsearch.jobs.domain.jobs import repository as jobs_repository
from archsearch.jobs.domain.jobs.repository import Placement
from archsearch.jobs.domain.jobs.service import placement_for, require_offered_device
from archsearch.jobs.domain.jobs.states import transition
from archsearch.jobs.domain.jobs.validation import validate_submission
from archsearch.jobs.domain.studies import expansion, preset
from archsearch.jobs.domain.studies import repository as studies_repository
from archsearch.jobs.domain.studies.expansion import InvalidStudy, PlannedJob
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.domain.webhooks import events
from archsearch.jobs.platform.broker import Enqueuer
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import PRIORITY_LEVELS, JobStatus
from archsearch.schemas.studies import KnobRange, StudyArm, StudyCreate, StudyStatus
from archsearch.specs import DatasetRef

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from archsearch.jobs.domain.studies import adaptive


@dataclass
class Advance:
    """What one `advance` did: jobs it created (to enqueue) and whether the study ended."""

    new_jobs: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    ended: bool = False


def dataset_facts(
    session: Session, settings: Settings, dataset: dict[str, Any], team_id: uuid.UUID | None
) -> DatasetFacts:
    try:
        ref = DatasetRef.model_validate(dataset)
    except ValueError as exc:
        raise InvalidStudy(f"dataset: {exc}", field="dataset") from None
    try:
        return catalog.resolve(session, settings, ref, team_id)
    except UnknownUploadedDataset as exc:
        raise InvalidStudy(str(exc), field="dataset.id") from None


def study_arms(request: StudyCreate, facts: DatasetFacts) -> list[StudyArm]:
    if request.preset == "best-small-model":
        densities = tuple(request.preset_densities or preset.DENSITIES)
        features = math.prod(facts.input_shape)
        return preset.best_small_model(features, facts.num_classes, densities)
    return request.arms or [StudyArm(label="base")]


def check_cap(count: int, settings: Settings) -> None:
    if count > settings.study_max_jobs:
        raise InvalidStudy(
            f"this study would create {count} jobs, over the cap of {settings.study_max_jobs} "
            "(ARCHSEARCH_STUDY_MAX_JOBS); use fewer arms, grid values, seeds or trials",
            field="arms",
        )


def plan_jobs(
    session: Session,
    settings: Settings,
    request: StudyCreate,
    facts: DatasetFacts,
    team_id: uuid.UUID | None,
) -> tuple[list[PlannedJob], int | None]:
    """Every job of a fixed study, fitted to the budget and validated (once per arm)."""
    arms = study_arms(request, facts)
    check_cap(expansion.planned_count(request, arms), settings)
    steps = expansion.budget_steps(request, facts.train_size, facts.num_classes)
    planned, checked = [], set()
    for job in expansion.expand(request, arms):
        if steps is not None:
            job = expansion.fit_budget(job, steps, facts.train_size, facts.num_classes)
        if job.arm not in checked:
            validate_planned(session, settings, job, team_id)
            checked.add(job.arm)
        planned.append(job)
    return planned, steps


def check_space(
    session: Session,
    settings: Settings,
    request: StudyCreate,
    facts: DatasetFacts,
    steps: int | None,
    team_id: uuid.UUID | None,
) -> PlannedJob:
    """An adaptive study's base at the low end of every knob, checked as a job now, so a
    base no trial could run is a 422 at submit, not a study of failed trials."""
    point = {path: _low_end(knob) for path, knob in request.space.items()}
    label = "base"
    raw = expansion.raw_spec(request, {}, point, request.seeds[0])
    job = PlannedJob(arm=label, seed=request.seeds[0], spec=expansion.parse_arm_spec(label, raw))
    if steps is not None:
        job = expansion.fit_budget(job, steps, facts.train_size, facts.num_classes)
    validate_planned(session, settings, job, team_id)
    return job


def _low_end(knob: KnobRange) -> Any:
    if knob.choices:
        return knob.choices[0]
    assert knob.low is not None, "validated: a range has low and high"
    return int(knob.low) if knob.integer else knob.low


def validate_planned(
    session: Session, settings: Settings, job: PlannedJob, team_id: uuid.UUID | None
) -> None:
    try:
        validate_submission(session, job.spec, settings, team_id)
    except InvalidStudy:
        raise
    except UserError as exc:
        field_name = getattr(exc, "field", None) or "spec"
        raise InvalidStudy(
            f"arm {job.arm!r}: {exc}", field=f"arms[{job.arm}].{field_name}"
        ) from exc


def job_label(study: Study, arm: str, seed: int) -> str:
    return f"{study.name[:100]}/{arm[:80]}/seed{seed}"[:200]


def create_study_job(
    session: Session, study: Study, job: PlannedJob, placement: Placement, trial: int | None = None
) -> Job:
    """The job, tagged with its study before it is written (no second statement per job);
    the caller's commit writes it, with the study's other new jobs in one batch."""
    spec = job.spec
    label = spec.label or job_label(study, job.arm, job.seed)
    created = jobs_repository.create_job(
        session, spec.method, spec.model_dump(mode="json"), label, placement, flush=False
    )
    studies_repository.tag_job(created, study.id, job.arm, trial)
    return created


def new_study_row(
    request: StudyCreate, principal: Principal, steps: int | None, arms: list[str]
) -> Study:
    config = request.model_dump(mode="json", exclude={"name", "dataset", "budget", "seeds"})
    config.update(
        priority_level=PRIORITY_LEVELS[request.priority],
        arm_labels=arms,
        equal_tuning=expansion.tuned_knobs(request.arms),
    )
    budget = None if request.budget is None else {**request.budget.model_dump(), "steps": steps}
    return studies_repository.new_study(
        name=request.name,
        team_id=principal.team_id,
        owner_id=principal.user_id,
        dataset=dict(request.dataset),
        base_spec=dict(request.base),
        budget=budget,
        seeds=list(request.seeds),
        config=config,
        sampler=request.sampler,
        n_trials=request.n_trials,
        parallel=request.parallel if request.sampler else None,
    )


def submit_study(
    session: Session,
    settings: Settings,
    enqueuer: Enqueuer,
    request: StudyCreate,
    principal: Principal,
) -> Study:
    """Validate every job, store the study and its jobs in one commit, then wake workers
    (an adaptive study asks its first trials right after)."""
    principal.require("submit")
    facts = dataset_facts(session, settings, request.dataset, principal.team_filter)
    if request.sampler is not None:
        check_cap(request.n_trials or 0, settings)
        steps = expansion.budget_steps(request, facts.train_size, facts.num_classes)
        probe = check_space(session, settings, request, facts, steps, principal.team_filter)
        placement_for(probe.spec, principal, request.priority)
        require_offered_device(enqueuer, probe.spec)
        planned: list[PlannedJob] = []
    else:
        planned, steps = plan_jobs(session, settings, request, facts, principal.team_filter)
    for job in planned:
        require_offered_device(enqueuer, job.spec)
    study = new_study_row(request, principal, steps, sorted({job.arm for job in planned}))
    session.add(study)
    session.flush()
    jobs = [
        create_study_job(session, study, job, placement_for(job.spec, principal, request.priority))
        for job in planned
    ]
    session.commit()
    wake(enqueuer, [(job.id, job.device) for job in jobs])
    if request.sampler is not None:
        step = advance_study(session, settings, study.id)
        session.commit()
        wake(enqueuer, step.new_jobs)
    return study


def wake(enqueuer: Enqueuer, jobs: list[tuple[uuid.UUID, str]]) -> None:
    """One message per job, as a plain submit sends: each may wake a different idle worker.
    The jobs are committed before: an unreachable broker delays them, never fails the
    study (the workers' periodic wake-up finds them once it is back)."""
    for job_id, device in jobs:
        try:
            enqueuer.enqueue(job_id, device)
        except Exception as exc:  # whatever the broker client raises
            log.warning("study jobs stored as queued; their wake-ups were not sent (%s)", exc)
            return


def cancel_study(session: Session, study_id: uuid.UUID, principal: Principal) -> Study:
    """Cancel the study's queued jobs at once and flag its running ones; ask no more trials."""
    principal.require("submit")
    study = studies_repository.get_study(
        session, study_id, for_update=True, team_id=principal.team_filter
    )
    study.cancel_requested = True
    for job_id in studies_repository.open_job_ids(session, study.id):
        jobs_repository.request_cancel(session, job_id, principal.name)
    session.flush()
    _maybe_end(session, study, studies_repository.study_jobs(session, study.id), no_more=True)
    session.commit()
    return study


def _maybe_end(session: Session, study: Study, jobs: list[Job], no_more: bool) -> bool:
    """Mark the study ended once no job is open and no trial is to come (and tell the
    team's webhooks, in the same transaction)."""
    if StudyStatus(study.status).ended or not no_more:
        return False
    if any(not JobStatus(job.status).terminal for job in jobs):
        return False
    ended = StudyStatus.cancelled if study.cancel_requested else StudyStatus.finished
    study.status, study.finished_at = ended, utcnow()
    counts = Counter(JobStatus(job.status).value for job in jobs)
    data = {"study": {"id": str(study.id), "name": study.name, "status": ended.value}}
    events.record(
        session,
        study.team_id,
        events.STUDY_FINISHED,
        f"study:{study.id}",
        {**data, "jobs": dict(counts)},
    )
    return True


def advance_study(session: Session, settings: Settings, study_id: uuid.UUID) -> Advance:
    """Under the study's row lock: tell finished trials, ask new ones, end the study when
    all is done. Idempotent; the caller commits and enqueues `new_jobs`.

    A fixed study with a job still open has nothing to do, and says so without its lock:
    the workers ending its jobs would otherwise queue on that lock after every job, each
    loading every job of the study. Its callers run after their job's end is committed,
    so the caller ending the last job sees none open and ends the study.
    """
    if studies_repository.fixed_with_open_jobs(session, study_id):
        return Advance()
    study = studies_repository.get_study(session, study_id, for_update=True)
    jobs = studies_repository.study_jobs(session, study.id)
    if StudyStatus(study.status).ended:
        return Advance()
    if study.sampler is None or study.cancel_requested:
        return Advance(ended=_maybe_end(session, study, jobs, no_more=True))
    # Imported on first use: Optuna (some 100 modules) serves adaptive studies alone, and a
    # worker's pool process, which advances a job's study after the job, needs it only then.
    from archsearch.jobs.domain.studies import adaptive

    ostudy = adaptive.open_optuna_study(study, settings.resolved_database_url)
    adaptive.tell_finished(ostudy, study, jobs)
    result = Advance()
    for ask in adaptive.pending_asks(ostudy, study, jobs):
        job = trial_job(session, settings, study, ostudy, ask)
        if job is not None:
            jobs.append(job)
            result.new_jobs.append((job.id, job.device))
    study.trials_asked = adaptive.trial_count(ostudy)
    no_more = study.trials_asked >= (study.n_trials or 0)
    result.ended = _maybe_end(session, study, jobs, no_more=no_more)
    return result


def has_pruner(config: dict[str, Any]) -> bool:
    """Whether a study's trials report each epoch to a pruner (`pruning.py`)."""
    pruner = config.get("pruner")
    return pruner is not None and pruner.get("name", "none") != "none"


def trial_pruning(
    session: Session, settings: Settings, job: Job
) -> Callable[[int, float], bool] | None:
    """A study job's question after each epoch (should it stop?), when its study has a
    pruner; None otherwise."""
    assert job.study_id is not None, "a study's job"
    study = studies_repository.get_study(session, job.study_id)
    if not has_pruner(study.config):
        return None
    # Imported here: Optuna (some 100 modules) serves only the studies that use it.
    from archsearch.jobs.domain.studies import pruning

    arm = pruning.Arm(label=job.study_arm or str(job.id), first_seed=is_first_seed(study, job))
    return pruning.TrialPruning(
        job.id, job.study_id, study.config, settings.resolved_database_url, arm
    )


def is_first_seed(study: Study, job: Job) -> bool:
    """Whether the job runs its arm's first seed, the one a pruner judges the arm by (every
    job of an adaptive study, which runs one seed a trial)."""
    seed = expansion.get_path(job.spec, "training.seed")
    return seed is None or seed == study.seeds[0]  # a study has one seed at least


def settle_pruning_trial(session: Session, settings: Settings, job: Job) -> None:
    """Tell an ended study job's pruning trial how it ended (nothing without a pruner); when
    the pruner stopped an arm's first seed, its seeds not started yet never start."""
    assert job.study_id is not None, "a study's job"
    study = studies_repository.get_study(session, job.study_id)
    if not has_pruner(study.config):
        return
    from archsearch.jobs.domain.studies import pruning  # loads Optuna, as above

    pruning.settle_trial(job, study.config, settings.resolved_database_url)
    if JobStatus(job.status) is JobStatus.pruned and is_first_seed(study, job):
        reason = f"not started: its arm's first seed (seed {study.seeds[0]}) was pruned"
        for queued in studies_repository.queued_arm_jobs(session, study.id, job.study_arm or ""):
            transition(queued, JobStatus.pruned, reason, actor="study pruner")


def trial_spec(study: Study, params: dict[str, Any]) -> dict[str, Any]:
    spec = dict(study.base_spec)
    for path, value in params.items():
        spec = expansion.set_path(spec, path, value)
    return spec


def trial_job(
    session: Session, settings: Settings, study: Study, ostudy: Any, ask: adaptive.Ask
) -> Job | None:
    """The job of one trial; an invalid sampled spec fails the trial instead."""
    request = StudyCreate.model_validate(
        {"name": study.name, "dataset": study.dataset, "seeds": study.seeds[:1]}
    )
    label = f"trial-{ask.number}"
    try:
        raw = expansion.raw_spec(request, trial_spec(study, ask.params), {}, study.seeds[0])
        job = PlannedJob(arm=label, seed=study.seeds[0], spec=expansion.parse_arm_spec(label, raw))
        if study.budget is not None:
            facts = dataset_facts(session, settings, study.dataset, study.team_id)
            job = expansion.fit_budget(
                job, study.budget["steps"], facts.train_size, facts.num_classes
            )
        validate_planned(session, settings, job, study.team_id)
    except UserError:
        from archsearch.jobs.domain.studies import adaptive  # loaded by `advance_study`

        adaptive.fail_trial(ostudy, ask.number)
        return None
    placement = Placement(
        actor=f"study {study.id}",
        owner_id=study.owner_id,
        team_id=study.team_id,
        priority=int(study.config.get("priority_level", 0)),
        device=job.spec.resources.device,
        min_gpu_memory_gb=job.spec.resources.min_gpu_memory_gb,
    )
    return create_study_job(session, study, job, placement, trial=ask.number)
