"""Benchmark of the `search` method (Discovering Neural Wirings).

1. Cost of DNW's straight-through training step (forward with the top-k edges, dense backward,
   optimiser step, top-k re-selection) as a ratio to a dense training step of the same
   complete graph, for the static tiny classifier and MobileNetV1-DNW; interleaved
   repetitions, median.
2. Test accuracy of dnw vs random_graph vs complete at the same edge budget on Fashion-MNIST
   (static and discrete-time tiny classifiers, plus an MLP-style static graph), several
   seeds, mean and std.

3. `--dnw-conv`: DNW vs the random graph at equal edges on the conv tiny graph, paired by
   seed, at a few edge budgets and epochs (docs/fidelity.md).

Run: python bench/search.py [--quick] | --dnw-conv [--only SUBSTRING ...] [--train N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

# Measure this checkout, whatever copy of the project is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data_dir import bench_data_dir

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.evaluation import evaluate
from archsearch.core.float_mode import flush_denormals
from archsearch.core.methods import get_method
from archsearch.core.methods.search import train_wiring
from archsearch.core.models import Architecture, create_model
from archsearch.core.search.strategies import searchable_edges
from archsearch.core.training import seed_everything
from archsearch.specs import SearchJob, parse_job_spec
from archsearch.specs.common import DatasetRef
from archsearch.specs.graph_model_configs import MobileNetDNWConfig, NeuralGraphConfig

DATA_DIRS = (bench_data_dir(),)


def _step_fn(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, dnw: bool) -> Any:
    layers = searchable_edges(model)
    for layer in layers:
        if dnw:
            layer.gradient_to = "admissible"
            layer.select(layer.k)
        else:  # the complete graph: every admissible edge is real, ordinary gradients
            layer.gradient_to = "real"
            layer.set_mask(layer.admissible)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        opt.step()
        if dnw:
            with torch.no_grad():
                for layer in layers:
                    layer.select()

    return step


def time_step_ratio(config: Any, batch: int, steps: int, reps: int) -> tuple[float, float, float]:
    """Median seconds per step of DNW and of the complete graph, and their ratio."""
    architecture = Architecture(config, (1, 28, 28), 10)
    torch.manual_seed(0)
    x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
    runs = {}
    for dnw in (True, False):
        torch.manual_seed(0)
        model = create_model(architecture)
        runs[dnw] = _step_fn(model, x, y, dnw)
        runs[dnw]()  # warm-up
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(reps):
        for dnw in (True, False):  # interleaved: both see the same machine load
            start = time.perf_counter()
            for _ in range(steps):
                runs[dnw]()
            times[dnw].append((time.perf_counter() - start) / steps)
    dnw_t, dense_t = statistics.median(times[True]), statistics.median(times[False])
    return dnw_t, dense_t, dnw_t / dense_t


def load_fashion(train: int, test: int) -> Dataset:
    data = load_dataset(DatasetRef(name="fashion_mnist", train_subset=train), DATA_DIRS, seed=0)
    return replace(data, x_test=data.x_test[:test], y_test=data.y_test[:test])


def accuracy(
    data: Dataset, model: dict[str, Any], strategy: str, seed: int, epochs: int
) -> dict[str, float]:
    spec = parse_job_spec(
        {
            "method": "search",
            "dataset": {"name": "fashion_mnist"},
            "model": model,
            "search": {"strategy": strategy},
            "training": {
                "epochs": epochs,
                "batch_size": 128,
                "seed": seed,
                "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4},
            },
        }
    )
    return get_method("search")(spec, data, InMemoryContext()).metrics


def _mean_std(values: list[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):5.2f} +- {100 * std:4.2f}"


def accuracy_table(
    data: Dataset, settings: dict[str, dict[str, Any]], seeds: list[int], epochs: int
) -> None:
    print(
        f"{'setting':22s} {'strategy':13s} {'test acc % (mean +- std)':26s} {'real edges':>10s} "
        f"{'compact MACs':>12s} {'dead nodes':>10s} {'sec/run':>8s}"
    )
    for label, model in settings.items():
        for strategy in ("dnw", "random_graph", "complete"):
            results, start = [], time.perf_counter()
            for seed in seeds:
                results.append(accuracy(data, model, strategy, seed, epochs))
            per_run = (time.perf_counter() - start) / len(seeds)
            accs = [r["test_accuracy"] for r in results]
            print(
                f"{label:22s} {strategy:13s} {_mean_std(accs):26s} "
                f"{results[0]['real_edges']:10.0f} "
                f"{statistics.mean(r['macs'] for r in results):12.0f} "
                f"{statistics.mean(r['removed_nodes'] for r in results):10.1f} {per_run:8.1f}",
                flush=True,
            )


def _train_fixed(
    data: Dataset, model: dict[str, Any], seed: int, epochs: int, mask: torch.Tensor | None
) -> tuple[float, torch.Tensor]:
    """Train with the random graph's init; `mask` given: that wiring, fixed. Returns the
    test accuracy and the final real-edge mask."""
    strategy = "random_graph" if mask is not None else "dnw"
    spec = parse_job_spec(
        {
            "method": "search",
            "dataset": {"name": "fashion_mnist"},
            "model": model,
            "search": {"strategy": strategy},
            "training": {
                "epochs": epochs,
                "batch_size": 128,
                "seed": seed,
                "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4},
            },
        }
    )
    assert isinstance(spec, SearchJob), "a search job"
    seed_everything(seed)
    net = create_model(Architecture(spec.model, data.input_shape, data.num_classes))
    edges = searchable_edges(net)[0]
    if mask is not None:
        edges.set_mask(mask)
    train_wiring(net, spec, data, InMemoryContext(), [edges.k])
    return evaluate(net, data.x_test, data.y_test, torch.device("cpu"))[
        1
    ], edges.mask.bool().clone()


def wiring_quality(data: Dataset, model: dict[str, Any], seeds: list[int], epochs: int) -> None:
    """Is DNW's wiring better than a random one, once the weights are trained on it alone?"""
    found, retrained = [], []
    for seed in seeds:
        accuracy_dnw, mask = _train_fixed(data, model, seed, epochs, None)
        found.append(accuracy_dnw)
        retrained.append(_train_fixed(data, model, seed, epochs, mask)[0])
    print(f"{'dnw (searching while training)':44s} {_mean_std(found)}")
    print(
        f"{'dnw wiring, retrained fixed from the RG init':44s} {_mean_std(retrained)}", flush=True
    )


# `--dnw-conv`: where does DNW beat the random graph on the conv tiny graph (section 3.1)?
# The paper's gap (+4.8 on CIFAR-10) comes with long training; at CPU scale the knobs are
# the edge budget, the epochs and the dataset.
DNW_CONV_SETTINGS: dict[str, tuple[dict[str, Any], int]] = {
    "density 0.1, 4 epochs (default graph)": ({"name": "neural_graph"}, 4),
    "density 0.03, 4 epochs": ({"name": "neural_graph", "density": 0.03}, 4),
    "density 0.1, 12 epochs": ({"name": "neural_graph"}, 12),
    "density 0.03, 12 epochs": ({"name": "neural_graph", "density": 0.03}, 12),
}


def dnw_conv(train: int, test: int, seeds: list[int], only: list[str]) -> None:
    """DNW vs random graph at equal edges on Fashion-MNIST, paired by seed."""
    data = load_fashion(train, test)
    print(
        f"DNW vs random graph, static conv tiny graph, Fashion-MNIST {train} training / {test} "
        f"test images, SGD lr 0.1 momentum 0.9 wd 1e-4, cosine, batch 128, seeds {seeds}"
    )
    print(f"{'setting':40s} {'dnw %':>14s} {'random graph %':>14s} {'dnw - rg (paired)':>18s}")
    for label, (model, epochs) in DNW_CONV_SETTINGS.items():
        if only and not any(o in label for o in only):
            continue
        dnw, rg = [], []
        for seed in seeds:
            dnw.append(accuracy(data, model, "dnw", seed, epochs)["test_accuracy"])
            rg.append(accuracy(data, model, "random_graph", seed, epochs)["test_accuracy"])
            print(f"  {label} seed {seed}: dnw {dnw[-1]:.4f} rg {rg[-1]:.4f}", flush=True)
        gaps = [a - b for a, b in zip(dnw, rg, strict=True)]
        print(f"{label:40s} {_mean_std(dnw):>14s} {_mean_std(rg):>14s} {_mean_std(gaps):>18s}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smaller, faster run")
    parser.add_argument("--dnw-conv", action="store_true", help="only the conv-graph settings")
    parser.add_argument("--only", nargs="*", default=[], help="--dnw-conv settings containing")
    parser.add_argument("--train", type=int, default=4000, help="--dnw-conv training images")
    parser.add_argument(
        "--wiring-epochs",
        type=int,
        default=None,
        help="--dnw-conv: instead, DNW's final wiring of the default graph retrained fixed",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    flush_denormals()  # as every thread that runs jobs does
    if args.dnw_conv and args.wiring_epochs:
        data = load_fashion(args.train, 2000)
        wiring_quality(data, {"name": "neural_graph"}, [0, 1, 2], args.wiring_epochs)
        return
    if args.dnw_conv:
        dnw_conv(args.train, 2000, [0, 1, 2], args.only)
        return
    reps = 3 if args.quick else 7

    print("== 1. training-step cost: DNW (straight-through top-k) / complete graph (dense) ==")
    print(f"{'model':34s} {'batch':>5s} {'DNW s/step':>11s} {'dense s/step':>12s} {'ratio':>6s}")
    cases = [
        ("tiny static graph (default)", NeuralGraphConfig(), 128, 10),
        (
            "tiny static graph (paper size)",
            NeuralGraphConfig(
                input_nodes=32, hidden_blocks=(192, 192, 192, 92), output_nodes=100, density=0.125
            ),
            64,
            3,
        ),
        ("MobileNetV1-DNW x0.25, 28x28", MobileNetDNWConfig(width=0.25), 128, 1),
    ]
    for label, config, batch, steps in cases:
        dnw_t, dense_t, ratio = time_step_ratio(config, batch, steps, reps)
        print(f"{label:34s} {batch:5d} {dnw_t:11.4f} {dense_t:12.4f} {ratio:6.3f}", flush=True)

    train, test, epochs = (2000, 1000, 2) if args.quick else (6000, 2000, 4)
    seeds = [0] if args.quick else [0, 1, 2]
    print(
        f"\n== 2. Fashion-MNIST accuracy at the same edge budget: {train} training images, "
        f"{test} test images, {epochs} epochs, SGD lr 0.1 momentum 0.9 wd 1e-4, cosine, "
        f"batch 128, seeds {seeds} =="
    )
    settings: dict[str, dict[str, Any]] = {
        "static conv (tiny)": {"name": "neural_graph"},
        "discrete conv T=4": {"name": "neural_graph", "setting": "discrete"},
        "static MLP-style": {
            "name": "neural_graph",
            "node_op": "act",
            "hidden_blocks": [64, 64],
            "output_nodes": 32,
            "density": 0.02,
        },
    }
    data = load_fashion(train, test)
    accuracy_table(data, settings, seeds, epochs)
    print(
        "\n== 3. wiring quality, static conv (tiny), same setting: the random_graph row above "
        "vs DNW's final wiring trained again, fixed, from the random graph's init =="
    )
    wiring_quality(data, settings["static conv (tiny)"], seeds, epochs)


if __name__ == "__main__":
    main()
