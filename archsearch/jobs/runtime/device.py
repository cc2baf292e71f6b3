"""Device choice, in one place: what a worker process offers the scheduler, and the torch
device a claimed job runs on. The process is pinned to at most one GPU
(CUDA_VISIBLE_DEVICES), so "cuda" always means device 0 of what this process sees.

A worker with K slots (`Settings.worker_slots`) runs K pool processes on one device, each
capped to its share of memory (`cap_slot_memory`): on CUDA a fraction 1/K of the GPU, which
the caching allocator enforces; on CPU, with `worker_slot_memory_gb`, an RLIMIT_DATA of the
warm process's size plus the cap (private writable memory: the heap and torch's and numpy's
buffers, not the read-only memory-mapped datasets), which makes an allocation beyond it fail
in that process alone. A job that hits its cap fails with `out_of_memory_message`.
"""

from __future__ import annotations

import logging
import os
import resource

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
    slots = settings.worker_slots
    if not use_cuda:
        return Offer("cpu", slots=slots)
    properties = torch.cuda.get_device_properties(0)  # CUDA_VISIBLE_DEVICES pins one device
    return Offer("cuda", properties.total_memory / 2**30 / slots, slots)


def cap_slot_memory(settings: Settings, offer: Offer) -> str | None:
    """In a pool process, once it is warm: hold it to its slot's memory. Returns the cap
    in words for the log (None: uncapped)."""
    if offer.device == "cuda" and offer.slots > 1:
        torch.cuda.set_per_process_memory_fraction(offer.device_share, 0)
        return f"{offer.gpu_memory_gb:.1f} GB of GPU memory (1/{offer.slots} of the GPU)"
    if offer.device == "cpu" and settings.worker_slot_memory_gb is not None:
        warm = _private_data_bytes()
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = warm + int(settings.worker_slot_memory_gb * 2**30)
        soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        return f"{settings.worker_slot_memory_gb:g} GB beyond its warm {warm / 2**30:.2f} GB"
    return None


def _private_data_bytes() -> int:
    """This process's private writable memory (VmData), which RLIMIT_DATA bounds."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmData line: a slot memory cap needs Linux")


def is_out_of_memory(exc: BaseException) -> bool:
    """An allocation refused: CUDA's, numpy's, or torch's CPU allocator's (a RuntimeError)."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)


def out_of_memory_message(settings: Settings, device: torch.device | None) -> str:
    """What a job that ran out of memory is told: its slot's cap when it has one."""
    slots = settings.worker_slots
    if device is not None and device.type == "cuda" and slots > 1:
        total = torch.cuda.get_device_properties(0).total_memory / 2**30
        return (
            f"the job ran out of the {total / slots:.1f} GB of GPU memory its worker slot "
            f"allows ({slots} jobs share this GPU: ARCHSEARCH_WORKER_SLOTS); lower "
            "training.batch_size or the model size, or ask for more with "
            "resources.min_gpu_memory_gb so that only a larger slot takes it"
        )
    cap = settings.worker_slot_memory_gb
    if (device is None or device.type == "cpu") and cap is not None:
        return (
            f"the job ran out of the {cap:g} GB of memory its worker slot allows "
            "(ARCHSEARCH_WORKER_SLOT_MEMORY_GB); lower training.batch_size or the model "
            "size, or run it on workers with larger (or fewer) slots"
        )
    return "the job ran out of device memory; lower training.batch_size or the model size"


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
