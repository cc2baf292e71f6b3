"""The one task: a wake-up. PostgreSQL decides which job this worker runs next.

Thin by design: the `jobs` executor claims and runs jobs until none is eligible for this
worker's device, so a freed quota or a finished job immediately lets the next one start.
"""

from __future__ import annotations

import logging
import signal

from celery import Celery, Task
from sqlalchemy.exc import InterfaceError, OperationalError

from archsearch.jobs.platform.broker import CeleryEnqueuer
from archsearch.jobs.platform.celery_config import RUN_JOB_TASK
from archsearch.jobs.runtime.executor import TransientFailure, execute_next
from archsearch.jobs.runtime.reaper import wake_for_waiting_jobs
from archsearch.worker.process import WorkerProcess

log = logging.getLogger(__name__)
MAX_TRANSIENT_RETRIES = 5


def stop_gracefully_on_sigterm(process: WorkerProcess) -> None:
    """SIGTERM hands the running job back to the queue at its next checkpoint. Set as each
    task starts: billiard points a pool process's SIGTERM at an immediate exit (which would
    cost the job an attempt) after Celery's process-init signals have run."""
    stop, grace = process.services.stop, process.settings.stop_grace_seconds

    def request_stop(signum: int, _: object) -> None:
        stop.request(f"worker stopping ({signal.Signals(signum).name})", grace)

    signal.signal(signal.SIGTERM, request_stop)


def register_tasks(app: Celery, process: WorkerProcess) -> None:
    """Register `archsearch.run_job` on `app`, running jobs with `process`'s services."""

    def run_job(self: Task, job_id: str) -> int:
        """Run eligible jobs (the submitted `job_id` among them, if it is next); return how
        many ran."""
        ran = 0
        stop_gracefully_on_sigterm(process)
        try:
            while execute_next(process.services, process.offer) is not None:
                ran += 1
        except (TransientFailure, OperationalError, InterfaceError) as exc:
            countdown = process.settings.lease_seconds + 1 + 2**self.request.retries
            log.warning(
                "transient failure (%s) after job %s; retry in %.0fs", exc, job_id, countdown
            )
            raise self.retry(exc=exc, countdown=countdown) from exc
        if process.services.stop.requested:
            # This worker is leaving: wake another for the job it handed back.
            wake_for_waiting_jobs(
                process.services, CeleryEnqueuer(process.settings), older_than_seconds=0
            )
        return ran

    # A call rather than decorator syntax: Celery is untyped, and `run_job` stays typed.
    app.task(name=RUN_JOB_TASK, bind=True, max_retries=MAX_TRANSIENT_RETRIES)(run_job)
