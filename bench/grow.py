"""Benchmark of the `grow` method ("Spotting expressivity bottlenecks and fixing them
optimally") on digits and MNIST, side by side in one run:

- ours: the grow job from widths [1, 1] (optimal neurons, and the random-neuron baseline of
  appendix C.4 on digits);
- GroMo 0.1.0 (`pip install --no-deps gromo==0.1.0`): its GrowingMLP from widths [1, 1],
  grown with its public API (statistics, compute_optimal_updates, select_best_update, its
  line_search, apply_change) on the same data, batches, optimiser and step budget;
- fixed networks trained for the same wall clock as our run: the same final widths from
  scratch (Figure 6) and a large [1000, 1000] network (Figure 10).

Prints final widths, parameters, test accuracy (mean and std over seeds) and seconds.
Usage: python bench/grow.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.export import count_parameters
from archsearch.core.growth.schedule import mlp_architecture
from archsearch.core.growth.timed import train_for_seconds
from archsearch.core.methods import get_method
from archsearch.core.models import create_model
from archsearch.core.spec import GrowJob, parse_job_spec
from archsearch.core.spec.common import DatasetRef
from archsearch.core.training import epoch_batches, evaluate, lr_factor

DATA_DIRS = (Path(__file__).resolve().parents[1].parent / "shared" / "datasets",)
CPU = torch.device("cpu")


@dataclass
class Row:
    widths: list[int]
    parameters: int
    accuracy: float
    seconds: float


def grow_spec(dataset: dict, seed: int, setup: dict, neurons: str = "optimal") -> GrowJob:
    spec = {
        "method": "grow",
        "dataset": dataset,
        "training": {**setup["training"], "seed": seed},
        "growth": {**setup["growth"], "neurons": neurons, "baseline": False},
    }
    return parse_job_spec(spec)  # type: ignore[return-value]


def run_ours(data: Dataset, spec: GrowJob) -> Row:
    ctx = InMemoryContext()
    started = time.perf_counter()
    result = get_method("grow")(spec, data, ctx)
    seconds = time.perf_counter() - started
    widths = json.loads(ctx.artifacts["growth.json"])["final_widths"]
    return Row(widths, int(result.metrics["parameters"]), result.metrics["test_accuracy"], seconds)


def run_fixed(data: Dataset, spec: GrowJob, widths: list[int], seconds: float) -> Row:
    torch.manual_seed(spec.training.seed + 1)
    model = create_model(mlp_architecture(widths, spec.growth.activation, data))
    started = time.perf_counter()
    curve = train_for_seconds(model, data, spec.training, seconds, CPU, evaluations=2)
    return Row(
        widths, count_parameters(model), curve[-1]["test_accuracy"], time.perf_counter() - started
    )


def run_gromo(data: Dataset, spec: GrowJob) -> Row:
    """GroMo's GrowingMLP grown with its public API under our schedule and step budget."""
    from gromo.containers.growing_mlp import GrowingMLP
    from gromo.utils.utils import line_search

    torch.manual_seed(spec.training.seed)
    act = torch.nn.SELU() if spec.growth.activation == "selu" else torch.nn.Tanh()
    model = GrowingMLP(
        in_features=list(data.input_shape),
        out_features=data.num_classes,
        hidden_size=1,
        number_hidden_layers=2,
        activation=act,
        device=CPU,
    )
    tr, g = spec.training, spec.growth
    per_epoch = math.ceil(len(data.x_train) / tr.batch_size)
    total = tr.epochs * per_epoch
    events = 2 * g.max_growth_steps  # GroMo grows one layer per event; ours both per step
    interval = max(1, g.steps_between_growth // 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=tr.optimizer.lr)
    started, grown, stop_at = time.perf_counter(), 0, None
    for step in range(total):
        if stop_at is None and step > 0 and step % interval == 0:
            _gromo_growth(model, data, spec, grown, line_search)
            grown += 1
            optimizer = torch.optim.Adam(model.parameters(), lr=tr.optimizer.lr)
            stop_at = step if grown >= events else None
        factor = (
            1.0
            if stop_at is None
            else lr_factor(
                tr.schedule, max(1, math.ceil((total - stop_at) / per_epoch)), per_epoch
            )(step - stop_at)
        )
        for group in optimizer.param_groups:
            group["lr"] = tr.optimizer.lr * factor
        index = _batch(data, tr, step, per_epoch)
        loss = F.cross_entropy(model(data.x_train[index]), data.y_train[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - started
    widths = [layer.in_features for layer in model.layers[1:]]
    _, accuracy = evaluate(model, data.x_test, data.y_test, CPU)
    return Row(widths, sum(p.numel() for p in model.parameters()), accuracy, seconds)


_BATCHES: dict[tuple[int, int, int], list[torch.Tensor]] = {}


def _batch(data: Dataset, tr, step: int, per_epoch: int) -> torch.Tensor:
    key = (tr.seed, step // per_epoch, len(data.x_train))
    if key not in _BATCHES:
        _BATCHES.clear()
        _BATCHES[key] = list(
            epoch_batches(len(data.x_train), tr.batch_size, tr.seed, step // per_epoch)
        )
    return _BATCHES[key][step % per_epoch]


def _gromo_growth(model, data: Dataset, spec: GrowJob, event: int, line_search) -> None:
    generator = torch.Generator().manual_seed(spec.training.seed * 7919 + event)
    size = min(spec.growth.stat_batch_max, len(data.x_train))
    index = torch.randperm(len(data.x_train), generator=generator)[:size]
    x, y = data.x_train[index], data.y_train[index]
    model.init_computation()
    model.zero_grad()
    F.cross_entropy(model(x), y, reduction="sum").backward()
    model.update_computation()
    model.compute_optimal_updates()
    model.reset_computation()
    model.select_best_update()

    def cost(factor: float) -> float:
        model.set_scaling_factor(factor)
        with torch.no_grad():
            return F.cross_entropy(model.extended_forward(x), y).item()

    factor, _ = line_search(cost)
    model.set_scaling_factor(factor)
    model.apply_change()


def summary(name: str, rows: list[Row]) -> str:
    accs = [r.accuracy for r in rows]
    widths = " ".join("x".join(str(w) for w in r.widths) for r in rows)
    return (
        f"{name:<26} {statistics.mean(r.parameters for r in rows):>10.0f} "
        f"{statistics.mean(accs):>7.4f} {statistics.pstdev(accs):>7.4f} "
        f"{statistics.mean(r.seconds for r in rows):>8.2f}   {widths}"
    )


def bench_dataset(
    label: str, dataset: dict, setup: dict, seeds: int, extras: bool
) -> dict[str, list[Row]]:
    data = load_dataset(DatasetRef(**dataset), DATA_DIRS, 0)
    rows: dict[str, list[Row]] = {}
    for seed in range(seeds):
        spec = grow_spec(dataset, seed, setup)
        ours = run_ours(data, spec)
        rows.setdefault("ours (optimal neurons)", []).append(ours)
        if extras:
            rows.setdefault("ours, random neurons C.4", []).append(
                run_ours(data, grow_spec(dataset, seed, setup, "random"))
            )
        rows.setdefault("GroMo 0.1.0", []).append(run_gromo(data, spec))
        rows.setdefault("fixed, same widths", []).append(
            run_fixed(data, spec, ours.widths, ours.seconds)
        )
        rows.setdefault("fixed, [1000, 1000]", []).append(
            run_fixed(data, spec, [1000, 1000], ours.seconds)
        )
        print(
            f"  {label} seed {seed}: "
            + ", ".join(f"{k} {v[-1].accuracy:.4f}" for k, v in rows.items()),
            flush=True,
        )
    n = len(data.x_train)
    print(
        f"\n{label}: {n} training samples, {len(data.x_test)} test, {seeds} seeds; "
        f"fixed nets trained for the wall clock of our run"
    )
    print(
        f"{'method':<26} {'params':>10} {'acc':>7} {'std':>7} {'seconds':>8}   final widths per seed"
    )
    for name, result in rows.items():
        print(summary(name, result))
    return rows


def verdict(label: str, rows: dict[str, list[Row]]) -> None:
    mean = lambda name, key: statistics.mean(getattr(r, key) for r in rows[name])  # noqa: E731
    ours, gromo, large = "ours (optimal neurons)", "GroMo 0.1.0", "fixed, [1000, 1000]"
    accs = [r.accuracy for r in rows[ours]]
    print(
        f"{label}: ours/GroMo parameters {mean(ours, 'parameters') / mean(gromo, 'parameters'):.2f}, "
        f"seconds {mean(ours, 'seconds') / mean(gromo, 'seconds'):.2f}; accuracy {statistics.mean(accs):.4f} "
        f"(std {statistics.pstdev(accs):.4f}) vs GroMo {mean(gromo, 'accuracy'):.4f}; "
        f"vs [1000, 1000]: {100 * (statistics.mean(accs) - mean(large, 'accuracy')):+.2f} points "
        f"with {mean(ours, 'parameters') / mean(large, 'parameters'):.3f} of its parameters"
    )


DIGITS: dict = {"training": {}, "growth": {}}  # the job's defaults
# stat_batch_max 1024 for both growers on MNIST: GroMo's line search costs ~100 forward
# passes of the statistics batch per event, which would dominate the 5-seed budget.
MNIST = {
    "training": {"epochs": 3, "batch_size": 128},
    "growth": {"steps_between_growth": 50, "max_growth_steps": 12, "stat_batch_max": 1024},
}
MNIST_QUICK = {
    "training": {"epochs": 3, "batch_size": 128},
    "growth": {"steps_between_growth": 12, "max_growth_steps": 12, "stat_batch_max": 1024},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds, MNIST on 10k samples")
    args = parser.parse_args()
    torch.set_num_threads(1)  # small nets; the machine is shared
    seeds = 2 if args.quick else 5
    started = time.perf_counter()
    digits = bench_dataset("digits", {"name": "digits"}, DIGITS, seeds, extras=True)
    mnist_ref = {"name": "mnist", "train_subset": 10_000} if args.quick else {"name": "mnist"}
    mnist = bench_dataset(
        "MNIST", mnist_ref, MNIST_QUICK if args.quick else MNIST, seeds, extras=False
    )
    print()
    verdict("digits", digits)
    verdict("MNIST", mnist)
    print(f"total bench time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
