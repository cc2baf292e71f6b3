"""Benchmark of the `grow` method ("Spotting expressivity bottlenecks and fixing them
optimally", sections 3.2-3.4) on digits and MNIST, side by side in one run. Two parts:

`defaults`: the job's defaults, before and after.
- before: eigenvalues of S cut at 1% of the largest (`eig_rtol 0.01`), amplitude line search
  capped at 16 (`max_amplitude 16`);
- after: the job's defaults (the same cut; the line search doubles from 1 until the loss
  rises, no cap);
- roundoff: the cut at the round-off level of S, eps * sqrt(n) (`eig_rtol: null`), uncapped.
Per configuration, over the seeds: eigen-directions of S kept per layer step, the fraction of
the expected decrease sum(lambda^2) they keep (against the same statistics with every
non-round-off direction kept, rtol 1e-12 in float64), how often a line search stopped at a
bound rather than at a local minimum, final test accuracy, parameters and CPU seconds.

`peers`: our job (its defaults) against GroMo 0.1.0, the paper authors' library, when the
`gromo` package is installed (`pip install -e '.[bench]'`). GroMo is driven as its own
tutorial (examples/plot_growing_container_tutorial.py of github.com/growingnet/gromo) and
docstrings say, with our data, batches, optimiser, activation, seeds and optimiser-step
budget: `bench/_gromo_peer.py` lists every choice and the line of the tutorial it follows.
Three variants: GroMo choosing the layer itself (`select_best_update`), the tutorial's
round-robin over the layers, and GroMo's own choice at our job's growth frequency.
Printed per method: parameters, test accuracy (mean and std), CPU seconds, final widths,
growths applied of those attempted and the highest training-batch loss after the first
growth (a run that diverged shows it there); then the ratios ours / each GroMo variant.

`rtol`: the `growth.eig_rtol` cuts 1e-4, 1e-3, 1e-2 measured on held-out data (the
default's evidence; `bench/_grow_rtol.py`).

Prints only; writes nothing.
Usage: python bench/grow.py [--seeds N] [--part defaults|peers|rtol|all]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from _data_dir import bench_data_dir
from _gromo_peer import FACTORS, GROWTH_SHARE, INTERVAL, PeerRun, run_gromo
from _grow_rtol import RTOL_HEADER, RtolRun, rtol_row, run_rtol

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.float_mode import flush_denormals
from archsearch.core.growth import layer_step, solver
from archsearch.core.methods import get_method
from archsearch.specs import GrowJob, parse_job_spec
from archsearch.specs.common import DatasetRef

DATA_DIRS = (bench_data_dir(),)
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
    widths: list[int] = field(default_factory=list)
    growths: int = 0
    max_loss: float = 0.0


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


def run_grow(data: Dataset, spec: GrowJob, probed: bool = True) -> Run:
    """Our grow job in memory; `probed`: with the DecreaseProbe's extra solves (not timed
    against a peer, since they are work the job itself never does)."""
    ctx = InMemoryContext()
    probe = DecreaseProbe()
    with probe if probed else contextlib.nullcontext():
        started = time.process_time()  # CPU seconds: the machine is shared
        result = get_method("grow")(spec, data, ctx)
        seconds = time.process_time() - started
    growth = json.loads(ctx.artifacts["growth.json"])
    layers = [layer for step in growth["steps"] for layer in step["layers"]]
    first = spec.growth.steps_between_growth
    losses = [m["train_loss"] for step, _, m in ctx.reports if "train_loss" in m and step > first]
    return Run(
        accuracy=result.metrics["test_accuracy"],
        parameters=result.metrics["parameters"],
        seconds=seconds,
        kept=[layer["kept_directions"] for layer in layers if layer["layer"] == 0],
        kept_fraction=probe.fractions,
        searches=2 * len(layers),
        at_bound=sum(layer["gamma0_at_bound"] + layer["gamma_at_bound"] for layer in layers),
        widths=list(growth["final_widths"]),
        growths=len(growth["steps"]),
        max_loss=max(losses, default=0.0),
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


def peers(label: str, setup: dict[str, Any], seeds: int) -> None:
    """Our job at its defaults against GroMo, best layer and round-robin, per seed."""
    data = load_dataset(DatasetRef(**setup["dataset"]), DATA_DIRS, 0)
    rows: dict[str, list[PeerRun]] = {OURS: [], GROMO_BEST: [], GROMO_ROUND: [], GROMO_OURS: []}
    for seed in range(seeds):
        spec = grow_spec(setup, AFTER, seed)
        ours = run_grow(data, spec, probed=False)
        rows[OURS].append(
            PeerRun(
                ours.accuracy,
                int(ours.parameters),
                ours.seconds,
                ours.widths,
                ours.growths,
                spec.growth.max_growth_steps,
                ours.max_loss,
            )
        )
        rows[GROMO_BEST].append(run_gromo(data, spec, "best"))
        rows[GROMO_ROUND].append(run_gromo(data, spec, "round"))
        # Our schedule: one layer per growth, so a growth every steps_between_growth steps
        # gives GroMo our count of layer steps, at half the frequency the old bench used.
        rows[GROMO_OURS].append(run_gromo(data, spec, "best", spec.growth.steps_between_growth))
        print(
            f"  {label} seed {seed}: "
            + ", ".join(f"{k} {v[-1].accuracy:.4f}" for k, v in rows.items()),
            flush=True,
        )
    print(
        f"\n{label}: {len(data.x_train)} training samples, {len(data.x_test)} test, {seeds} seeds"
    )
    print(
        f"{'method':<24} {'params':>8} {'accuracy':>16} {'CPU s':>8} {'grown':>7} "
        f"{'max loss':>9}   final widths per seed"
    )
    for name, runs in rows.items():
        print(peer_row(name, runs))
    verdict(label, rows)


def peer_row(name: str, runs: list[Any]) -> str:
    accs = [r.accuracy for r in runs]
    widths = " ".join("x".join(str(w) for w in r.widths) for r in runs)
    grown = f"{sum(r.grown for r in runs)}/{sum(r.events for r in runs)}"
    return (
        f"{name:<24} {statistics.mean(r.parameters for r in runs):>8.0f} "
        f"{statistics.mean(accs):>7.4f} ± {statistics.pstdev(accs):.4f} "
        f"{statistics.mean(r.seconds for r in runs):>8.1f} {grown:>7} "
        f"{max(r.max_loss for r in runs):>9.3g}   {widths}"
    )


def verdict(label: str, rows: dict[str, list[Any]]) -> None:
    def mean(name: str, key: str) -> float:
        return statistics.mean(getattr(r, key) for r in rows[name])

    for peer in (GROMO_BEST, GROMO_ROUND, GROMO_OURS):
        params = mean(OURS, "parameters") / mean(peer, "parameters")
        print(
            f"{label}, ours / {peer}: parameters {params:.2f}x, "
            f"CPU seconds {mean(OURS, 'seconds') / mean(peer, 'seconds'):.2f}x, accuracy "
            f"{100 * (mean(OURS, 'accuracy') - mean(peer, 'accuracy')):+.2f} points"
        )


RTOLS = (1e-4, 1e-3, 1e-2)


def rtol_bench(
    label: str, setup: dict[str, Any], seeds: int, rtols: tuple[float, ...] = RTOLS
) -> None:
    """The eig_rtol cuts side by side, seed by seed (bench/_grow_rtol.py)."""
    data = load_dataset(DatasetRef(**setup["dataset"]), DATA_DIRS, 0)
    runs: dict[float, list[RtolRun]] = {rtol: [] for rtol in rtols}
    for seed in range(seeds):
        for rtol in rtols:
            runs[rtol].append(run_rtol(data, grow_spec(setup, {"eig_rtol": rtol}, seed)))
            print(f"  {label} seed {seed} rtol {rtol:g}: {runs[rtol][-1]}", flush=True)
    print(
        f"\n{label}: {len(data.x_train)} training samples, {len(data.x_test)} test, {seeds} seeds"
    )
    print("predicted / held out: first-order decrease of the added neurons, summed over the")
    print("job's layer steps, on the statistics batch / on 1024 held-out test images")
    print(RTOL_HEADER)
    for rtol, rows in runs.items():
        print(rtol_row(f"{rtol:g}", rows))


OURS, GROMO_BEST = "ours (job defaults)", "GroMo, its layer choice"
GROMO_ROUND, GROMO_OURS = "GroMo, round-robin", "GroMo, our schedule"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--part", choices=("defaults", "peers", "rtol", "all"), default="all")
    parser.add_argument("--rtols", type=float, nargs="*", default=RTOLS, help="--part rtol cuts")
    parser.add_argument("--mnist-only", action="store_true", help="--part rtol: MNIST only")
    args = parser.parse_args()
    torch.set_num_threads(1)  # small nets; the machine is shared
    flush_denormals()  # as every thread that runs jobs does
    started = time.perf_counter()
    if args.part in ("defaults", "all"):
        print(f"before: {BEFORE}; after: the job's defaults; roundoff: {ROUNDOFF}")
        print("kept dirs: eigen-directions of S kept at the first hidden layer's steps (mean)")
        print("kept l2: fraction of sum(lambda^2) of all directions kept (mean, and min 'min')")
        print("at bound: line searches (gamma0 and gamma) that stopped at a limit, of all")
        bench("digits", DIGITS, args.seeds)
        bench("MNIST", MNIST, args.seeds)
    if args.part == "rtol":
        if not args.mnist_only:
            rtol_bench("digits", DIGITS, args.seeds, tuple(args.rtols))
        rtol_bench("MNIST", MNIST, args.seeds, tuple(args.rtols))
    if args.part in ("peers", "all"):
        if importlib.util.find_spec("gromo") is None:
            print("\nGroMo peer: the `gromo` package is not installed, so no peer row is printed")
        else:
            print("\nGroMo 0.1.0 driven as its tutorial does (see bench/_gromo_peer.py):")
            print(f"  {_gromo_peer_summary()}")
            print("grown: growth steps applied / attempted (ours: steps; GroMo: one layer each)")
            print("max loss: highest training loss after the first growth (ours: as reported)")
            peers("digits", DIGITS, args.seeds)
            peers("MNIST", MNIST, args.seeds)
    print(f"total bench time {time.perf_counter() - started:.0f} s")


def _gromo_peer_summary() -> str:
    return (
        f"{INTERVAL} optimiser steps of training between growths (the tutorial's 3 epochs "
        f"of 10 batches),\n  growth within the first {GROWTH_SHARE:.0%} of the budget, "
        "maximum_added_neurons = our max_neurons_per_step,\n  the tutorial's factor grid "
        f"{list(FACTORS)}, factor 0 = no growth, Adam moments carried over"
    )


if __name__ == "__main__":
    main()
