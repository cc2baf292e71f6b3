"""A worker is warm before it claims (issue 16): the modules a first job would import lazily
are imported with this module (method modules by `preload`, matplotlib, scikit-learn), and
`warm_up` runs a whole tiny job so the kernels, autograd, the plots and the deployment export
load here, not inside the first real job (which ran 4-5x slower than a warm one)."""

from __future__ import annotations

import logging

import sklearn.datasets  # noqa: F401  (digits)
import sklearn.model_selection  # noqa: F401
import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.catalog import DatasetInfo
from archsearch.core.data.loaders import Dataset
from archsearch.core.export import curves_png
from archsearch.core.methods import get_method
from archsearch.core.spec import METHOD_NAMES, parse_job_spec

log = logging.getLogger(__name__)


def preload() -> None:
    """Import what a first job would import lazily (every method, matplotlib, scikit-learn)
    and draw one small figure (matplotlib's fonts load on the first text it renders).

    Safe before a fork: nothing here starts a thread or touches CUDA.
    """
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
