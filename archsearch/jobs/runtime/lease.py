"""Keeps a running job's lease alive from a background thread.

Training code can go a long time between reports (an evaluation, a growth step's SVD), so
the lease is renewed on a clock, not on progress. If the renewal finds that another attempt
took the job over, `lost` is set and the run stops without recording an outcome. If the
scheduler asked the job to make way for a job of higher priority (`preemption.py`), `stop`
is requested: the run stops as on a SIGTERM, at its next checkpoint, and is handed back.
"""

from __future__ import annotations

import logging
import threading
import uuid
from types import TracebackType

from archsearch.jobs.domain.jobs import claims, preemption
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.stopping import StopRequest

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews `job_id`'s lease every third of `lease_seconds` while the run lasts."""

    def __init__(self, services: Services, job_id: uuid.UUID, worker: str) -> None:
        self.services, self.job_id, self.worker = services, job_id, worker
        self.interval = services.settings.lease_seconds / 3
        self.lost = threading.Event()
        self.stop = StopRequest()  # this job only: a preemption (the process's is `services.stop`)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._renew, name=f"lease-{job_id.hex[:8]}", daemon=True
        )

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def _renew(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with transaction(self.services.sessions) as session:
                    held = claims.renew_lease(
                        session, self.job_id, self.worker, self.services.settings.lease_seconds
                    )
                    wanted_by = preemption.stop_requested_for(session, self.job_id)
            except Exception:  # the database may be briefly away; the next renewal tries
                log.warning("lease renewal of job %s failed", self.job_id, exc_info=True)
                continue
            if not held:
                log.warning("job %s: lease lost to another attempt; stopping", self.job_id)
                self.lost.set()
                return
            if wanted_by is not None:
                grace = self.services.settings.stop_grace_seconds
                self.stop.request(f"job {wanted_by} of higher priority needs this worker", grace)
