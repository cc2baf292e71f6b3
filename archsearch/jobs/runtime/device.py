"""Device choice, in one place: what a worker process offers the scheduler, and the torch
device a claimed job runs on. The process is pinned to at most one GPU
(CUDA_VISIBLE_DEVICES), so "cuda" always means device 0 of what this process sees."""

from __future__ import annotations

import logging
import os

import torch

from archsearch.core.errors import UserError
from archsearch.core.spec import JobBase
from archsearch.jobs.domain.offer import Offer
from archsearch.jobs.platform.settings import Settings

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
    """Set this process's torch threads from the settings (issue 16); returns the count."""
    threads = settings.resolved_torch_threads
    torch.set_num_threads(threads)
    return threads


def preload() -> None:
    """Import what a first job would import lazily (every method, matplotlib, scikit-learn)
    and draw one small figure (matplotlib's fonts load on the first text it renders).

    Safe before a fork: nothing here starts a thread or touches CUDA.
    """
    import sklearn.datasets  # noqa: F401  (digits)
    import sklearn.model_selection  # noqa: F401

    from archsearch.core.export import curves_png
    from archsearch.core.methods import get_method
    from archsearch.core.spec import METHOD_NAMES

    for name in METHOD_NAMES:
        try:
            get_method(name)
        except ImportError:  # its jobs will fail with the error; the other methods still run
            log.warning("method %s cannot be loaded", name, exc_info=True)
    curves_png([{"epoch": 1.0, "train_loss": 1.0, "test_loss": 1.0, "test_accuracy": 0.5}])


def warm_up(device: torch.device) -> None:
    """A whole tiny `train` job in memory on `device` (64 random 8x8 images, one epoch): the
    kernels, the autograd engine, the plots, the deployment export and its ONNX check load
    here, not inside the first real job (issue 16: it ran 4-5x slower than a warm one)."""
    from archsearch.core.context import InMemoryContext
    from archsearch.core.data.catalog import DatasetInfo
    from archsearch.core.data.loaders import Dataset
    from archsearch.core.methods import get_method
    from archsearch.core.spec import parse_job_spec

    n = 64
    info = DatasetInfo("warm-up", "random images", (1, 8, 8), 10, n, n, (0.0,), (1.0,))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, 1, 8, 8, generator=generator)  # (N, C, H, W)
    y = torch.arange(n) % 10
    spec = parse_job_spec(
        {
            "method": "train",
            "dataset": {"name": "digits"},
            "model": {"name": "mlp", "hidden": [8]},
            "training": {"epochs": 1, "batch_size": 16},
        }
    )
    get_method("train")(spec, Dataset(info, x, y, x, y), InMemoryContext(device=device))
