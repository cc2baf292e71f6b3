"""Runs one job: claim the row, load the data, call the engine, record the outcome.

The same functions serve the Celery worker and the embedded local runner: `execute_next`
claims the job the scheduler picks for this worker's device, runs it, and records its end.
A job's outcome
is recorded here and nowhere else: `succeeded` (with the run's warnings, if any: the job
finished, but its result deserves a look), `failed` (with a message the user can act on),
`cancelled`, or `pruned` (a study's pruner stopped the trial at an epoch boundary; its
metrics so far and what it spent are kept). Transient infrastructure errors are re-raised
as `TransientFailure` after the job is put back in the queue, so the caller retries; user
errors never retry.

An object-store outage is ridden out inside the job first: storage calls retry for a lease
time (`objects.storage_patience`); past that the job is handed back to the queue without
consuming an attempt, and only an outage longer than `storage_outage_limit_seconds` fails
it, saying so. A misconfigured store (a missing bucket, refused credentials) fails the job
as an infrastructure error, never as "a bug".
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

import torch
from sqlalchemy.exc import InterfaceError, OperationalError

from archsearch.core.context import Result, RunWarning
from archsearch.core.data.loaders import Dataset, hold_out_validation
from archsearch.core.errors import JobCancelled, TrialPruned, UserError
from archsearch.core.export import json_bytes
from archsearch.core.methods import get_method
from archsearch.jobs.domain.jobs import claims, handback, repository, worker_repository
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.jobs.scheduler import claim_next
from archsearch.jobs.domain.usage import repository as usage
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.objects import (
    StorageConfigError,
    StorageUnavailable,
    storage_patience,
)
from archsearch.jobs.platform.services import Services
from archsearch.jobs.runtime import studies
from archsearch.jobs.runtime.context import DbRunContext, JobPreempted
from archsearch.jobs.runtime.data import load_job_dataset
from archsearch.jobs.runtime.device import is_out_of_memory, out_of_memory_message, pick_device
from archsearch.jobs.runtime.figures import FiguresProbe, RunFigures
from archsearch.jobs.runtime.joblog import JobLog
from archsearch.jobs.runtime.lease import LeaseKeeper
from archsearch.jobs.runtime.warmup import release_memory
from archsearch.schemas.jobs import JobStatus
from archsearch.specs import JobBase, parse_job_spec

log = logging.getLogger(__name__)

# The share of a study trial's training rows held apart: the study ranks its trials, and its
# pruner stops them, on accuracy measured there, never on the test split it reports.
STUDY_VALIDATION_FRACTION = 0.1

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    ConnectionError,
    TimeoutError,
)

# What `_run` passes up to `run_claimed` rather than recording as the job's outcome.
PASSED_UP: tuple[type[BaseException], ...] = (*TRANSIENT_ERRORS, StorageUnavailable)


class TransientFailure(Exception):
    """Infrastructure trouble (database or broker unreachable); the run may be retried."""


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as the job will record it."""

    status: JobStatus
    reason: str
    error: str | None = None
    metrics: dict[str, float] | None = None
    warnings: tuple[RunWarning, ...] = ()

    @classmethod
    def succeeded(cls, result: Result) -> Outcome:
        count = len(result.warnings)
        plural = "s" if count > 1 else ""
        reason = f"finished with {count} warning{plural}" if count else "finished"
        return cls(JobStatus.succeeded, reason, None, result.metrics, tuple(result.warnings))

    @classmethod
    def failed(cls, reason: str, error: str) -> Outcome:
        return cls(JobStatus.failed, reason, error)

    @classmethod
    def preempted(cls, reason: str) -> Outcome:
        """Not an end: the worker stops, the job goes back to the queue (`handback`)."""
        return cls(JobStatus.queued, reason)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def execute_next(services: Services, offer: Offer) -> uuid.UUID | None:
    """Claim the next job this worker may run and run it; None when nothing is eligible
    or the process is stopping (`services.stop`)."""
    worker = worker_name()
    if services.stop.requested:
        return None
    try:
        with transaction(services.sessions) as session:
            job_id = claim_next(
                session, worker, offer, services.settings, services.store.has_checkpoint
            )
            if job_id is None:
                return None
            raw_spec = repository.get_job(session, job_id).spec
            worker_repository.set_current_job(session, worker, job_id)
            if offer.slots > 1:  # a slot of a shared device: its run is charged its share
                usage.set_device_share(session, job_id, worker, offer.device_share)
    except StorageUnavailable as exc:  # the claim looks for a checkpoint; nothing was claimed
        raise TransientFailure(str(exc)) from exc
    try:
        run_claimed(services, job_id, worker, raw_spec)
    finally:
        with transaction(services.sessions) as session:
            worker_repository.set_current_job(session, worker, None)
        release_memory()  # the next job starts from the same resident size
    return job_id


def run_claimed(
    services: Services, job_id: uuid.UUID, worker: str, raw_spec: dict[str, Any]
) -> JobStatus | None:
    """Run a job this worker has claimed and record its outcome (None: the lease was lost)."""
    patience = services.settings.lease_seconds
    try:
        # The job's log captures this thread's records: the run, and these two lines.
        with JobLog(services, job_id), LeaseKeeper(services, job_id, worker) as lease:
            log.info("job %s running on worker %s", job_id, worker)
            with storage_patience(patience):
                outcome = _run(services, job_id, raw_spec, lease)
            log.info("run ended: %s (%s)", outcome.status.value, outcome.reason)
    except TRANSIENT_ERRORS as exc:
        _requeue_best_effort(services, job_id, f"interrupted by {type(exc).__name__}")
        raise TransientFailure(str(exc)) from exc
    except StorageUnavailable as exc:
        outcome = _storage_outage(services, job_id, worker, exc)
    if lease.lost.is_set():
        return None  # another attempt owns the job and will record its end
    if outcome.status is JobStatus.queued:
        with transaction(services.sessions) as session:
            handed_back = handback.hand_back(session, job_id, worker, outcome.reason)
        return JobStatus.queued if handed_back else None
    record_outcome(services, job_id, outcome, worker)
    return outcome.status


def record_outcome(services: Services, job_id: uuid.UUID, outcome: Outcome, worker: str) -> None:
    """Write the run's end on the job (status, error, metrics, one event per warning); a
    finished job needs its checkpoint no more."""
    with transaction(services.sessions) as session:
        repository.finish_job(
            session,
            job_id,
            outcome.status,
            outcome.reason,
            error=outcome.error,
            metrics=outcome.metrics,
            warnings=[(w.code, w.message) for w in outcome.warnings],
            actor=worker,
        )
    if outcome.status.terminal:
        try:
            services.store.delete_checkpoint(job_id)
        except StorageUnavailable:  # the reaper's orphan sweep removes it later
            log.warning("could not delete the checkpoint of job %s", job_id)
        # A study's job: tell its trial, ask the next ones (idempotent; the tick retries).
        studies.after_job_finished(services, job_id)


def _run(
    services: Services, job_id: uuid.UUID, raw_spec: dict[str, Any], lease: LeaseKeeper
) -> Outcome:
    device: torch.device | None = None  # known once the spec is read: an OOM message names it
    try:
        spec = parse_job_spec(raw_spec)
        device = pick_device(spec)
        flush = services.settings.progress_flush_seconds
        trial = studies.study_trial(services, job_id)
        pruning = trial.pruning if trial is not None else None
        ctx = DbRunContext(
            services, job_id, device, lease.lost, flush, job_stop=lease.stop, pruning=pruning
        )
        data = _job_data(services, spec, study_trial=trial is not None)
        return Outcome.succeeded(_run_method(spec, data, ctx, lease.worker))
    except JobPreempted as exc:
        return Outcome.preempted(str(exc))
    except TrialPruned as exc:
        return Outcome(JobStatus.pruned, str(exc), None, exc.metrics)
    except JobCancelled:
        return Outcome(JobStatus.cancelled, "cancelled while running")
    except UserError as exc:
        return Outcome.failed("user error", str(exc))
    except PASSED_UP:
        raise
    except StorageConfigError as exc:
        return Outcome.failed(
            "storage misconfigured",
            f"the object store is misconfigured ({exc}). This is an infrastructure problem "
            "for the administrator, not a problem of the job: resubmit it once it is fixed.",
        )
    except Exception as exc:  # a bug, unless an allocation was refused: fail the job either way
        if is_out_of_memory(exc):
            return Outcome.failed("out of memory", out_of_memory_message(services.settings, device))
        log.exception("job %s crashed", job_id)
        return Outcome.failed(
            "crashed",
            f"internal error ({type(exc).__name__}: {exc}). The job's spec was valid; this is "
            "likely a bug in archsearch: please report it with the job id.",
        )


def _job_data(services: Services, spec: JobBase, *, study_trial: bool) -> Dataset:
    data = load_job_dataset(services, spec)
    if study_trial:  # its study judges it on rows no trial trains on
        data = hold_out_validation(data, STUDY_VALIDATION_FRACTION)
    return data


def _run_method(spec: JobBase, data: Dataset, ctx: DbRunContext, worker: str) -> Result:
    ctx.save_artifact("spec.json", json_bytes(spec.model_dump(mode="json")), "application/json")
    probe = FiguresProbe(ctx.device).start()  # this run's own peak memory and utilisation
    try:
        result = get_method(spec.method)(spec, data, ctx)
        for name, value in final_validation(result.history).items():
            result.metrics.setdefault(name, value)  # a method may measure its final model
    finally:
        figures = probe.finish()  # a failed run too: it stops the GPU sampling thread
        _keep_run_figures(ctx, worker, figures)
    result.metrics.update(figures.as_metrics())
    ctx.flush()
    summary = {"method": spec.method, "final": result.metrics, "history": result.history}
    ctx.save_artifact("metrics.json", json_bytes(summary), "application/json")
    ctx.save_artifact("figures.json", json_bytes(figures.as_dict()), "application/json")
    return result


def final_validation(history: list[dict[str, float]]) -> dict[str, float]:
    """The validation figures of the run's last epoch that measured them, for its final
    metrics (a study ranks its trials on them); none when it held no validation rows. The
    last epoch's model is the job's, except a prune job's whose masks froze after training,
    which measures its own."""
    measured = [row for row in history if "val_accuracy" in row]
    if not measured:
        return {}
    return {"val_accuracy": measured[-1]["val_accuracy"], "val_loss": measured[-1]["val_loss"]}


def _keep_run_figures(ctx: DbRunContext, worker: str, figures: RunFigures) -> None:
    """On the run's own row (the usage API's runs), however the run ended. Written here,
    where any exception may be on its way out: a database that is away now costs this run's
    figures only, never the run or the error it is raising."""
    try:
        with transaction(ctx.services.sessions) as session:
            usage.set_run_figures(session, ctx.job_uuid, worker, figures.as_dict())
    except TRANSIENT_ERRORS:
        log.warning("could not keep the device figures of this run of job %s", ctx.job_id)


def _storage_outage(
    services: Services, job_id: uuid.UUID, worker: str, exc: StorageUnavailable
) -> Outcome:
    """Fail the job if the store has been away longer than the limit; else hand it back
    to the queue without consuming an attempt, and let the caller retry later."""
    limit = services.settings.storage_outage_limit_seconds
    if exc.outage_seconds >= limit:
        return Outcome.failed(
            "storage unavailable",
            f"the object store was unreachable for {exc.outage_seconds:.0f}s, longer than "
            f"storage_outage_limit_seconds ({limit:.0f}s): {exc}. An infrastructure outage, "
            "not a problem of the job: resubmit it once the store is back.",
        )
    try:
        with transaction(services.sessions) as session:
            reason = f"object store unavailable ({exc}); handed back"
            handback.hand_back(session, job_id, worker, reason, preempted=False)
    except Exception:  # the database may be away too; the lease covers that
        log.warning("could not hand job %s back; its lease will expire", job_id)
    raise TransientFailure(str(exc)) from exc


def _requeue_best_effort(services: Services, job_id: uuid.UUID, reason: str) -> None:
    try:
        with transaction(services.sessions) as session:
            claims.requeue_job(session, job_id, reason)
    except Exception:  # the database may be the thing that is down; the lease covers that
        log.warning("could not requeue job %s; its lease will expire", job_id)
