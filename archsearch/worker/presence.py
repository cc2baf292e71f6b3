"""A worker process's presence in the `workers` table: registered when its pool process
starts, its `heartbeat_at` moved every third of a lease while it lives, removed when it
stops. `GET /v1/workers` and the scheduler's "no worker is running" read it."""

from __future__ import annotations

import logging
import socket
import threading

from archsearch.jobs.domain.jobs import worker_repository
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.runtime.device import device_details
from archsearch.jobs.runtime.executor import worker_name
from archsearch.worker.process import WorkerProcess

log = logging.getLogger(__name__)


def start_presence(process: WorkerProcess) -> threading.Thread:
    """Record this process in `workers` now and every third of a lease until it exits."""
    index, device_name = device_details(process.offer)
    interval = max(0.5, process.settings.lease_seconds / 3)
    host = socket.gethostname()

    def keep_present() -> None:
        while True:
            try:
                with transaction(process.services.sessions) as session:
                    worker_repository.record_presence(
                        session, worker_name(), host, process.offer, index, device_name
                    )
            except Exception:  # keep going through transient database trouble
                log.warning("worker presence update failed", exc_info=True)
            threading.Event().wait(interval)

    thread = threading.Thread(target=keep_present, name="worker-presence", daemon=True)
    thread.start()
    return thread


def end_presence(process: WorkerProcess) -> None:
    with transaction(process.services.sessions) as session:
        worker_repository.unregister(session, worker_name())
