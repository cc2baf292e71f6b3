"""The device this worker process offers, and its registration in the workers table."""

from __future__ import annotations

import logging
import os
import socket
import threading
from functools import cache

from archsearch.jobs.domain import workers
from archsearch.jobs.domain.scheduler import Offer
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.runtime.executor import local_offer, worker_name
from archsearch.worker.app import settings

log = logging.getLogger(__name__)


@cache
def offer() -> Offer:
    return local_offer(settings)


def _device_details() -> tuple[int | None, str | None]:
    if offer().device != "cuda":
        return None, "cpu"
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    return int(visible) if visible.isdigit() else 0, torch.cuda.get_device_name(0)


def start_registration() -> None:
    """Heartbeat this process's row in `workers` until it exits."""
    from archsearch.worker.tasks import runtime

    index, name = _device_details()
    interval = max(0.5, settings.lease_seconds / 3)

    def beat() -> None:
        while True:
            try:
                with transaction(runtime().sessions) as session:
                    workers.heartbeat(
                        session, worker_name(), socket.gethostname(), offer(), index, name
                    )
            except Exception:  # keep beating through transient database trouble
                log.warning("worker heartbeat failed", exc_info=True)
            threading.Event().wait(interval)

    threading.Thread(target=beat, name="worker-heartbeat", daemon=True).start()


def unregister() -> None:
    from archsearch.worker.tasks import runtime

    with transaction(runtime().sessions) as session:
        workers.unregister(session, worker_name())
