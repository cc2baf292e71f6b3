"""What one API process holds between requests, as one typed object on `app.state`.

`create_app` builds it; `deps.app_state` is the one place that reads it back. Nothing else
keeps process state: routers hold no pools, counters or caches of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from cachetools import TTLCache
from prometheus_client import CollectorRegistry

from archsearch.api.live import LiveJobs
from archsearch.api.served_files import RecentArtifacts
from archsearch.api.signing import SessionSigner
from archsearch.api.throttle import AuthThrottle
from archsearch.api.upload_slots import UploadSlots
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.platform.broker import Enqueuer
from archsearch.jobs.platform.services import Services


@dataclass
class AppState:
    services: Services
    enqueuer: Enqueuer
    live: LiveJobs  # the job feed, kept GET job answers and live streams
    token_cache: TTLCache[str, Principal]  # verified principals by token digest
    session_signer: SessionSigner
    metrics_registry: CollectorRegistry
    upload_slots: UploadSlots
    recent_artifacts: RecentArtifacts
    auth_throttle: AuthThrottle  # failed authentications per address and token prefix
