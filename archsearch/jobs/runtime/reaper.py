"""The scheduler's sweeps, run by the one worker that holds the sweeps' turn
(`jobs/domain/jobs/sweeper.py`): returns to the queue the running jobs
whose worker stopped renewing its lease (the next attempt resumes from the job's last
checkpoint), holds the teams over their weekly device-hours (`usage/quota.py`), and, with
`preemption` set, asks running jobs of lower priority to make way (`jobs/preemption.py`).
"""

from __future__ import annotations

import logging
import uuid

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.errors import InvalidTransition
from archsearch.jobs.domain.jobs import claims, preemption, repository
from archsearch.jobs.domain.jobs import queue_repository as queue
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.platform.broker import Enqueuer
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.services import Services
from archsearch.schemas.jobs import JobStatus

log = logging.getLogger(__name__)


def reap_expired(services: Services, enqueuer: Enqueuer) -> list[uuid.UUID]:
    requeued = []
    with transaction(services.sessions) as session:
        candidates = claims.expired_running_jobs(session)
    for job_id in candidates:
        with transaction(services.sessions) as session:
            job = repository.get_job(session, job_id, for_update=True)
            # Re-check under the lock: the worker may have renewed since the scan.
            if job.status is not JobStatus.running or claims.lease_alive(job, utcnow()):
                continue
            try:
                claims.requeue_job(session, job_id, f"lease expired (worker {job.worker} lost)")
            except InvalidTransition:
                continue
        requeued.append(job_id)
        log.warning("requeued job %s after its worker was lost", job_id)
        wake(enqueuer, job_id, job.device)
    return requeued


def wake_for_waiting_jobs(
    services: Services, enqueuer: Enqueuer, older_than_seconds: float
) -> set[str]:
    """Send a wake-up for each device whose queued jobs have waited long: their first message
    may have reached a worker that could not take them then (quota, device)."""
    with transaction(services.sessions) as session:
        devices = queue.devices_waiting_since(session, older_than_seconds)
    for device in devices:
        wake(enqueuer, uuid.uuid4(), device)
    return devices


def wake(enqueuer: Enqueuer, job_id: uuid.UUID, device: str) -> None:
    """A wake-up for a job already safe in the database: with the broker down it is only
    late (the next sweep sends another), never a failure of the sweep or the job."""
    try:
        enqueuer.enqueue(job_id, device)
    except Exception as exc:  # whatever the broker client raises
        log.warning("wake-up for %s jobs not sent, the next sweep retries (%s)", device, exc)


def hold_teams_over_quota(services: Services) -> dict[str, str | None]:
    """Hold (or release) the teams whose weekly device-hours are used up (or no longer)."""
    with transaction(services.sessions) as session:
        changed = quota.update_holds(session)
    for team, reason in changed.items():
        log.info("team %s: %s", team, reason or "released: device-hours left this week")
    return changed


def preempt_for_waiting_jobs(services: Services) -> list[preemption.Preemption]:
    """With `preemption` set: ask the running jobs that must make way for waiting jobs of
    high priority to stop at their next checkpoint (their workers read it at a renewal)."""
    if not services.settings.preemption:
        return []
    with transaction(services.sessions) as session:
        asked = preemption.plan_preemptions(session, services.settings)
    for each in asked:
        log.info("asked job %s to stop for job %s", each.victim_id, each.job_id)
    return asked
