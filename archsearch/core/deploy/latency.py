"""Inference latency measured fairly: variants interleaved, medians of repeats.

Timing one variant after another lets frequency scaling, cache state and neighbours on a
shared machine favour whichever ran last; here every repeat runs each variant once, in an
order rotated per repeat, and the median per variant is reported with the repeat count.
The measurement is bounded by a wall-clock budget (a job spends about a second on it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

WARMUP = 3
MIN_REPEATS = 5
# A median of 50 interleaved repeats is stable to a few percent on a quiet CPU; more repeats
# cost every job time (200 measured 12% of a 2-epoch MNIST MLP job).
MAX_REPEATS = 50


def interleaved_medians(
    variants: dict[str, Callable[[], object]], budget_s: float
) -> dict[str, dict[str, float]]:
    """Per variant: median seconds of one call, repeats and the order's interleaving.

    Repeats continue until the budget is spent (at least MIN_REPEATS, at most MAX_REPEATS).
    """
    names = list(variants)
    with torch.inference_mode():
        warm_start = time.perf_counter()
        for _ in range(WARMUP):  # one round at least; more only while cheap (big models)
            for name in names:
                variants[name]()
            if time.perf_counter() - warm_start > budget_s / 5:
                break
        times: dict[str, list[float]] = {name: [] for name in names}
        start = time.perf_counter()
        repeat = 0
        while repeat < MAX_REPEATS and (
            repeat < MIN_REPEATS or time.perf_counter() - start < budget_s
        ):
            shift = repeat % len(names)
            for name in names[shift:] + names[:shift]:  # rotated: no variant always first
                t0 = time.perf_counter()
                variants[name]()
                times[name].append(time.perf_counter() - t0)
            repeat += 1
    return {
        name: {"median_s": statistics.median(times[name]), "repeats": float(len(times[name]))}
        for name in names
    }


def model_latencies(
    models: dict[str, torch.nn.Module],
    input_shape: tuple[int, ...],
    batches: tuple[int, ...],
    budget_s: float,
) -> dict[str, dict[str, float]]:
    """`{"batch_1": {"dense_s": .., "compact_s": .., "repeats": ..}, ...}` on the CPU."""
    out: dict[str, dict[str, float]] = {}
    for batch in batches:
        x = torch.randn(batch, *input_shape)
        variants = {name: _call(model, x) for name, model in models.items()}
        measured = interleaved_medians(variants, budget_s / len(batches))
        row = {f"{name}_s": m["median_s"] for name, m in measured.items()}
        row["repeats"] = min(m["repeats"] for m in measured.values())
        out[f"batch_{batch}"] = row
    return out


def _call(model: torch.nn.Module, x: torch.Tensor) -> Callable[[], object]:
    return lambda: model(x)
