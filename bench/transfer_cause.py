"""Why does the learned mask transfer worse than a random one of the same per-layer densities?

The class-split transfer of `bench/fidelity.py --class-split` ("Differentiable Architecture
Pruning for Transfer Learning", sections 3.2-3.3: a mask pruned on classes 0-4, retrained
few-shot on classes 5-9) found `reshuffle` ahead of `learned`. This script measures where the
loss comes from, on the same parent, data and seeds:

1. Layer by layer: the learned mask with one layer swapped for its reshuffle (the same layer
   of the `reshuffle` mask: same count of connections, random positions). If the learned
   first layer is what hurts, swapping it alone recovers the gap; if the gap is spread over
   the layers, each swap recovers a part.
2. Input pixels: the learned first layer's in-degree per pixel (kept connections from it).
   How much of the target classes' pixel variance falls on pixels the mask cut off entirely
   (in-degree 0), against the source classes' and against the reshuffled first layer; and
   the rank correlation of in-degree with each split's pixel variance.

Run: nice -n 10 python bench/transfer_cause.py [--datasets fashion_mnist] [--seeds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr

# Measure this checkout, whatever copy of the project is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _class_split as class_split  # noqa: E402  (beside this script)
from _data_dir import bench_data_dir  # noqa: E402
from _section5 import skip_deployment  # noqa: E402

from archsearch.core.context import InMemoryContext  # noqa: E402
from archsearch.core.export import tensors_from_bytes  # noqa: E402
from archsearch.core.methods import get_method  # noqa: E402
from archsearch.core.pruning.baselines import reshuffle_masks  # noqa: E402
from archsearch.core.pruning.build import mask_bytes  # noqa: E402
from archsearch.specs import parse_job_spec  # noqa: E402

DATA_DIRS = (bench_data_dir(),)
DENSITY = 0.1
Masks = dict[str, torch.Tensor]


def parent(dataset: str, seed: int) -> tuple[InMemoryContext, dict[str, Any], dict[str, Any]]:
    """The prune job on classes 0-4 exactly as `_class_split.one_cell` runs it."""
    prune: dict[str, Any] = {
        "method": "prune", "dataset": {"name": "split"}, "density": DENSITY,
        "training": {"epochs": class_split.SOURCE_EPOCHS, "seed": seed},
    }  # fmt: skip
    source_arrays = class_split.split(dataset, DATA_DIRS, range(0, 5), seed)
    data = class_split.upload(source_arrays, prune["dataset"], seed)
    source = InMemoryContext()
    get_method("prune")(parse_job_spec(prune), data, source)
    return source, source_arrays, class_split.split(dataset, DATA_DIRS, range(5, 10), seed)


def transfer(source: InMemoryContext, masks: Masks, target: dict[str, Any], seed: int) -> float:
    """A `transfer` job (mask: learned) whose parent's mask file is `masks`."""
    artifacts = {**source.artifacts, "mask.safetensors": mask_bytes(masks)}
    ref = {"name": "split", "samples_per_class": class_split.FEW_SHOT}
    job = {
        "method": "transfer", "dataset": ref, "source_job": "parent", "mask": "learned",
        "training": {"seed": seed},
    }  # fmt: skip
    ctx = InMemoryContext(other_jobs={"parent": artifacts})
    data = class_split.upload(target, ref, seed)
    return float(get_method("transfer")(parse_job_spec(job), data, ctx).metrics["test_accuracy"])


def variants(learned: Masks, seed: int) -> dict[str, Masks]:
    """learned, reshuffle, and learned with one layer taken from the reshuffle."""
    reshuffled = reshuffle_masks(learned, torch.Generator().manual_seed(seed))
    out = {"learned": learned, "reshuffle": reshuffled}
    for name in learned:
        out[f"learned, {name} reshuffled"] = {**learned, name: reshuffled[name]}
    return out


def pixel_use(first: torch.Tensor, source: np.ndarray, target: np.ndarray) -> dict[str, float]:
    """Share of each split's pixel variance on pixels the first layer cuts off, and the rank
    correlation of in-degree with it; `first` is (hidden, pixels), images (N, 1, 28, 28)."""
    in_degree = first.float().sum(0).numpy()  # (pixels,)
    out = {}
    for split, images in (("source", source), ("target", target)):
        variance = images.reshape(len(images), -1).var(0)  # (pixels,)
        out[f"{split} var cut"] = float(variance[in_degree == 0].sum() / variance.sum())
        out[f"{split} rho"] = float(spearmanr(in_degree, variance).statistic)
    out["pixels cut"] = float((in_degree == 0).mean())
    return out


def first_layer_name(masks: Masks) -> str:
    """The mask whose input width is the image's (784)."""
    return next(name for name, m in masks.items() if m.shape[1] == 28 * 28)


def one_cell(args: tuple[str, int]) -> tuple[str, dict[str, float]]:
    dataset, seed = args
    torch.set_num_threads(1)
    skip_deployment()
    source, source_arrays, target = parent(dataset, seed)
    learned = tensors_from_bytes(source.artifacts["mask.safetensors"])
    out: dict[str, float] = {}
    masks = variants(learned, seed)
    for label, variant in masks.items():
        out[label] = transfer(source, variant, target, seed)
    first = first_layer_name(learned)
    for label in ("learned", "reshuffle"):
        use = pixel_use(masks[label][first], source_arrays["x"], target["x"])
        out.update({f"{label}: {key}": value for key, value in use.items()})
    return dataset, out


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4f} +- {sd:.4f}"


def print_results(results: dict[str, list[dict[str, float]]], seconds: float) -> None:
    cs = class_split
    print(
        f"transfer cause: class split 0-4 -> 5-9, density {DENSITY}, parent {cs.SOURCE_TRAIN}"
        f" images / {cs.SOURCE_EPOCHS} epochs, few-shot {cs.FEW_SHOT} per class,"
        " transfer's default steps; target test accuracy mean +- sd over seeds, and paired gaps"
    )
    for dataset, runs in results.items():
        print(f"\n{dataset} ({len(runs)} seeds)")
        for key in [k for k in runs[0] if ":" not in k]:
            gap = [r[key] - r["learned"] for r in runs]
            print(f"  {key:34} {mean_sd([r[key] for r in runs])}   - learned {mean_sd(gap)}")
        print("  pixel use of the first layer (share of pixel variance on cut-off pixels; rho:")
        print("  Spearman of in-degree with pixel variance)")
        for key in [k for k in runs[0] if ":" in k]:
            print(f"  {key:34} {mean_sd([r[key] for r in runs])}")
    print(f"total {seconds:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["fashion_mnist"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    tasks = [(d, s) for d in args.datasets for s in range(args.seeds)]
    start = time.perf_counter()
    results: dict[str, list[dict[str, float]]] = {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for dataset, out in pool.map(one_cell, tasks):
            results.setdefault(dataset, []).append(out)
            print(f"done {dataset} seed {len(results[dataset]) - 1}", flush=True)
    print_results(results, time.perf_counter() - start)


if __name__ == "__main__":
    main()
