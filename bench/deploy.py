"""Deployable sparse models (issue 14): size and CPU latency against the dense parent.

Cases, each a real job run in-process (`get_method`, `InMemoryContext`) on MNIST, then its
artifacts reloaded as a user would:
- mlp@d: a [1024, 1024] MLP pruned to density d in 0.5, 0.2, 0.1, 0.05;
- cnn@0.1: the default CNN pruned to density 0.1;
- dnw: the default `search` job (a static neural graph, Discovering Neural Wirings).
Training is short (it is about size and latency, accuracy is reported for honesty only).

Per case: file bytes (dense parent `model.safetensors` vs `model-sparse.safetensors`),
parameters (dense, nonzero kept), and latency at batch 1 and 64 of the dense parent, the
compact model and the compact model with the per-layer chosen forms (dense or CSR kernels,
`core.deploy.forms`, as the job picked and recorded them in deployment.json and
`load_deployed` rebuilds them): medians of interleaved repeats, all three variants in one run,
on one thread. Goal: at density 0.1, MLP batch-1 latency <= 0.5x dense.

Run: OMP_NUM_THREADS=1 python bench/deploy.py [--subset 6000] [--epochs 1] [--budget 3]
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any

import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset, training_subset
from archsearch.core.deploy import load_deployed
from archsearch.core.deploy.latency import model_latencies
from archsearch.core.export import load_model
from archsearch.core.methods import get_method
from archsearch.core.training import flush_denormals
from archsearch.specs import parse_job_spec

DATA_DIRS = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets",
    Path("/work/shared/datasets"),
)


def cases(subset: int, epochs: int) -> dict[str, dict[str, Any]]:
    common = {
        "dataset": {"name": "mnist", "train_subset": subset},
        "training": {"epochs": epochs},
    }
    out: dict[str, dict[str, Any]] = {}
    for density in (0.5, 0.2, 0.1, 0.05):
        out[f"mlp@{density}"] = {
            **common,
            "method": "prune",
            "model": {"name": "mlp", "hidden": [1024, 1024]},
            "density": density,
        }
    out["cnn@0.1"] = {**common, "method": "prune", "model": {"name": "cnn"}, "density": 0.1}
    out["dnw"] = {**common, "method": "search"}
    return out


def run_case(body: dict[str, Any], data: Dataset, budget: float) -> dict[str, Any]:
    spec = parse_job_spec(body)
    ctx = InMemoryContext()
    data = training_subset(data, spec.dataset, spec.training.seed)
    metrics = get_method(body["method"])(spec, data, ctx).metrics
    art = ctx.artifacts
    deployment = json.loads(art["deployment.json"])
    files = deployment["files"]
    parent = load_model(art["architecture.json"], art["model.safetensors"])
    compact = load_model(art[files["architecture"]], art["model-sparse.safetensors"])
    # What a user deploys: the compact weights, each Linear in the form the job picked.
    chosen = load_deployed(
        art[files["architecture"]], art["model-sparse.safetensors"], art["deployment.json"]
    )
    forms = deployment["forms"]
    shape = data.input_shape
    latency = model_latencies(
        {"dense": parent, "compact": compact, "sparse": chosen}, shape, (1, 64), budget
    )
    size = deployment["size"]
    return {
        "accuracy": deployment["test_accuracy"],
        "density": metrics.get("density", float("nan")),
        "bytes_dense": len(art["model.safetensors"]),
        "bytes_sparse": len(art["model-sparse.safetensors"]),
        "params_dense": size["parameters_dense"],
        "params_kept": size["nonzero_compact"],
        "latency": latency,
        "forms": [(f["layer"], f["batch_1"], f["batch_64"]) for f in forms],
    }


def report(name: str, row: dict[str, Any]) -> None:
    lat = row["latency"]
    b1, b64 = lat["batch_1"], lat["batch_64"]
    print(
        f"{name:9} acc {row['accuracy']:.3f} density {row['density']:.3f} | bytes "
        f"{row['bytes_dense']:>9,} -> {row['bytes_sparse']:>9,} "
        f"({row['bytes_sparse'] / row['bytes_dense']:.3f}x) | params {row['params_dense']:>9,}"
        f" -> {row['params_kept']:>9,} | b1 dense {b1['dense_s'] * 1e3:.3f} ms, compact "
        f"{b1['compact_s'] / b1['dense_s']:.2f}x, sparse {b1['sparse_s'] / b1['dense_s']:.2f}x"
        f" | b64 dense {b64['dense_s'] * 1e3:.3f} ms, compact "
        f"{b64['compact_s'] / b64['dense_s']:.2f}x, sparse {b64['sparse_s'] / b64['dense_s']:.2f}x"
        f" | repeats {int(b1['repeats'])}/{int(b64['repeats'])}"
    )
    print(f"{'':9} forms (layer, batch 1, batch 64): {row['forms']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subset", type=int, default=6000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of timing per case")
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    flush_denormals()  # as every thread that runs jobs does
    ref = parse_job_spec({"method": "train", "dataset": {"name": "mnist"}}).dataset
    data = load_dataset(ref, tuple(d for d in DATA_DIRS if d.is_dir()))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread; ratios vs dense parent")
    wanted = set(filter(None, args.cases.split(",")))
    for name, body in cases(args.subset, args.epochs).items():
        if not wanted or name in wanted:
            report(name, run_case(body, data, args.budget))


if __name__ == "__main__":
    main()
