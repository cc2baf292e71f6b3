"""Run times this server has measured: the recent succeeded jobs of a method, each with the
seconds its runs held a device (`job_attempts`, every run of the job summed) and the device
kind they ran on. Read by a study's dry run to estimate its wall time. All SQL of that
estimate; callers own the transaction, nothing here commits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.tables import Job
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.schemas.jobs import JobStatus

# Enough recent jobs to find a few on the study's dataset, few enough to read at every
# dry run (their runs are then summed through the attempts' primary key).
RECENT_JOBS = 200


@dataclass(frozen=True)
class MeasuredRun:
    spec: dict[str, Any]
    seconds: float
    device: str


def measured_runs(session: Session, method: str, limit: int = RECENT_JOBS) -> list[MeasuredRun]:
    """The `limit` most recently finished succeeded jobs of `method` with device time."""
    recent = (
        select(Job.id, Job.spec)
        .where(Job.method == method, Job.status == JobStatus.succeeded)
        .order_by(Job.finished_at.desc())
        .limit(limit)
    )
    specs = {job_id: spec for job_id, spec in session.execute(recent)}
    if not specs:
        return []
    # Only these jobs' runs are summed (by the attempts' primary key), never the whole table.
    per_job = (
        select(JobAttempt.job_id, func.sum(JobAttempt.seconds), func.max(JobAttempt.device))
        .where(JobAttempt.job_id.in_(list(specs)))
        .group_by(JobAttempt.job_id)
    )
    return [
        MeasuredRun(specs[job_id], float(seconds), device)
        for job_id, seconds, device in session.execute(per_job)
        if seconds and seconds > 0
    ]
