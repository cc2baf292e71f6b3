"""A study's dry run: the jobs it expands into and the compute they take, with every check
a submit makes (budget fitting, each arm validated), and nothing stored or queued."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.studies import expansion, service
from archsearch.jobs.domain.studies.expansion import PlannedJob
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.studies import PlannedArm, StudyCreate, StudyPlan
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
    return StudyPlan(
        name=request.name,
        jobs=len(planned),
        budget_steps=steps,
        optimizer_steps=sum(arm.optimizer_steps * arm.jobs for arm in arms),
        training_samples=sum(arm.training_samples * arm.jobs for arm in arms),
        arms=arms,
    )
