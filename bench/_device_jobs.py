"""Engine jobs run in this process on a chosen device, for `bench/precision.py` and
`bench/gpu.py`: a method's default spec (with a few overrides), run through the entry point
the worker calls (`core.methods.get_method`) with an in-memory context."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.float_mode import flush_denormals
from archsearch.core.methods import get_method
from archsearch.core.training import seed_everything
from archsearch.specs import DatasetRef, JobBase, parse_job_spec
from archsearch.specs.common import merge_over_defaults

# The methods a job can be submitted with on its own (transfer needs a prune job first).
METHODS = ("train", "search", "prune", "grow")


@dataclass(frozen=True)
class JobRun:
    method: str
    precision: str
    seconds: float  # wall clock of the engine run (data already loaded)
    test_accuracy: float
    steps: int


def job_spec(method: str, dataset: str, overrides: dict[str, Any] | None = None) -> JobBase:
    """`method`'s default job on `dataset`, with `overrides` merged over it."""
    given = {"method": method, "dataset": {"name": dataset}}
    return parse_job_spec(merge_over_defaults(given, overrides or {}))


def load(spec: JobBase, data_dir: Path) -> Dataset:
    ref: DatasetRef = spec.dataset
    return load_dataset(ref, (data_dir,), seed=spec.training.seed)


def run_job(spec: JobBase, data: Dataset, device: torch.device) -> JobRun:
    """Run `spec` on `device` once and time it (CUDA work is waited for before the clock)."""
    flush_denormals()
    seed_everything(spec.training.seed)
    ctx = InMemoryContext(device=device)
    _sync(device)
    start = time.perf_counter()
    result = get_method(spec.method)(spec, data, ctx)
    _sync(device)
    seconds = time.perf_counter() - start
    steps = ctx.reports[-1][0] if ctx.reports else 0
    accuracy = float(result.metrics.get("test_accuracy", float("nan")))
    return JobRun(spec.method, spec.training.precision, seconds, accuracy, steps)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
