"""Inference latency as a property of the model, not of how busy the machine was.

Each call is timed by the CPU time of the calling thread (`time.thread_time_ns`) with torch
on one thread: the work of a call runs on that thread alone, and time the thread spends
waiting for a core that another process holds is not counted. The figure is the fastest
call's CPU time (less the clock's own cost, `clock_floor`): what disturbs a call on a busy
machine only ever adds to it (its caches emptied by a neighbour, a core shared under it), so
the fastest of N calls is the undisturbed cost. On a shared 2-core machine, quiet against two
busy loops (8 alternations, the MNIST MLP at 10% density, 30 calls a variant), the fastest
call's CPU time moved by 16% at worst, the median call's by 80%; `bench/latency.py` compares
a job's figures so. The wall clock's median is kept beside it: what a call took on this
machine while it was measured. Several threads would put part of the work on pool threads
whose CPU time the caller's clock does not see, and make the wall clock depend on free cores
(two torch threads on a busy 2-core machine measured the digits MLP's batch-64 call at
48 ms, against 0.1 ms on one).

Variants are interleaved: every repeat runs each variant once, in an order rotated per
repeat, so frequency scaling and cache state favour none of them. Repeats stop at
TARGET_CALLS calls of each variant or when the wall-clock budget is spent (after at least
MIN_REPEATS), whichever comes first.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

THREADS = 1
WARMUP = 3
MIN_REPEATS = 5
# Enough calls that some run undisturbed on a busy machine (bench/latency.py), and no more
# than a job made before the figure was CPU time: at the default MLP's tens of microseconds a
# call, a few milliseconds.
TARGET_CALLS = 50


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch on THREADS threads for the measurement; the caller's count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def timed_call(call: Callable[[], object]) -> tuple[float, float]:
    """(thread CPU seconds, wall seconds) of one call."""
    cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
    call()
    wall_end, cpu_end = time.perf_counter_ns(), time.thread_time_ns()
    return (cpu_end - cpu) * 1e-9, (wall_end - wall) * 1e-9


def _warm_up(variants: dict[str, Callable[[], object]], budget_s: float) -> None:
    start = time.perf_counter()
    for _ in range(WARMUP):  # one round at least; more only while cheap (big models)
        for call in variants.values():
            call()
        if time.perf_counter() - start > budget_s / 5:
            break


def _repeat(
    variants: dict[str, Callable[[], object]], budget_s: float
) -> dict[str, list[tuple[float, float]]]:
    names = list(variants)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    start = time.perf_counter()
    repeat = 0
    while repeat < TARGET_CALLS and (
        repeat < MIN_REPEATS or time.perf_counter() - start < budget_s
    ):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:  # rotated: no variant always first
            times[name].append(timed_call(variants[name]))
        repeat += 1
    return times


def clock_floor() -> float:
    """Thread CPU seconds `timed_call` reports for a call that does nothing: the clock's own
    cost (a system call; about a microsecond, a tenth of a small model's onnxruntime call)."""
    return min(timed_call(lambda: None)[0] for _ in range(TARGET_CALLS))


def interleaved_timings(
    variants: dict[str, Callable[[], object]], budget_s: float
) -> dict[str, dict[str, float]]:
    """Per variant: `cpu_s` (the fastest call's thread CPU seconds, on THREADS threads, the
    clock's cost removed), `wall_median_s` (the calls' median wall clock) and `repeats`."""
    with one_thread(), torch.inference_mode():
        _warm_up(variants, budget_s)
        floor = clock_floor()
        times = _repeat(variants, budget_s)
    return {
        name: {
            "cpu_s": max(0.0, min(cpu for cpu, _ in calls) - floor),
            "wall_median_s": statistics.median(wall for _, wall in calls),
            "repeats": float(len(calls)),
        }
        for name, calls in times.items()
    }


def model_latencies(
    models: dict[str, torch.nn.Module],
    input_shape: tuple[int, ...],
    batches: tuple[int, ...],
    budget_s: float,
) -> dict[str, dict[str, float]]:
    """`{"batch_1": {"dense_s": .., "dense_wall_s": .., "compact_s": .., "repeats": ..}, ...}`
    on the CPU: `<variant>_s` the fastest call's thread CPU time, `<variant>_wall_s` the
    calls' median wall clock (`interleaved_timings`)."""
    out: dict[str, dict[str, float]] = {}
    for batch in batches:
        x = torch.randn(batch, *input_shape)
        variants = {name: _call(model, x) for name, model in models.items()}
        measured = interleaved_timings(variants, budget_s / len(batches))
        row = {f"{name}_s": m["cpu_s"] for name, m in measured.items()}
        row.update({f"{name}_wall_s": m["wall_median_s"] for name, m in measured.items()})
        row["repeats"] = min(m["repeats"] for m in measured.values())
        out[f"batch_{batch}"] = row
    return out


def _call(model: torch.nn.Module, x: torch.Tensor) -> Callable[[], object]:
    return lambda: model(x)
