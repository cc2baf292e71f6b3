"""Benchmark of the `grow` method's defaults ("Spotting expressivity bottlenecks and fixing
them optimally", sections 3.2-3.4), before and after, side by side in one run.

- before: eigenvalues of S cut at 1% of the largest (`eig_rtol 0.01`), amplitude line search
  capped at 16 (`max_amplitude 16`);
- after: the job's defaults (the same cut; the line search doubles from 1 until the loss
  rises, no cap);
- roundoff: the cut at the round-off level of S, eps * sqrt(n) (`eig_rtol: null`), uncapped.

Per configuration, over the seeds: eigen-directions of S kept per layer step, the fraction of
the expected decrease sum(lambda^2) they keep (against the same statistics with every
non-round-off direction kept, rtol 1e-12 in float64), how often a line search stopped at a
bound rather than at a local minimum, final test accuracy, parameters and seconds.
The GroMo peer row is printed only when the `gromo` package is installed. Prints only;
writes nothing. Usage: python bench/grow.py [--seeds N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.growth import layer_step, solver
from archsearch.core.methods import get_method
from archsearch.core.spec import GrowJob, parse_job_spec
from archsearch.core.spec.common import DatasetRef

DATA_DIRS = (Path(__file__).resolve().parents[1].parent / "shared" / "datasets",)
BEFORE = {"eig_rtol": 0.01, "max_amplitude": 16.0}
AFTER: dict[str, Any] = {}
ROUNDOFF = {"eig_rtol": None}  # the cut at the round-off of S, with the uncapped search
DIGITS = {"dataset": {"name": "digits"}, "training": {}, "growth": {}}  # the job's defaults
MNIST = {
    "dataset": {"name": "mnist", "train_subset": 10_000},
    "training": {"epochs": 3, "batch_size": 128},
    "growth": {"steps_between_growth": 12, "max_growth_steps": 12, "stat_batch_max": 1024},
}


@dataclass
class Run:
    accuracy: float
    parameters: float
    seconds: float
    kept: list[int] = field(default_factory=list)
    kept_fraction: list[float] = field(default_factory=list)
    searches: int = 0
    at_bound: int = 0


class DecreaseProbe:
    """Records, at every layer step, sum(lambda^2) at the job's cut and with every direction."""

    def __init__(self) -> None:
        self.fractions: list[float] = []
        self._solve = layer_step.solve_layer

    def __enter__(self) -> DecreaseProbe:
        def solve(stats: layer_step.LayerStats, policy: layer_step.LayerPolicy):  # type: ignore[no-untyped-def]
            dw, chosen = self._solve(stats, policy)
            v_proj = stats.v_goal - stats.b_mid @ dw.T
            full = solver.optimal_neurons(stats.b_in.double(), v_proj.double(), 1e-12)
            used = solver.optimal_neurons(
                stats.b_in, v_proj, policy.rtol_for(len(stats.b_in), stats.b_in.dtype)
            )
            total = float(full.lambdas.square().sum())
            self.fractions.append(float(used.lambdas.square().sum()) / total if total else 1.0)
            return dw, chosen

        layer_step.solve_layer = solve
        return self

    def __exit__(self, *exc: object) -> None:
        layer_step.solve_layer = self._solve


def grow_spec(setup: dict[str, Any], growth: dict[str, Any], seed: int) -> GrowJob:
    spec = {
        "method": "grow",
        "dataset": setup["dataset"],
        "training": {**setup["training"], "seed": seed},
        "growth": {**setup["growth"], **growth, "baseline": False},
    }
    return parse_job_spec(spec)  # type: ignore[return-value]


def run_grow(data: Dataset, spec: GrowJob) -> Run:
    ctx = InMemoryContext()
    with DecreaseProbe() as probe:
        started = time.perf_counter()
        result = get_method("grow")(spec, data, ctx)
        seconds = time.perf_counter() - started
    layers = [
        layer
        for step in json.loads(ctx.artifacts["growth.json"])["steps"]
        for layer in step["layers"]
    ]
    return Run(
        accuracy=result.metrics["test_accuracy"],
        parameters=result.metrics["parameters"],
        seconds=seconds,
        kept=[layer["kept_directions"] for layer in layers if layer["layer"] == 0],
        kept_fraction=probe.fractions,
        searches=2 * len(layers),
        at_bound=sum(layer["gamma0_at_bound"] + layer["gamma_at_bound"] for layer in layers),
    )


def row(name: str, runs: list[Run]) -> str:
    accs = [r.accuracy for r in runs]
    kept = [k for r in runs for k in r.kept]
    fractions = [f for r in runs for f in r.kept_fraction]
    bound, searches = sum(r.at_bound for r in runs), sum(r.searches for r in runs)
    parameters = statistics.mean(r.parameters for r in runs)
    seconds = statistics.mean(r.seconds for r in runs)
    return (
        f"{name:<8} {statistics.mean(kept):>9.0f} {statistics.mean(fractions):>9.3f} "
        f"{min(fractions):>8.3f} {bound:>5d}/{searches:<4d} "
        f"{statistics.mean(accs):>7.4f} ± {statistics.pstdev(accs):.4f} "
        f"{parameters:>9.0f} {seconds:>8.1f}"
    )


def bench(label: str, setup: dict[str, Any], seeds: int) -> None:
    data = load_dataset(DatasetRef(**setup["dataset"]), DATA_DIRS, 0)
    results: dict[str, list[Run]] = {"before": [], "after": [], "roundoff": []}
    for seed in range(seeds):
        for name, growth in (("before", BEFORE), ("after", AFTER), ("roundoff", ROUNDOFF)):
            results[name].append(run_grow(data, grow_spec(setup, growth, seed)))
    print(
        f"\n{label}: {len(data.x_train)} training samples, {len(data.x_test)} test, {seeds} seeds"
    )
    print(
        f"{'config':<8} {'kept dirs':>9} {'kept l2':>9} {'min':>8} {'at bound':>10} "
        f"{'accuracy':>16} {'params':>9} {'seconds':>8}"
    )
    for name, runs in results.items():
        print(row(name, runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)  # small nets; the machine is shared
    started = time.perf_counter()
    print(f"before: {BEFORE}; after: the job's defaults; roundoff: {ROUNDOFF}")
    print("kept dirs: eigen-directions of S kept at the first hidden layer's steps (mean)")
    print("kept l2: fraction of sum(lambda^2) of all directions kept (mean, and min 'min')")
    print("at bound: line searches (gamma0 and gamma) that stopped at a limit, of all")
    bench("digits", DIGITS, args.seeds)
    bench("MNIST", MNIST, args.seeds)
    if importlib.util.find_spec("gromo") is None:
        print("\nGroMo peer: the `gromo` package is not installed, so no peer row is printed")
    else:
        print("\nGroMo peer: installed, but this bench does not drive it (no peer row)")
    print(f"total bench time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
