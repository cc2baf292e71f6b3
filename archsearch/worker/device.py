"""The device this worker process offers, and its registration in the workers table."""

from __future__ import annotations

import logging
import socket
import threading
from functools import cache

from archsearch.jobs.domain import workers
from archsearch.jobs.domain.scheduler import Offer
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.runtime.device import device_details, local_offer
from archsearch.jobs.runtime.executor import worker_name
from archsearch.worker.app import settings

log = logging.getLogger(__name__)


@cache
def offer() -> Offer:
    return local_offer(settings)


def start_registration() -> None:
    """Heartbeat this process's row in `workers` until it exits."""
    from archsearch.worker.tasks import services

    index, name = device_details(offer())
    interval = max(0.5, settings.lease_seconds / 3)

    def beat() -> None:
        while True:
            try:
                with transaction(services().sessions) as session:
                    workers.heartbeat(
                        session, worker_name(), socket.gethostname(), offer(), index, name
                    )
            except Exception:  # keep beating through transient database trouble
                log.warning("worker heartbeat failed", exc_info=True)
            threading.Event().wait(interval)

    threading.Thread(target=beat, name="worker-heartbeat", daemon=True).start()


def unregister() -> None:
    from archsearch.worker.tasks import services

    with transaction(services().sessions) as session:
        workers.unregister(session, worker_name())
