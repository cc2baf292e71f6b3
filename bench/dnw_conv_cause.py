"""Why does DNW not beat the random graph on the conv tiny graph at CPU scale?

"Discovering Neural Wirings" (section 3.1, Table 1) reports DNW +4.8 points above a random
graph (RG) of the same edges on the static tiny conv graph, after long training. At CPU scale
(`bench/search.py --dnw-conv`) DNW ties or trails RG, while its final wiring, retrained fixed,
is ahead of RG. This script measures whether the wiring ever settles: per epoch, the share of
the real edges that were swapped in (edges entering the top-k, summed over the epoch's steps),
and the test accuracy of DNW and RG, on the conv graph and, for contrast, on the MLP-style
graph (`node_op: act`) where DNW wins here. The same Fashion-MNIST subset, optimiser and seeds
as `bench/search.py --dnw-conv`.

Run: nice -n 10 python bench/dnw_conv_cause.py [--epochs 8] [--seeds 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

# Measure this checkout, whatever copy of the project is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data_dir import bench_data_dir  # noqa: E402

from archsearch.core.context import InMemoryContext, Result  # noqa: E402
from archsearch.core.data.loaders import Dataset, load_dataset  # noqa: E402
from archsearch.core.float_mode import flush_denormals  # noqa: E402
from archsearch.core.methods import get_method  # noqa: E402
from archsearch.specs import parse_job_spec  # noqa: E402
from archsearch.specs.common import DatasetRef  # noqa: E402

DATA_DIRS = (bench_data_dir(),)
GRAPHS: dict[str, dict[str, Any]] = {
    "conv (default neural_graph)": {"name": "neural_graph"},
    "MLP-style (node_op act, 64-64, 32 out)": {
        "name": "neural_graph", "node_op": "act", "hidden_blocks": [64, 64], "output_nodes": 32,
    },
}  # fmt: skip


def load_fashion(train: int, test: int) -> Dataset:
    data = load_dataset(DatasetRef(name="fashion_mnist", train_subset=train), DATA_DIRS, seed=0)
    return replace(data, x_test=data.x_test[:test], y_test=data.y_test[:test])


def run(data: Dataset, model: dict[str, Any], strategy: str, seed: int, epochs: int) -> Result:
    spec = parse_job_spec(
        {
            "method": "search", "dataset": {"name": "fashion_mnist"}, "model": model,
            "search": {"strategy": strategy},
            "training": {
                "epochs": epochs, "batch_size": 128, "seed": seed,
                "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4},
            },
        }
    )  # fmt: skip
    return get_method("search")(spec, data, InMemoryContext())


def epoch_rows(dnw: Result, rg: Result) -> list[str]:
    """Per epoch: swapped-in edges as a share of the real edges, DNW and RG test accuracy."""
    rows = []
    for epoch, (a, b) in enumerate(zip(dnw.history, rg.history, strict=True), start=1):
        share = a.get("edges_entered", float("nan")) / max(1.0, a.get("real_edges", 1.0))
        acc_a, acc_b = a.get("test_accuracy", float("nan")), b.get("test_accuracy", float("nan"))
        rows.append(
            f"  epoch {epoch:3d}  swapped in {100 * share:6.2f}% of real edges"
            f"  ({a.get('swaps_per_step', float('nan')):8.1f}/step)"
            f"  dnw {100 * acc_a:6.2f}  rg {100 * acc_b:6.2f}"
            f"  dnw - rg {100 * (acc_a - acc_b):+6.2f}"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--train", type=int, default=4000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    flush_denormals()  # as every thread that runs jobs does
    data = load_fashion(args.train, 2000)
    print(
        f"DNW wiring churn: Fashion-MNIST {args.train} training / 2000 test images, SGD lr 0.1 "
        f"momentum 0.9 wd 1e-4, cosine, batch 128, {args.epochs} epochs, seeds {args.seeds}"
    )
    start = time.perf_counter()
    for label, model in GRAPHS.items():
        for seed in args.seeds:
            dnw = run(data, model, "dnw", seed, args.epochs)
            rg = run(data, model, "random_graph", seed, args.epochs)
            print(f"{label}, seed {seed}: real edges {dnw.metrics.get('real_edges', 0):.0f}")
            print("\n".join(epoch_rows(dnw, rg)), flush=True)
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
