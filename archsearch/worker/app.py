"""The Celery application of the workers, built from Settings by `create_app`.

The caller (the `archsearch worker` command) builds Settings at the edge and passes them
in, e.g. `create_app(Settings(worker_device="cuda")).worker_main([...])`; nothing here reads
the environment. Signals wire the process's life: preload the engine before the pool forks,
record the worker's presence per pool process, and reap expired leases. The database schema
is checked before this process starts, by `archsearch worker` (`run_worker`), which exits
with a message when it is behind the code: a check in a Celery signal could not refuse, as
Celery's signal dispatch only logs a handler's exception.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

import torch
from billiard.process import active_children
from celery import Celery, signals

from archsearch.jobs.domain.jobs import sweeper
from archsearch.jobs.platform.broker import CeleryEnqueuer
from archsearch.jobs.platform.celery_config import celery_config
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.objects import StorageUnavailable
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.device import cap_slot_memory, prepare_training_thread
from archsearch.jobs.runtime.executor import worker_name
from archsearch.jobs.runtime.orphans import sweep_orphans
from archsearch.jobs.runtime.reaper import (
    hold_teams_over_quota,
    preempt_for_waiting_jobs,
    reap_expired,
    wake_for_waiting_jobs,
)
from archsearch.jobs.runtime.studies import advance_open_studies
from archsearch.jobs.runtime.warmup import preload, warm_up
from archsearch.worker.presence import end_presence, start_presence
from archsearch.worker.process import WorkerProcess
from archsearch.worker.tasks import register_tasks

log = logging.getLogger(__name__)
WARM_UP_TIMEOUT = 120.0  # seconds a new pool process may take before it reports up


def create_app(settings: Settings) -> Celery:
    """The worker's Celery app for `settings`, with the task `archsearch.run_job`
    registered and the process signals connected. Start it with `app.worker_main(argv)`."""
    process = WorkerProcess(settings)
    app = Celery("archsearch")
    app.conf.update(celery_config(settings))
    # The pool process warms up before it reports: allow more than Celery's 4 s for that.
    app.conf.worker_proc_alive_timeout = WARM_UP_TIMEOUT
    register_tasks(app, process)
    _connect_signals(process)
    signals.worker_shutting_down.connect(forward_stop_to_pool, weak=False)
    return app


def _connect_signals(process: WorkerProcess) -> None:
    settings = process.settings

    def preload_before_the_fork(**_: object) -> None:
        preload()  # once, in the main process: every pool process inherits the loaded modules

    def register_process(**_: object) -> None:
        # In each pool process, after the fork: its threads, a warm torch, its own engine,
        # and CUDA initialised there. Presence comes last: a listed worker is a warm one.
        started = time.perf_counter()
        threads = prepare_training_thread(settings)
        warm_up(torch.device(process.offer.device))
        cap = cap_slot_memory(settings, process.offer)  # once warm: the cap is the job's
        start_presence(process)
        log.info(
            "worker %s ready: %d torch threads, warmed up in %.2fs (1 of %d slots, cap: %s)",
            worker_name(),
            threads,
            time.perf_counter() - started,
            process.offer.slots,
            cap or "none",
        )

    def unregister_process(**_: object) -> None:
        end_presence(process)

    def start_reaper(**_: object) -> None:
        reaper = threading.Thread(
            target=_reap_forever, args=(settings,), name="archsearch-reaper", daemon=True
        )
        reaper.start()

    # weak=False: these closures have no other reference and must live as long as the app.
    signals.worker_init.connect(preload_before_the_fork, weak=False)
    signals.worker_process_init.connect(register_process, weak=False)
    signals.worker_process_shutdown.connect(unregister_process, weak=False)
    signals.worker_ready.connect(start_reaper, weak=False)
    signals.worker_shutdown.connect(lambda **_: _give_up_sweeps(settings), weak=False)


def forward_stop_to_pool(**_: Any) -> None:
    """In the main process, as its warm shutdown starts (SIGTERM or Ctrl-C, which reach only
    it, e.g. as a pod's PID 1): ask each pool process to stop its job gracefully. The warm
    shutdown then waits for the task, which ends once the job is handed back."""
    for child in active_children():
        if child.pid is not None:
            try:
                os.kill(child.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass  # it already ended


def _reap_forever(settings: Settings) -> None:
    # Imported here, in the main process's reaper thread after the pool started: the webhook
    # client (httpx) has no use in a pool process, which would inherit it from before a fork.
    from archsearch.jobs.domain.webhooks.deliverer import start_deliverer

    services, enqueuer = Services.from_settings(settings), CeleryEnqueuer(settings)
    # Webhooks, in a thread of its own, sending only while this worker holds the sweeps'
    # turn: one worker sender for the fleet (besides the API's), not one query per worker.
    webhooks = start_deliverer(services.sessions, settings, active=False)
    interval, me = max(0.5, settings.lease_seconds / 3), worker_name()
    stop = threading.Event()
    next_sweep = time.monotonic() + settings.orphan_sweep_seconds
    while not stop.wait(interval):
        try:
            webhooks.set_active(mine := _my_turn(services, me, interval))
            if not mine:
                continue  # another worker sweeps (and sends webhooks) for the fleet
            _sweep(services, enqueuer, interval)
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + settings.orphan_sweep_seconds
                sweep_orphans(services)
        except StorageUnavailable as exc:  # an outage of the store: the next tick retries
            log.warning("reaper pass stopped: %s", exc)
        except Exception:  # keep reaping through transient database trouble
            log.exception("reaper pass failed")


def _give_up_sweeps(settings: Settings) -> None:
    """At the main process's stop: another worker's next tick sweeps, rather than the tick
    after this worker's turn expires."""
    try:
        with transaction(Services.from_settings(settings).sessions) as session:
            sweeper.give_up_turn(session, worker_name())
    except Exception:  # the database is out of reach: the turn expires on its own
        log.warning("could not give up the sweeps' turn", exc_info=True)


def _my_turn(services: Services, me: str, interval: float) -> bool:
    """Take or renew the sweeps' turn: one statement a tick, whatever the fleet's size."""
    with transaction(services.sessions) as session:
        return sweeper.take_turn(session, me, interval)


def _sweep(services: Services, enqueuer: CeleryEnqueuer, interval: float) -> None:
    reap_expired(services, enqueuer)
    hold_teams_over_quota(services)
    preempt_for_waiting_jobs(services)
    wake_for_waiting_jobs(services, enqueuer, older_than_seconds=2 * interval)
    advance_open_studies(services)  # the durable study driver's tick
