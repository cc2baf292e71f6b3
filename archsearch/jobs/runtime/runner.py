"""Embedded mode's queue: worker threads in the server process, same executor as Celery.

A submitted job only wakes a thread; the thread then asks the scheduler for the next job,
exactly as a Celery worker does. On start it recovers what a previous process left: running
jobs (that process died) go back to the queue and resume from their checkpoints. Stopped
(SIGTERM, Ctrl-C), it hands its running jobs back at their next checkpoint without spending
an attempt.
"""

from __future__ import annotations

import logging
import threading
import uuid

from archsearch.jobs.domain.jobs import claims, repository
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.services import Services
from archsearch.schemas.jobs import JobStatus

log = logging.getLogger(__name__)
EMBEDDED_OFFER = Offer("any")  # one machine: the job itself finds CUDA or falls back to CPU


class LocalRunner:
    def __init__(self, services: Services, threads: int = 1, retry_seconds: float = 5.0) -> None:
        self.services = services
        self.retry_seconds = retry_seconds
        self._wake = threading.Semaphore(0)
        self._stopping = False
        self._has_cuda: bool | None = None
        self._threads = [
            threading.Thread(target=self._work, name=f"archsearch-runner-{i}", daemon=True)
            for i in range(threads)
        ]

    def start(self) -> None:
        self._recover()
        for thread in self._threads:
            thread.start()
            self._wake.release()  # look at the queue once at start

    def stop(self, timeout: float | None = None) -> None:
        """Hand the running jobs back to the queue at their next checkpoint (their attempts
        unchanged; the next start resumes them), then end the threads. `timeout`: how long
        to wait for that; default the stop's grace and a lease more."""
        self._stopping = True
        settings = self.services.settings
        self.services.stop.request("server stopping", settings.stop_grace_seconds)
        for _ in self._threads:
            self._wake.release()
        if timeout is None:
            timeout = settings.stop_grace_seconds + settings.lease_seconds
        for thread in self._threads:
            thread.join(timeout)

    def enqueue(self, job_id: uuid.UUID, device: str = "auto") -> None:
        self._wake.release()

    def can_ever_offer(self, device: str) -> bool:
        """This process's threads are the only workers: a CUDA job needs CUDA here (torch is
        imported for the answer, once, only when a job asks for CUDA)."""
        if device != "cuda":
            return True
        if self._has_cuda is None:
            from archsearch.jobs.runtime.device import local_offer

            self._has_cuda = local_offer(self.services.settings).device == "cuda"
        return self._has_cuda

    def ping(self) -> bool:
        return all(thread.is_alive() for thread in self._threads)

    def _recover(self) -> None:
        with transaction(self.services.sessions) as session:
            for job_id in repository.job_ids_with_status(session, JobStatus.running):
                claims.requeue_job(session, job_id, "server restarted while the job ran")

    def _work(self) -> None:
        from archsearch.jobs.runtime.device import prepare_training_thread
        from archsearch.jobs.runtime.executor import (  # torch loads with the first job
            TransientFailure,
            execute_next,
        )

        # The threads are the process's: each runner thread sets the same share.
        prepare_training_thread(self.services.settings)

        while True:
            self._wake.acquire()
            if self._stopping:
                return
            try:
                while (
                    not self._stopping and execute_next(self.services, EMBEDDED_OFFER) is not None
                ):
                    pass  # drain: run jobs until none is eligible
            except TransientFailure:
                log.warning(
                    "transient error; looking at the queue again in %ss", self.retry_seconds
                )
                threading.Timer(self.retry_seconds, self._wake.release).start()
            except Exception:  # never let one job kill the runner thread
                log.exception("runner failed")
