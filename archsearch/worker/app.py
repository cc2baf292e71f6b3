"""The Celery application of the workers (`archsearch worker` starts it).

Settings are read here, at the edge, once per process.
"""

from __future__ import annotations

import logging
import threading

from celery import Celery, signals

from archsearch.jobs.platform.celery_config import celery_config
from archsearch.jobs.platform.settings import Settings

log = logging.getLogger(__name__)

settings = Settings()
app = Celery("archsearch", include=["archsearch.worker.tasks"])
app.conf.update(celery_config(settings))


@signals.worker_init.connect
def _refuse_stale_schema(**_: object) -> None:
    from archsearch.jobs.platform.migrate import ensure_schema_current
    from archsearch.jobs.platform.services import Services

    services = Services.from_settings(settings)
    try:
        ensure_schema_current(services.engine)
    finally:
        services.engine.dispose()


@signals.worker_process_init.connect
def _register_process(**_: object) -> None:
    # Torch loads in each pool process, not in the parent before fork, so the first job
    # does not pay for it and no torch thread pool crosses a fork.
    from archsearch.worker.device import start_registration

    start_registration()


@signals.worker_process_shutdown.connect
def _unregister_process(**_: object) -> None:
    from archsearch.worker.device import unregister

    unregister()


@signals.worker_ready.connect
def _start_reaper(**_: object) -> None:
    threading.Thread(target=_reap_forever, name="archsearch-reaper", daemon=True).start()


def _reap_forever() -> None:
    from archsearch.jobs.platform.broker import CeleryEnqueuer
    from archsearch.jobs.platform.services import Services
    from archsearch.jobs.runtime.reaper import reap_expired, wake_for_waiting_jobs

    services, enqueuer = Services.from_settings(settings), CeleryEnqueuer(settings)
    interval = max(0.5, settings.lease_seconds / 3)
    stop = threading.Event()
    while not stop.wait(interval):
        try:
            reap_expired(services, enqueuer)
            wake_for_waiting_jobs(services, enqueuer, older_than_seconds=2 * interval)
        except Exception:  # keep reaping through transient database trouble
            log.exception("reaper pass failed")
