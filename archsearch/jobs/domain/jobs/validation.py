"""Checks a job spec against this deployment before it is stored: the dataset exists here,
the model family fits the dataset's inputs, and the jobs it builds on have succeeded and
can serve as its start (`built_on`: a transfer's mask fits the new dataset, ...).

Torch-free, so the API runs it at submit time: a bad job is a 422 now, not a failure later.
"""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from archsearch.core.errors import IncompatibleModelError, UserError
from archsearch.jobs.domain.datasets import catalog
from archsearch.jobs.domain.jobs import listing
from archsearch.jobs.domain.jobs.built_on import check_built_on
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus
from archsearch.specs import JobBase
from archsearch.specs.budget import train_size


class ReferencedJobError(UserError):
    """A job the spec builds on is missing, ambiguous or not succeeded; `field` is the spec's
    own field that names it (`source_job`, `jobs[1]`, `from_job`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def dataset_input_shape(
    session: Session, spec: JobBase, settings: Settings, team_id: uuid.UUID | None = None
) -> tuple[int, ...]:
    """The input shape of the job's dataset; raises a UserError naming the field if unusable.
    With `team_id`, only that team's uploads are found."""
    return catalog.resolve(session, settings, spec.dataset, team_id, hold=True).input_shape


def check_model_fits(spec: JobBase, input_shape: tuple[int, ...]) -> None:
    model = getattr(spec, "model", None)
    problem = model.input_problem(input_shape) if model is not None else None
    if problem:
        raise IncompatibleModelError(problem)


def resolve_job_reference(
    session: Session, field: str, reference: str, team_id: uuid.UUID | None
) -> Job:
    """The one job (of the team) whose id is `reference` or starts with it."""
    hex_digits = reference.strip().lower().replace("-", "")
    if not 0 < len(hex_digits) <= 32 or any(c not in "0123456789abcdef" for c in hex_digits):
        raise ReferencedJobError(field, f"{reference!r} is not a job id nor the start of one")
    filters = listing.JobFilters(team_id=team_id, id_prefix=hex_digits)
    matches, _ = listing.list_jobs(session, filters, limit=2)
    if not matches:
        raise ReferencedJobError(field, f"no job id starts with {reference!r}")
    if len(matches) > 1:
        raise ReferencedJobError(
            field, f"{reference!r} starts more than one job id; give more characters"
        )
    return matches[0]


def resolve_referenced_jobs(
    session: Session, spec: JobBase, team_id: uuid.UUID | None = None
) -> JobBase:
    """The spec with every job it builds on named by its full id; each must have succeeded."""
    full_ids = {}
    for field, reference in spec.job_references().items():
        job = resolve_job_reference(session, field, reference, team_id)
        if job.status is not JobStatus.succeeded:
            raise ReferencedJobError(
                field,
                f"job {job.id} is {job.status.value}; a job can only build on a succeeded job",
            )
        full_ids[field] = str(job.id)
    return spec.with_job_ids(full_ids)


def check_inputs_present(spec: JobBase) -> None:
    for field, wanted in spec.missing_inputs().items():
        error = UserError(f"{spec.method} jobs need '{field}': {wanted}")
        error.field = field
        raise error


def check_schedule(spec: JobBase, facts: catalog.DatasetFacts) -> None:
    """A schedule that would do nothing on this dataset (a RigL interval that makes no update)."""
    n = train_size(spec.dataset, facts.train_size, facts.num_classes)
    for field, problem in spec.schedule_problems(n).items():
        error = UserError(problem)
        error.field = field
        raise error


def validate_submission(
    session: Session, spec: JobBase, settings: Settings, team_id: uuid.UUID | None = None
) -> JobBase:
    """The spec to store (job references resolved to full ids), or a UserError naming the
    field. `team_id`: the submitter's team; its uploads and jobs are the only ones it may use."""
    check_inputs_present(spec)
    facts = catalog.resolve(session, settings, spec.dataset, team_id, hold=True)
    check_model_fits(spec, facts.input_shape)
    check_schedule(spec, facts)
    resolved = resolve_referenced_jobs(session, spec, team_id)
    check_built_on(session, settings, resolved, facts, team_id)
    return resolved
