"""One job's usage, run by run: `GET /v1/usage/jobs/{job_id}`.

Each run's device time and device figures (`jobs/runtime/figures.py`) come from its row in
`job_attempts`. A run killed with its process has no figures (null). Runs recorded before
rows kept figures (migration 0029) have none either, except the last run of a succeeded
job, whose figures are still in the job's latest metrics.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.jobs.repository import get_job
from archsearch.jobs.domain.usage.repository import job_seconds
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.usage import JobRunUsage, JobUsagePublic


def job_usage(session: Session, principal: Principal, job_id: uuid.UUID) -> JobUsagePublic:
    """A job of the caller's team (any job for an admin), else NotFound."""
    job = get_job(session, job_id, team_id=principal.team_filter)
    runs = [_run(attempt) for attempt in job_seconds(session, job_id)]
    if runs and runs[-1].peak_memory_mb is None and job.status == JobStatus.succeeded:
        metrics = job.latest_metrics or {}
        runs[-1] = runs[-1].model_copy(
            update={
                "peak_memory_mb": metrics.get("device_peak_memory_mb"),
                "utilization": metrics.get("device_utilization"),
            }
        )
    total = sum(run.device_seconds for run in runs)
    return JobUsagePublic(job_id=str(job.id), runs=runs, device_seconds=total)


def _run(attempt: JobAttempt) -> JobRunUsage:
    return JobRunUsage(
        attempt=attempt.attempt,
        device=attempt.device,
        worker=attempt.worker,
        started_at=attempt.started_at,
        ended_at=attempt.ended_at,
        held_seconds=attempt.seconds,
        device_share=attempt.device_share,
        device_seconds=attempt.seconds * attempt.device_share,
        given_back=attempt.given_back,
        **_figures(attempt.figures),
    )


def _figures(kept: dict[str, Any] | None) -> dict[str, Any]:
    if not kept:
        return {}
    peak = kept.get("peak_memory_bytes")
    return {
        "device_name": kept.get("device_name"),
        "peak_memory_mb": None if peak is None else peak / 2**20,
        "utilization": kept.get("utilization"),
    }
