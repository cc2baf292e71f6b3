"""A worker is warm before it claims: the modules a first job would import lazily
are imported with this module (method modules by `preload`, matplotlib), and `warm_up` runs
a whole tiny job so the kernels, autograd, the plots and the deployment's measurements load
here, not inside the first real job (which ran 4-5x slower than a warm one).

The ONNX export, onnxruntime's session and its check run in a child process each job forks
for them (`core.deploy.forked`): warm-up runs one too, but nothing of it stays in the pool
process (it kept 40-50 MB there for good, the largest part of its peak). Every job's child
starts as cold as the first's: 0.1-0.15 s of CPU for the MNIST MLP's export."""

from __future__ import annotations

import ctypes
import gc
import logging
import threading

import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.catalog import DatasetInfo
from archsearch.core.data.inputs import Inputs
from archsearch.core.data.loaders import Dataset
from archsearch.core.export import curves_png
from archsearch.core.methods import get_method
from archsearch.specs import METHOD_NAMES, parse_job_spec

log = logging.getLogger(__name__)


def preload() -> None:
    """Import what a first job would import lazily (every method, matplotlib) and draw one
    small figure (matplotlib's fonts load on the first text it renders). Not scikit-learn
    (72 MB resident): only building the `digits` cache needs it, once per machine.

    Safe before a fork: nothing here starts a thread or touches CUDA.
    """
    for name in METHOD_NAMES:
        try:
            get_method(name)
        except ImportError:  # its jobs will fail with the error; the other methods still run
            log.warning("method %s cannot be loaded", name, exc_info=True)
    curves_png([{"epoch": 1.0, "train_loss": 1.0, "test_loss": 1.0, "test_accuracy": 0.5}])
    freeze_heap()


def warm_up(device: torch.device) -> None:
    """A whole tiny `train` job in memory on `device` (64 random 8x8 images, one epoch): the
    kernels, the autograd engine, the plots and the deployment's measurements load here,
    not inside the first real job (it ran 4-5x slower than a warm one). Its ONNX export runs
    in a forked child, as every job's does."""
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
    inputs = Inputs.from_tensor(x)
    data = Dataset(info, inputs, y, inputs, y)
    get_method("train")(spec, data, InMemoryContext(device=device))
    freeze_heap()


# Set once this process froze its heap (a fork inherits both the freeze and this flag).
# Not `gc.get_freeze_count()`: it walks every frozen object, 40 ms on a worker's heap.
HEAP_FROZEN = threading.Event()


def freeze_heap() -> None:
    """Exempt every object alive now (the modules, the warm caches: some 450,000) from the
    cyclic garbage collector (`gc.freeze`), after collecting what is garbage already.

    A full collection walked them all: 250 ms of CPU each time, and in a forked pool process
    each walk wrote to the parent's pages and so copied them (Python's documented advice
    for forking servers: freeze before the fork). A job's own garbage (a closed figure's
    reference cycles) is still collected, now cheaply.
    """
    gc.collect()
    gc.freeze()
    HEAP_FROZEN.set()


def thaw_heap() -> None:
    """Undo `freeze_heap`: the collector walks every object again (a test process that
    warmed up a worker's way goes on collecting as usual)."""
    gc.unfreeze()
    HEAP_FROZEN.clear()


# Objects a job leaves alive in a warm, frozen process (caches, a prune job's first
# imports): 800-10,000 measured. Far more means modules a job imported lazily.
REFREEZE_ABOVE = 20_000


def release_memory() -> None:
    """After a job: collect its cyclic garbage now and hand freed heap pages back to the
    system (glibc's `malloc_trim`; elsewhere a no-op).

    A closed matplotlib figure lives in reference cycles until a full collection, which a
    worker ran rarely: resident memory crept by about 3 MB a job. With `freeze_heap` the
    collection is cheap (1-4 ms); the trim takes 0.2-6 ms and gives back 15-20 MB.

    In a process whose heap was frozen, survivors beyond `REFREEZE_ABOVE` are frozen too:
    a lazy import after the warm-up (scikit-learn building the `digits` cache on a new
    machine: 75,000 objects) otherwise made every later collection walk them, 50 ms after
    every job for the worker's lifetime (the gap between one job's end and the next's start).
    """
    gc.collect()
    if HEAP_FROZEN.is_set() and len(gc.get_objects(generation=2)) > REFREEZE_ABOVE:
        gc.freeze()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
