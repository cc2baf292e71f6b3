"""Waking workers. PostgreSQL holds the truth; a queue message only says "look at the queue".

Messages go to the queue of the device a job needs: `<queue>.cpu`, `<queue>.cuda`, or the
shared `<queue>` for jobs that run anywhere; a worker listens to the shared queue and its
own device's. The API enqueues by task name through a bare Celery client, so it never
imports `worker`.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from celery import Celery

from archsearch.jobs.platform.celery_config import RUN_JOB_TASK, celery_config
from archsearch.jobs.platform.settings import Settings


def device_queue(settings: Settings, device: str) -> str:
    return settings.queue_name if device == "auto" else f"{settings.queue_name}.{device}"


class Enqueuer(Protocol):
    def enqueue(self, job_id: uuid.UUID, device: str = "auto") -> None: ...

    def ping(self) -> bool: ...

    def can_ever_offer(self, device: str) -> bool:
        """False only when no worker of this deployment can ever run a job on `device`."""
        ...


class CeleryEnqueuer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app = Celery("archsearch-client")
        self.app.conf.update(celery_config(settings))

    def can_ever_offer(self, device: str) -> bool:
        return True  # workers of any device may join later; see the job's pending_reason

    def enqueue(self, job_id: uuid.UUID, device: str = "auto") -> None:
        self.app.send_task(
            RUN_JOB_TASK, args=[str(job_id)], queue=device_queue(self.settings, device)
        )

    def ping(self) -> bool:
        try:
            with self.app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, timeout=2)
            return True
        except Exception:  # any broker failure means "not ready"
            return False
