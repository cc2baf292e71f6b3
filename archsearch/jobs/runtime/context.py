"""A RunContext backed by the database and the object store: how a running job talks out.

When the worker is asked to stop (`services.stop`), or the scheduler asks this job to make
way for one of higher priority (`job_stop`, from the lease renewal), the job ends at its next
checkpoint (right after writing it) or, past the stop's grace, at its next step, by raising
`JobPreempted`.

Progress and metrics are buffered and written at most every `flush_seconds` in one
statement (on PostgreSQL in autocommit: a write a second per running job is the fleet's
largest cost in the database), which also reads the job's cancel flag, so reporting every
step costs a write per flush interval, not one per step. Every point reported before a
checkpoint is stored before the checkpoint is written, so a resumed job has each point
exactly once. The lease is renewed by a separate thread (`lease.LeaseKeeper`).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import torch

from archsearch.core.charts import Chart
from archsearch.core.context import checkpoint_from_bytes, checkpoint_to_bytes
from archsearch.core.errors import ArtifactNotFoundError, JobCancelled
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.platform.db import single_statement, transaction
from archsearch.jobs.platform.objects import ObjectMissing
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.stopping import StopRequest
from archsearch.schemas.jobs import JobStatus


class JobPreempted(JobCancelled):
    """The worker is stopping (`services.stop`): the job goes back to the queue, not ended.
    A `JobCancelled`, so engine code that lets a cancellation through lets this through."""


class DbRunContext:
    def __init__(
        self,
        services: Services,
        job_id: uuid.UUID,
        device: torch.device,
        lease_lost: threading.Event,
        flush_seconds: float = 0.5,
        *,
        job_stop: StopRequest | None = None,
        pruning: Callable[[int, float], bool] | None = None,
    ) -> None:
        self.lease_lost = lease_lost
        self.stops = (services.stop, job_stop or StopRequest())  # the process's, the job's
        self.services = services
        self.job_uuid = job_id
        self.job_id = str(job_id)
        self.device = device
        self.flush_seconds = flush_seconds
        self._pending: list[tuple[int, str, float]] = []
        self._latest: dict[str, float] = {}
        self._step, self._total = 0, 0
        self._last_flush = 0.0
        self._cancel_requested = False
        self.pruning = pruning  # a study trial's pruner (`studies.trial_pruning`), if any

    def report(self, step: int, total: int, **metrics: float) -> None:
        self._step, self._total = step, total
        for name, value in metrics.items():
            self._pending.append((step, name, float(value)))
            self._latest[name] = float(value)
        if time.monotonic() - self._last_flush >= self.flush_seconds or step >= total:
            self.flush()

    def flush(self) -> None:
        with single_statement(self.services.sessions) as session:
            self._cancel_requested = repository.record_progress(
                session, self.job_uuid, self._step, self._total, dict(self._latest), self._pending
            )
        self._pending = []
        self._last_flush = time.monotonic()

    def should_stop(self) -> bool:
        if self.lease_lost.is_set():
            return True  # another attempt owns the job now; stop without recording anything
        stop = self._stop_requested()
        if stop is not None and stop.overdue():
            # No checkpoint came in time: stop at this step; the next attempt resumes from
            # the previous checkpoint, and re-reported points overwrite their own rows.
            raise JobPreempted(f"{stop.reason}, before its next checkpoint")
        if time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush()
        return self._cancel_requested

    def should_prune(self, epoch: int, value: float) -> bool:
        if self.pruning is None or self.lease_lost.is_set():
            return False
        return self.pruning(epoch, value)

    def save_artifact(self, name: str, data: bytes, media_type: str) -> None:
        stored = self.services.store.write_artifact(self.job_uuid, name, data)
        with transaction(self.services.sessions) as session:
            repository.upsert_artifact(session, self.job_uuid, name, media_type, stored)

    def save_chart(self, name: str, chart: Chart) -> None:
        # Drawn on first download (`jobs.domain.jobs.charts`): most charts are never opened.
        with transaction(self.services.sessions) as session:
            repository.add_chart(session, self.job_uuid, name, chart)

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        # Metrics first: a worker killed between the two writes then leaves points past the
        # checkpoint, which the resumed attempt reports again and `record_metrics` upserts.
        # The other order left a checkpoint past the stored points: that epoch never came back.
        self.flush()
        self.services.store.write_checkpoint(self.job_uuid, checkpoint_to_bytes(state))
        if (stop := self._stop_requested()) is not None:  # stopping: here is a clean place
            raise JobPreempted(f"{stop.reason}, at a checkpoint")

    def _stop_requested(self) -> StopRequest | None:
        return next((stop for stop in self.stops if stop.requested), None)

    def load_checkpoint(self) -> dict[str, Any] | None:
        data = self.services.store.read_checkpoint(self.job_uuid)
        return None if data is None else checkpoint_from_bytes(data)

    def read_job_artifact(self, job_id: str, name: str) -> bytes:
        try:
            other = uuid.UUID(job_id)
            with transaction(self.services.sessions) as session:
                job = repository.get_job(session, other)
                if job.status is not JobStatus.succeeded:
                    raise ArtifactNotFoundError(
                        f"job {job_id} is {job.status.value}, not succeeded"
                    )
                repository.get_artifact(session, other, name)
            return self.services.store.read_artifact(other, name)
        except (ValueError, NotFound, ObjectMissing) as exc:
            raise ArtifactNotFoundError(f"job {job_id} has no artifact {name!r}") from exc
