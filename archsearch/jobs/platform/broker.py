"""Waking workers. PostgreSQL holds the truth; a queue message only says "look at the queue".

Messages go to the queue of the device a job needs: `<queue>.cpu`, `<queue>.cuda`, or the
shared `<queue>` for jobs that run anywhere; a worker listens to the shared queue and its
own device's. The API enqueues by task name through a bare Celery client, so it never
imports `worker`.

A wake-up is a hint, not the job: when the broker is down, a submit still stores its job
`queued` and answers, and the workers' periodic wake-up for waiting jobs
(`runtime.reaper.wake_for_waiting_jobs`) sends it once the broker is back. So publishing is
bounded by short timeouts instead of Celery's patient defaults, which would hold a request
for seconds on an unreachable broker.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from celery import Celery

from archsearch.jobs.platform.celery_config import RUN_JOB_TASK, celery_config
from archsearch.jobs.platform.settings import Settings

PUBLISH_TIMEOUT_SECONDS = 1.0  # to connect to the broker, and for each of its answers
PUBLISH_RETRY_POLICY = {  # one quick retry rides out a connection the broker just reset
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
}


def device_queue(settings: Settings, device: str) -> str:
    return settings.queue_name if device == "auto" else f"{settings.queue_name}.{device}"


class Enqueuer(Protocol):
    def enqueue(self, job_id: uuid.UUID, device: str = "auto") -> None: ...

    def ping(self) -> bool: ...

    def can_ever_offer(self, device: str) -> bool:
        """False only when no worker of this deployment can ever run a job on `device`."""
        ...


def publisher_config(settings: Settings) -> dict[str, Any]:
    """The shared Celery configuration with the publisher's short broker timeouts."""
    config = celery_config(settings)
    config["broker_connection_timeout"] = PUBLISH_TIMEOUT_SECONDS
    config["broker_transport_options"] = {
        **config["broker_transport_options"],
        "socket_connect_timeout": PUBLISH_TIMEOUT_SECONDS,
        "socket_timeout": PUBLISH_TIMEOUT_SECONDS,
    }
    return config


class CeleryEnqueuer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app = Celery("archsearch-client")
        self.app.conf.update(publisher_config(settings))

    def can_ever_offer(self, device: str) -> bool:
        return True  # workers of any device may join later; see the job's pending_reason

    def enqueue(self, job_id: uuid.UUID, device: str = "auto") -> None:
        """Publish a wake-up, or raise the broker's error within a few seconds at most."""
        self.app.send_task(
            RUN_JOB_TASK,
            args=[str(job_id)],
            queue=device_queue(self.settings, device),
            retry_policy=PUBLISH_RETRY_POLICY,
        )

    def ping(self) -> bool:
        try:
            with self.app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, timeout=2)
            return True
        except Exception:  # any broker failure means "not ready"
            return False
