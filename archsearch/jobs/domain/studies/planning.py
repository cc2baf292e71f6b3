"""A study's dry run: the jobs it expands into, the compute they take and the minutes that
is likely to last on this server (`wall_time`), with every check a submit makes (budget
fitting, each arm validated), and nothing stored or queued."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.datasets.catalog import DatasetFacts
from archsearch.jobs.domain.studies import expansion, run_times, service, wall_time
from archsearch.jobs.domain.studies.expansion import PlannedJob
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.studies import PlannedArm, StudyCreate, StudyPlan
from archsearch.specs import DatasetRef
from archsearch.specs.budget import planned_steps


def _arms(jobs: Sequence[PlannedJob], n_train: int, n_classes: int) -> list[PlannedArm]:
    arms: dict[str, PlannedArm] = {}
    for job in jobs:
        steps = planned_steps(job.spec, n_train, n_classes)
        samples = steps * job.spec.training.batch_size
        if job.arm in arms:
            arms[job.arm].jobs += 1
        else:
            arms[job.arm] = PlannedArm(
                label=job.arm,
                method=job.spec.method,
                jobs=1,
                optimizer_steps=steps,
                training_samples=samples,
            )
    return list(arms.values())


def plan_study(
    session: Session, settings: Settings, request: StudyCreate, principal: Principal
) -> StudyPlan:
    """The study's expansion as `submit_study` would queue it (an adaptive study: its
    `n_trials` trials, costed at the low end of every knob)."""
    principal.require("submit")
    team = principal.team_filter
    facts = service.dataset_facts(session, settings, request.dataset, team)
    if request.sampler is not None:
        service.check_cap(request.n_trials or 0, settings)
        steps = expansion.budget_steps(request, facts.train_size, facts.num_classes)
        probe = service.check_space(session, settings, request, facts, steps, team)
        planned = [probe] * (request.n_trials or 0)
    else:
        planned, steps = service.plan_jobs(session, settings, request, facts, team)
    arms = _arms(planned, facts.train_size, facts.num_classes)
    _estimate_wall_time(session, arms, request.dataset, facts)
    return StudyPlan(
        name=request.name,
        jobs=len(planned),
        budget_steps=steps,
        optimizer_steps=sum(arm.optimizer_steps * arm.jobs for arm in arms),
        training_samples=sum(arm.training_samples * arm.jobs for arm in arms),
        arms=arms,
        wall_time=wall_time.study_wall_time(arms),
    )


def _estimate_wall_time(
    session: Session, arms: list[PlannedArm], raw: dict[str, Any], facts: DatasetFacts
) -> None:
    """Each arm's minutes per job, from this server's past runs of its method."""
    dataset = DatasetRef.model_validate(raw)
    shown = dataset.name or dataset.id or "?"
    for method in {arm.method for arm in arms}:
        rates = wall_time.measured_rates(run_times.measured_runs(session, method), dataset, facts)
        for arm in arms:
            if arm.method == method:
                arm.wall_time = wall_time.arm_wall_time(arm, rates, shown)
