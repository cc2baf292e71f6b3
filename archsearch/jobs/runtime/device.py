"""Device choice, in one place: what a worker process offers the scheduler, and the torch
device a claimed job runs on. The process is pinned to at most one GPU
(CUDA_VISIBLE_DEVICES), so "cuda" always means device 0 of what this process sees."""

from __future__ import annotations

import logging
import os

import torch

from archsearch.core.errors import UserError
from archsearch.core.float_mode import flush_denormals
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.platform.settings import Settings
from archsearch.specs import JobBase

log = logging.getLogger(__name__)


def pick_device(spec: JobBase) -> torch.device:
    wanted = spec.resources.device
    if wanted == "cuda" and not torch.cuda.is_available():
        error = UserError(
            "the job asks for a CUDA device but this worker has none; use 'auto' or 'cpu'"
        )
        error.field = "resources.device"
        raise error
    return torch.device("cuda" if wanted != "cpu" and torch.cuda.is_available() else "cpu")


def local_offer(settings: Settings) -> Offer:
    """What this process offers: its CUDA device (the one it is pinned to) or the CPU."""
    use_cuda = settings.worker_device == "cuda" or (
        settings.worker_device == "auto" and torch.cuda.is_available()
    )
    if not use_cuda:
        return Offer("cpu")
    properties = torch.cuda.get_device_properties(0)  # CUDA_VISIBLE_DEVICES pins one device
    return Offer("cuda", properties.total_memory / 2**30)


def device_details(offer: Offer) -> tuple[int | None, str | None]:
    """The GPU index and name a worker shows in `GET /v1/workers` ("cpu" on a CPU)."""
    if offer.device != "cuda":
        return None, "cpu"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    return int(visible) if visible.isdigit() else 0, torch.cuda.get_device_name(0)


def apply_torch_threads(settings: Settings) -> int:
    """Set this process's torch threads from the settings; returns the count."""
    threads = settings.resolved_torch_threads
    torch.set_num_threads(threads)
    return threads


def prepare_training_thread(settings: Settings) -> int:
    """Call first in every thread that runs jobs (a pool process's main thread, each
    embedded runner thread): its torch threads, and subnormal floats flushed to zero
    (`core.float_mode.flush_denormals`: a per-thread flag). Returns the torch threads."""
    if not flush_denormals():
        log.warning("this CPU cannot flush subnormal floats; soft prune masks may run slowly")
    return apply_torch_threads(settings)
