"""Latency as a property of the model: per-call CPU time of the calling thread, torch on one
thread during the measurement only, the wall clock beside it, and a bounded number of calls."""

from __future__ import annotations

import time

import torch

from archsearch.core.deploy.latency import (
    TARGET_CALLS,
    THREADS,
    interleaved_timings,
    model_latencies,
)


def test_time_off_the_cpu_is_in_the_wall_clock_only() -> None:
    # A call that waits (as one preempted by a neighbour does) costs wall time, not CPU time.
    measured = interleaved_timings({"waits": lambda: time.sleep(0.01)}, budget_s=0.0)
    waits = measured["waits"]
    assert waits["wall_median_s"] >= 0.01
    assert waits["cpu_s"] < 0.002


def test_torch_runs_on_one_thread_while_measured_and_as_before_after() -> None:
    seen: list[int] = []
    before = torch.get_num_threads()
    interleaved_timings({"a": lambda: seen.append(torch.get_num_threads())}, budget_s=0.0)
    assert set(seen) == {THREADS}
    assert torch.get_num_threads() == before


def test_fast_calls_stop_at_the_target_count_within_the_budget() -> None:
    model = torch.nn.Linear(8, 4)
    start = time.perf_counter()
    latency = model_latencies({"dense": model}, (8,), (1, 64), budget_s=10.0)
    assert time.perf_counter() - start < 5.0  # not the whole budget
    for row in latency.values():
        assert row["repeats"] == TARGET_CALLS
        assert 0 < row["dense_s"] and 0 < row["dense_wall_s"]
