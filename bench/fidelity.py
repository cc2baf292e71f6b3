"""Do the papers' headline claims show at CPU scale? One run, three datasets, three seeds.

Each claim is measured as two arms, each a job run in-process exactly as a worker runs it
(`parse_job_spec` -> `load_dataset` -> the method's `run(spec, data, ctx)` with an
`InMemoryContext`), at the documented defaults except where the table says otherwise:

1. DNW (Wortsman et al., Table 1): `search` with `dnw` beats `random_graph` at equal edges.
2. Growth (Verbockhaven et al., section 4): `grow` from [1, 1] gets near the documented
   `train` MLP (256, 128) with far fewer parameters (within 3 points, at most half of them).
3. Two temperatures (Differentiable Architecture Pruning, section 3.1): t_soft = t_hard/100
   beats t_soft = t_hard.
4. Weight-free (Disentangling Architectures and Weights, section 4): `weights: free` (bin)
   within 3 points of `weights: learned` (real) at the same density.
5. Transfer (Differentiable Architecture Pruning, section 3.2): a mask learned on one task
   and retrained few-shot (50 per class) on another beats a random mask at that density.

CPU-scale deviations (printed with the table): training subsets, a test subset, fewer grow
epochs. Verdicts: "holds" when the mean
difference favours the claim by more than the larger std, "weak" when it favours it by
less, "does not hold" otherwise.

Every arm of a claim is trained alike at each of `--lr-factors` (0.3x, 1x, 3x its method's
documented learning rate), and each seed's run is the one best on 10% of its training rows
held apart (never the test split): a baseline gets the tuning the method gets.

Run: python bench/fidelity.py [--quick] [--lr-factors 1]   (about an hour on 2 cores, 20
minutes untuned with `--lr-factors 1`; --quick: a smoke run)

`--section5` runs instead the weight-free paper's own experiment (section 5: binary tasks
between class groups, three small training sets, AUC, the rows bin, bin -> real, real (R+),
real, random, agnostic; median and quartiles over `--seeds` seeds), see `bench/_section5.py`.
Every trained row there is tuned alike: swept over `--lrs`, best by validation AUC.
`--class-split` runs the transfer of a pruned architecture between class splits (0-4 -> 5-9
of MNIST and Fashion-MNIST; learned vs random-per-layer vs magnitude masks), see
`bench/_class_split.py`; each mask's few-shot retraining is swept over `--lr-factors` times the
transfer job's documented lr and chosen on 1,000 validation images of classes 5-9.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import torch

# Measure this checkout, whatever copy of the project is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _class_split as class_split  # noqa: E402  (beside this script)
import _section5 as section5  # noqa: E402
from _data_dir import bench_data_dir

# Every arm of a claim swept alike over LR_FACTORS times its method's documented learning
# rate, each seed's best chosen on training rows held apart, never on the test split.
from _tuning import LR_FACTORS, VALIDATION_FRACTION, best_on_validation, default_lr

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import (
    Dataset,
    hold_out_validation,
    load_dataset,
    training_subset,
)
from archsearch.core.errors import DivergedError
from archsearch.core.float_mode import flush_denormals
from archsearch.core.methods import get_method
from archsearch.jobs.runtime.executor import final_validation
from archsearch.specs import DatasetRef, parse_job_spec

DATA_DIRS = (bench_data_dir(),)
DATASETS = ("digits", "mnist", "fashion_mnist")
SEEDS = (0, 1, 2)
TRANSFER_TARGET = {"mnist": "fashion_mnist", "fashion_mnist": "mnist"}


@dataclass(frozen=True)
class Scale:
    """CPU-scale sizes: training subsets (None: the whole split) and the test subset."""

    train: int | None
    search_train: int | None
    test: int
    epochs: dict[str, int]  # method -> epochs, where they differ from the documented ones
    lr_factor: float = 1.0  # times each method's documented learning rate
    validation: float = 0.0  # the share of the training rows held apart to choose the lr on


FULL = Scale(train=6000, search_train=6000, test=2000, epochs={"grow": 15})
QUICK = Scale(
    train=300,
    search_train=200,
    test=200,
    epochs={m: 1 for m in ("search", "grow", "prune", "train")},
)


def _subset(dataset: str, n: int | None) -> dict[str, Any]:
    # digits (1437 training images) is small enough to use whole.
    return (
        {"name": dataset}
        if dataset == "digits" or n is None
        else {"name": dataset, "train_subset": n}
    )


@cache
def _whole(dataset: str, test_size: int) -> Dataset:
    """A dataset loaded once per process, its test split cut to `test_size` images."""
    data = load_dataset(DatasetRef(name=dataset), DATA_DIRS)
    return replace(data, x_test=data.x_test[:test_size], y_test=data.y_test[:test_size])


def run_job(
    job: dict[str, Any], scale: Scale, ctx: InMemoryContext | None = None
) -> tuple[dict[str, float], InMemoryContext]:
    """One job the way a worker runs it; the test split cut to `scale.test` images."""
    spec = parse_job_spec(job)
    assert spec.dataset.name is not None, "the bench uses built-in datasets"
    # What load_dataset(spec.dataset, dirs, seed) gives, without re-reading the files.
    data = training_subset(_whole(spec.dataset.name, scale.test), spec.dataset, spec.training.seed)
    if scale.validation:
        data = hold_out_validation(data, scale.validation)
    ctx = ctx or InMemoryContext()
    result = get_method(spec.method)(spec, data, ctx)
    # As the worker's executor completes them: the final model's validation accuracy.
    return final_validation(result.history) | result.metrics, ctx


def _training(method: str, seed: int, scale: Scale) -> dict[str, Any]:
    epochs = scale.epochs.get(method)
    lr = default_lr(method) * scale.lr_factor
    # Merged over the method's default optimiser: its kind and other settings stay.
    return {"seed": seed, "optimizer": {"lr": lr}, **({"epochs": epochs} if epochs else {})}


def _job(method: str, dataset: str, seed: int, scale: Scale, **fields: Any) -> dict[str, Any]:
    n = scale.search_train if method == "search" else scale.train
    return {
        "method": method,
        "dataset": _subset(dataset, n),
        "training": _training(method, seed, scale),
        **fields,
    }


def _default_t_hard() -> float:
    spec = parse_job_spec({"method": "prune", "dataset": {"name": "digits"}})
    return float(spec.temperatures.t_hard)  # type: ignore[attr-defined]


# Each arm: (dataset, seed, scale) -> (test accuracy, parameters, validation accuracy); a
# claim has arms A and B.
Outcome = tuple[float, float, float]
Arm = Callable[[str, int, Scale], Outcome]
NOTHING: Outcome = (float("nan"), float("nan"), float("nan"))


def _outcome(metrics: dict[str, float]) -> Outcome:
    nan = float("nan")
    return (
        metrics["test_accuracy"],
        metrics.get("parameters", nan),
        metrics.get("val_accuracy", nan),
    )


def _accuracy(job: dict[str, Any], scale: Scale) -> Outcome:
    metrics, _ = run_job(job, scale)
    return _outcome(metrics)


def dnw(dataset: str, seed: int, scale: Scale) -> Outcome:
    return _accuracy(_job("search", dataset, seed, scale), scale)


def random_graph(dataset: str, seed: int, scale: Scale) -> Outcome:
    return _accuracy(
        _job("search", dataset, seed, scale, search={"strategy": "random_graph"}), scale
    )


def grow(dataset: str, seed: int, scale: Scale) -> Outcome:
    return _accuracy(_job("grow", dataset, seed, scale, growth={"baseline": False}), scale)


def large_fixed(dataset: str, seed: int, scale: Scale) -> Outcome:
    return _accuracy(_job("train", dataset, seed, scale), scale)


def _prune_t_soft(divisor: float) -> Arm:
    def arm(dataset: str, seed: int, scale: Scale) -> Outcome:
        t_hard = _default_t_hard()
        temperatures = {"t_hard": t_hard, "t_soft": t_hard / divisor}
        return _accuracy(_job("prune", dataset, seed, scale, temperatures=temperatures), scale)

    return arm


def _prune_weights(weights: str) -> Arm:
    def arm(dataset: str, seed: int, scale: Scale) -> Outcome:
        return _accuracy(_job("prune", dataset, seed, scale, weights=weights), scale)

    return arm


def _transfer(mask: str) -> Arm:
    def arm(dataset: str, seed: int, scale: Scale) -> Outcome:
        # The mask is learned on `dataset` and retrained few-shot on its partner task.
        if dataset not in TRANSFER_TARGET:
            return NOTHING
        _, source = run_job(_job("prune", dataset, seed, scale), scale)
        target = {"name": TRANSFER_TARGET[dataset], "samples_per_class": 50}
        job = {
            "method": "transfer",
            "dataset": target,
            "training": _training("transfer", seed, scale),
            "source_job": "source",
            "mask": mask,
        }
        return _accuracy_in(job, scale, source)

    return arm


def _accuracy_in(job: dict[str, Any], scale: Scale, source: InMemoryContext) -> Outcome:
    metrics, _ = run_job(job, scale, InMemoryContext(other_jobs={"source": source.artifacts}))
    return _outcome(metrics)


@dataclass(frozen=True)
class Claim:
    name: str
    a_label: str
    b_label: str
    a: Arm
    b: Arm
    kind: str = "above"  # "above": A > B; "close": A within `tolerance` of B, fewer params
    tolerance: float = 0.03
    max_param_ratio: float = 1.0


CLAIMS = (
    Claim("DNW > random graph (search)", "dnw", "random_graph", dnw, random_graph),
    Claim(
        "grow [1,1] ~ fixed MLP (256,128)",
        "grow",
        "train mlp",
        grow,
        large_fixed,
        "close",
        0.03,
        0.5,
    ),
    Claim(
        "t_soft=t_hard/100 > t_soft=t_hard",
        "t_hard/100",
        "t_hard",
        _prune_t_soft(100.0),
        _prune_t_soft(1.0),
    ),
    Claim(
        "weight-free bin ~ real",
        "bin (free)",
        "real",
        _prune_weights("free"),
        _prune_weights("learned"),
        "close",
    ),
    Claim(
        "transferred AP mask > random",
        "learned",
        "random",
        _transfer("learned"),
        _transfer("random"),
    ),
)


def _task(
    args: tuple[int, str, int, str, Scale],
) -> tuple[int, str, int, str, float, Outcome, float]:
    claim_index, dataset, seed, side, scale = args
    torch.set_num_threads(1)
    flush_denormals()  # as every thread that runs jobs does
    claim = CLAIMS[claim_index]
    start = time.perf_counter()
    try:
        value = (claim.a if side == "a" else claim.b)(dataset, seed, scale)
    except DivergedError:  # a learning rate too large for this arm: never the one chosen
        value = NOTHING
    return claim_index, dataset, seed, side, scale.lr_factor, value, time.perf_counter() - start


def tuned(by_factor: dict[float, Outcome]) -> tuple[float, Outcome]:
    """The learning rate factor whose run was best on its held-out rows, and that run."""
    factor, run = best_on_validation(by_factor, lambda outcome: outcome[2])
    return factor, NOTHING if run is None else run


def _mean_std(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v == v]
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), statistics.pstdev(values) if len(values) > 1 else 0.0


def verdict(
    claim: Claim, a: list[tuple[float, float]], b: list[tuple[float, float]]
) -> tuple[str, str]:
    (ma, sa), (mb, sb) = _mean_std([x[0] for x in a]), _mean_std([x[0] for x in b])
    if ma != ma or mb != mb:
        return "n/a", "n/a (no partner task of the same input shape)"
    diff = ma - mb
    if claim.kind == "close":
        detail, near = f"gap {diff:+.3f}", diff >= -claim.tolerance
        if claim.max_param_ratio < 1:  # and with far fewer parameters
            ratio = _mean_std([x[1] for x in a])[0] / _mean_std([x[1] for x in b])[0]
            detail, near = f"{detail}, params x{ratio:.3f}", near and ratio <= claim.max_param_ratio
        return detail, "holds" if near else "does not hold"
    spread = max(sa, sb)
    word = "holds" if diff > spread else "weak" if diff > 0 else "does not hold"
    return f"{diff:+.3f}", word


def _section5_cell(
    args: tuple[str, int, int, tuple[float, ...]],
) -> tuple[str, int, dict[str, float]]:
    dataset, size, seed, lrs = args
    return dataset, size, section5.one_cell(dataset, size, seed, DATA_DIRS, lrs)


def run_section5(seeds: int, workers: int, lrs: tuple[float, ...]) -> None:
    """Seed by seed (every cell of a seed before the next seed), so that a run stopped with
    Ctrl-C still prints a table over the seeds it completed for every cell."""
    tasks = [(d, n, s, lrs) for s in range(seeds) for d in section5.TASKS for n in section5.SIZES]
    start = time.perf_counter()
    results = _seed_by_seed(_section5_cell, tasks, workers, "n=")
    if results:
        section5.print_table(results, time.perf_counter() - start, lrs)


def _seed_by_seed(
    cell: Callable[[Any], tuple[str, Any, dict[str, float]]],
    tasks: list[Any],
    workers: int,
    label: str,
) -> dict[tuple[str, Any], list[dict[str, float]]]:
    """`cell` over `tasks` in a pool, the rows of each (dataset, size) cell in task order,
    cut to the seeds every cell completed when the run is stopped with Ctrl-C."""
    results: dict[tuple[str, Any], list[dict[str, float]]] = {}
    pool = ProcessPoolExecutor(max_workers=workers)
    stopped = False
    try:
        for dataset, size, rows in pool.map(cell, tasks):
            results.setdefault((dataset, size), []).append(rows)
            seed = len(results[dataset, size]) - 1
            print(f"done {dataset} {label}{size} seed {seed}", flush=True)
    except KeyboardInterrupt:
        stopped = True
        print("stopped: the table covers the seeds completed in every cell", flush=True)
    finally:
        # A finished run waits for its processes: a pool left running at exit has the
        # interpreter's exit hook write to a pipe already closed ("Bad file descriptor").
        pool.shutdown(wait=not stopped, cancel_futures=True)
    done = min((len(runs) for runs in results.values()), default=0)
    return {key: runs[:done] for key, runs in results.items()}


def _class_split_cell(
    args: tuple[str, float, int, tuple[float, ...]],
) -> tuple[str, float, dict[str, float]]:
    dataset, density, seed, factors = args
    return dataset, density, class_split.one_cell(dataset, density, seed, DATA_DIRS, factors)


def run_class_split(seeds: int, workers: int, factors: tuple[float, ...]) -> None:
    """Seed by seed (every cell of a seed before the next seed), so that a run stopped with
    Ctrl-C still prints a table over the seeds it completed for every cell."""
    tasks = [
        (d, density, s, factors)
        for s in range(seeds)
        for d in class_split.DATASETS
        for density in class_split.DENSITIES
    ]
    start = time.perf_counter()
    results = _seed_by_seed(_class_split_cell, tasks, workers, "")
    if results:
        class_split.print_table(results, time.perf_counter() - start, factors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny subsets, 1 epoch: a smoke run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--section5", action="store_true", help="the weight-free paper's own run")
    parser.add_argument("--class-split", action="store_true", help="transfer 0-4 -> 5-9")
    parser.add_argument("--seeds", type=int, default=5, help="--section5 / --class-split seeds")
    parser.add_argument(
        "--lr-factors",
        type=float,
        nargs="+",
        default=LR_FACTORS,
        help="the claims' table and --class-split: each arm at these multiples of its "
        "method's documented lr, chosen per seed on held-out rows (1: the untuned run)",
    )
    parser.add_argument(
        "--lrs",
        type=float,
        nargs="+",
        default=section5.LRS,
        help="--section5: the step sizes every trained row is swept over",
    )
    args = parser.parse_args()
    if args.section5:
        run_section5(args.seeds, args.workers, tuple(args.lrs))
        return
    if args.class_split:
        run_class_split(args.seeds, args.workers, tuple(args.lr_factors))
        return
    scale = QUICK if args.quick else FULL
    seeds = SEEDS[:1] if args.quick else SEEDS
    factors = tuple(args.lr_factors)
    held_apart = VALIDATION_FRACTION if len(factors) > 1 else 0.0
    tasks = [
        (c, d, s, side, replace(scale, lr_factor=f, validation=held_apart))
        for c in range(len(CLAIMS))
        for d in DATASETS
        for s in seeds
        for side in "ab"
        for f in factors
    ]
    start = time.perf_counter()
    runs: dict[tuple[int, str, int, str], dict[float, Outcome]] = {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for c, d, seed, side, factor, value, _seconds in pool.map(_task, tasks):
            runs.setdefault((c, d, seed, side), {})[factor] = value
    results: dict[tuple[int, str, str], list[tuple[float, float]]] = {}
    chosen: dict[tuple[int, str, str], list[float]] = {}
    for (c, d, _seed, side), by_factor in runs.items():
        factor, (test, params, _val) = tuned(by_factor)
        results.setdefault((c, d, side), []).append((test, params))
        chosen.setdefault((c, d, side), []).append(factor)
    _print_table(replace(scale, validation=held_apart), seeds, results, time.perf_counter() - start)
    _print_chosen(factors, chosen)


def _print_chosen(
    factors: tuple[float, ...], chosen: dict[tuple[int, str, str], list[float]]
) -> None:
    if len(factors) == 1:
        print(f"every arm at {factors[0]:g}x its method's documented learning rate (untuned)")
        return
    print(
        f"learning rate: each arm swept over {', '.join(f'{f:g}x' for f in factors)} its "
        "method's documented one, chosen per seed on the held-out rows; chosen (per seed):"
    )
    for c, claim in enumerate(CLAIMS):
        for d in DATASETS:
            picks = {side: chosen.get((c, d, side), []) for side in "ab"}
            cells = [
                f"{label} {' '.join(f'{f:g}x' for f in picks[side])}"
                for side, label in (("a", claim.a_label), ("b", claim.b_label))
            ]
            print(f"  {claim.name:36} {d:14} " + "; ".join(cells))


def _print_table(
    scale: Scale,
    seeds: tuple[int, ...],
    results: dict[tuple[int, str, str], list[tuple[float, float]]],
    seconds: float,
) -> None:
    print(f"fidelity at CPU scale: {len(seeds)} seeds, test accuracy mean +- std")
    if scale.validation:
        print(f"each arm's training rows less {scale.validation:.0%} held apart to choose its lr")
    print(
        f"deviations from the documented defaults: training subsets {scale.train} images "
        f"(search: {scale.search_train}; digits: all 1437), test subsets {scale.test} "
        f"(digits: all 360), epochs overridden {scale.epochs or 'nowhere'}; transfer: "
        "few-shot 50 per class on the partner task (mnist <-> fashion_mnist)"
    )
    header = f"{'claim':36} {'dataset':14} {'A':>18} {'B':>18} {'A - B':>22}  verdict"
    print(header)
    print("-" * len(header))
    for c, claim in enumerate(CLAIMS):
        for d in DATASETS:
            a, b = results[(c, d, "a")], results[(c, d, "b")]
            (ma, sa), (mb, sb) = _mean_std([x[0] for x in a]), _mean_std([x[0] for x in b])
            detail, word = verdict(claim, a, b)
            cell_a = f"{claim.a_label} {ma:.3f}+-{sa:.3f}"
            cell_b = f"{claim.b_label} {mb:.3f}+-{sb:.3f}"
            print(f"{claim.name:36} {d:14} {cell_a:>18} {cell_b:>18} {detail:>22}  {word}")
    print(f"total {seconds:.0f} s")


if __name__ == "__main__":
    main()
