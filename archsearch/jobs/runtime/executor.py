"""Runs one job: claim the row, load the data, call the engine, record the outcome.

The same functions serve the Celery worker and the embedded local runner: `execute_next`
claims the job the scheduler picks for this worker's device, runs it, and records its end.
A job's outcome
is recorded here and nowhere else: `succeeded`, `failed` (with a message the user can act
on), or `cancelled`. Transient infrastructure errors are re-raised as `TransientFailure`
after the job is put back in the queue, so the caller retries; user errors never retry.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from typing import Any

import torch
from sqlalchemy.exc import InterfaceError, OperationalError

from archsearch.core.context import Result
from archsearch.core.data.loaders import Dataset
from archsearch.core.errors import JobCancelled, UserError
from archsearch.core.export import json_bytes
from archsearch.core.methods import get_method
from archsearch.core.spec import JobBase, parse_job_spec
from archsearch.jobs.domain import repository, workers
from archsearch.jobs.domain.scheduler import Offer, claim_next
from archsearch.jobs.domain.tables import JobStatus
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.services import Services
from archsearch.jobs.runtime.context import DbRunContext
from archsearch.jobs.runtime.data import load_job_dataset
from archsearch.jobs.runtime.device import pick_device
from archsearch.jobs.runtime.lease import Heartbeat

log = logging.getLogger(__name__)

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    ConnectionError,
    TimeoutError,
)


class TransientFailure(Exception):
    """Infrastructure trouble (database or broker unreachable); the run may be retried."""


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def execute_next(services: Services, offer: Offer) -> uuid.UUID | None:
    """Claim the next job this worker may run and run it; None when nothing is eligible."""
    worker = worker_name()
    with transaction(services.sessions) as session:
        job_id = claim_next(
            session, worker, offer, services.settings, services.store.has_checkpoint
        )
        if job_id is None:
            return None
        raw_spec = repository.get_job(session, job_id).spec
        workers.set_current_job(session, worker, job_id)
    try:
        run_claimed(services, job_id, worker, raw_spec)
    finally:
        with transaction(services.sessions) as session:
            workers.set_current_job(session, worker, None)
    return job_id


def run_claimed(
    services: Services, job_id: uuid.UUID, worker: str, raw_spec: dict[str, Any]
) -> JobStatus | None:
    """Run a job this worker has claimed and record its outcome (None: the lease was lost)."""
    try:
        with Heartbeat(services, job_id, worker) as heartbeat:
            status, reason, error, metrics = _run(services, job_id, raw_spec, heartbeat.lost)
    except TRANSIENT_ERRORS as exc:
        _requeue_best_effort(services, job_id, f"interrupted by {type(exc).__name__}")
        raise TransientFailure(str(exc)) from exc
    if heartbeat.lost.is_set():
        return None  # another attempt owns the job and will record its end
    with transaction(services.sessions) as session:
        repository.finish_job(
            session, job_id, status, reason, error=error, metrics=metrics, actor=worker
        )
    if status.terminal:
        services.store.delete_checkpoint(job_id)
    return status


def _run(
    services: Services, job_id: uuid.UUID, raw_spec: dict[str, Any], lease_lost: threading.Event
) -> tuple[JobStatus, str, str | None, dict[str, float] | None]:
    try:
        spec = parse_job_spec(raw_spec)
        ctx = DbRunContext(services, job_id, pick_device(spec), lease_lost)
        data = load_job_dataset(services, spec)
        result = _run_method(spec, data, ctx)
        return JobStatus.succeeded, "finished", None, result.metrics
    except JobCancelled:
        return JobStatus.cancelled, "cancelled while running", None, None
    except UserError as exc:
        return JobStatus.failed, "user error", str(exc), None
    except TRANSIENT_ERRORS:
        raise
    except torch.OutOfMemoryError:
        return (
            JobStatus.failed,
            "out of memory",
            ("the job ran out of device memory; lower training.batch_size or the model size"),
            None,
        )
    except Exception as exc:  # a bug: fail the job with what we know, keep the traceback in logs
        log.exception("job %s crashed", job_id)
        return (
            JobStatus.failed,
            "crashed",
            (
                f"internal error ({type(exc).__name__}: {exc}). The job's spec was valid; this is "
                "likely a bug in archsearch: please report it with the job id."
            ),
            None,
        )


def _run_method(spec: JobBase, data: Dataset, ctx: DbRunContext) -> Result:
    ctx.save_artifact("spec.json", json_bytes(spec.model_dump(mode="json")), "application/json")
    result = get_method(spec.method)(spec, data, ctx)
    ctx.flush()
    summary = {"method": spec.method, "final": result.metrics, "history": result.history}
    ctx.save_artifact("metrics.json", json_bytes(summary), "application/json")
    return result


def _requeue_best_effort(services: Services, job_id: uuid.UUID, reason: str) -> None:
    try:
        with transaction(services.sessions) as session:
            repository.requeue_job(session, job_id, reason)
    except Exception:  # the database may be the thing that is down; the lease covers that
        log.warning("could not requeue job %s; its lease will expire", job_id)
