"""What one worker process holds: its settings, and, built lazily after the fork, its
database services and the device it offers."""

from __future__ import annotations

from functools import cached_property

from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.device import local_offer


class WorkerProcess:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @cached_property
    def services(self) -> Services:
        # Built on first use in the pool process: one engine per process, none across a fork.
        return Services.from_settings(self.settings)

    @cached_property
    def offer(self) -> Offer:
        # Asked in the pool process too: CUDA must not be initialised before the fork.
        return local_offer(self.settings)
