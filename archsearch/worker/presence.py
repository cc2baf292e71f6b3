"""A worker process's presence in the `workers` table: registered when its pool process
starts, its `heartbeat_at` moved every third of a lease while it lives, removed when it
stops. `GET /v1/workers` and the scheduler's "no worker is running" read it.

Each heartbeat also touches the worker's alive file (`Settings.worker_alive_file`), whose
age `archsearch worker alive` checks as the pods' liveness probe. It is touched whether the
database write succeeded or failed: an outage of the database is not cured by restarting
the worker, but a heartbeat that stops turning (the process wedged, or a database call that
never returns) is.
"""

from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path

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
    alive_file = process.settings.resolved_worker_alive_file

    def keep_present() -> None:
        while True:
            try:
                with transaction(process.services.sessions) as session:
                    worker_repository.record_presence(
                        session, worker_name(), host, process.offer, index, device_name
                    )
            except Exception:  # keep going through transient database trouble
                log.warning("worker presence update failed", exc_info=True)
            prove_alive(alive_file)
            threading.Event().wait(interval)

    thread = threading.Thread(target=keep_present, name="worker-presence", daemon=True)
    thread.start()
    return thread


def prove_alive(alive_file: Path) -> None:
    """Move the alive file's modification time to now (creating it and its folder)."""
    try:
        alive_file.parent.mkdir(parents=True, exist_ok=True)
        alive_file.touch()
    except OSError:  # a full or read-only scratch disk: the probe will say so by failing
        log.warning("cannot touch the worker's alive file %s", alive_file, exc_info=True)


def end_presence(process: WorkerProcess) -> None:
    with transaction(process.services.sessions) as session:
        worker_repository.unregister(session, worker_name())
