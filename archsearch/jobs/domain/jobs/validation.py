"""Checks a job spec against this deployment before it is stored: the dataset exists here,
the model family fits the dataset's inputs, and the jobs it builds on have succeeded.

Torch-free, so the API runs it at submit time: a bad job is a 422 now, not a failure later.
"""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from archsearch.core.errors import IncompatibleModelError, UserError
from archsearch.jobs.domain.datasets import catalog
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.tables import JobStatus
from archsearch.jobs.platform.settings import Settings
from archsearch.specs import JobBase


class ReferencedJobError(UserError):
    field = "referenced job"


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


def check_referenced_jobs(
    session: Session, spec: JobBase, team_id: uuid.UUID | None = None
) -> None:
    for job_id in spec.referenced_jobs():
        try:
            job = repository.get_job(session, uuid.UUID(str(job_id)), team_id=team_id)
        except (ValueError, NotFound):
            raise ReferencedJobError(f"job {job_id} does not exist") from None
        if job.status is not JobStatus.succeeded:
            raise ReferencedJobError(
                f"job {job_id} is {job.status.value}; a job can only build on a succeeded job"
            )


def check_inputs_present(spec: JobBase) -> None:
    for field, wanted in spec.missing_inputs().items():
        error = UserError(f"{spec.method} jobs need '{field}': {wanted}")
        error.field = field
        raise error


def validate_submission(
    session: Session, spec: JobBase, settings: Settings, team_id: uuid.UUID | None = None
) -> None:
    """`team_id`: the submitter's team; its uploads and jobs are the only ones it may use."""
    check_inputs_present(spec)
    check_model_fits(spec, dataset_input_shape(session, spec, settings, team_id))
    check_referenced_jobs(session, spec, team_id)
