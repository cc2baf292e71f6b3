"""Transfer of a found architecture between tasks that share an input distribution, the
setting of "Differentiable Architecture Pruning for Transfer Learning" (section 3.2: CIFAR-10
to CIFAR-100), at CPU scale: one dataset's classes split in two.

The parent is pruned on classes 0-4 (a `prune` job, with its `magnitude` baseline saved at the
same density), then `transfer` jobs retrain it few-shot (50 per class) on classes 5-9 with
- learned: the prune job's mask (`first_layer: masked`, the default);
- random (same per-layer density): the `reshuffle` mask;
- magnitude: global magnitude of the parent's trained weights at the same density.
Both splits are uploads as the worker loads them (labels 0-4 on each side, so the output
layer's mask transfers too).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _section5 import skip_deployment

from archsearch.core.context import InMemoryContext
from archsearch.core.data.catalog import find_idx_files
from archsearch.core.data.idx import read_idx
from archsearch.core.data.uploaded import uploaded_dataset, uploaded_info
from archsearch.core.methods import get_method
from archsearch.specs import DatasetRef, parse_job_spec

DATASETS = ("mnist", "fashion_mnist")
DENSITIES = (0.1, 0.05)
MASKS = ("learned", "reshuffle", "magnitude")
SOURCE_TRAIN, TEST = 5000, 1000
SOURCE_EPOCHS = 5
FEW_SHOT = 50


def split(name: str, data_dirs: tuple[Path, ...], classes: range, seed: int) -> dict[str, Any]:
    """Arrays of `classes` (relabelled from 0): SOURCE_TRAIN training and TEST test images."""
    files = find_idx_files(name, data_dirs)
    assert files is not None, f"{name} is not in {data_dirs}"
    rng = np.random.default_rng(seed)
    out = {}
    for part, key, count in (("train", "x", SOURCE_TRAIN), ("test", "x_test", TEST)):
        x, y = read_idx(files[f"{part}_images"]), read_idx(files[f"{part}_labels"])
        keep = rng.permutation(np.flatnonzero(np.isin(y, list(classes))))[:count]
        out[key] = x[keep][:, None].astype(np.float32)  # (N, 1, 28, 28)
        out["y" if part == "train" else "y_test"] = (y[keep] - classes.start).astype(np.int64)
    return out


def upload(arrays: dict[str, Any], ref: dict[str, Any], seed: int) -> Any:
    x = arrays["x"]
    info = uploaded_info(
        "split", "class split", x.shape[1:], 5, len(arrays["y"]), len(arrays["y_test"]),
        [float(x.mean())], [float(x.std())],
    )  # fmt: skip
    return uploaded_dataset(info, arrays, DatasetRef.model_validate(ref), seed)


def one_cell(
    dataset: str, density: float, seed: int, data_dirs: tuple[Path, ...]
) -> dict[str, float]:
    """Target-split test accuracy of each transferred mask (one parent prune job)."""
    torch.set_num_threads(1)
    skip_deployment()
    prune = {
        "method": "prune", "dataset": {"name": "split"}, "density": density,
        "baselines": ["magnitude"], "training": {"epochs": SOURCE_EPOCHS, "seed": seed},
    }  # fmt: skip
    source = InMemoryContext()
    spec = parse_job_spec(prune)
    data = upload(split(dataset, data_dirs, range(0, 5), seed), prune["dataset"], seed)
    source_metrics = get_method("prune")(spec, data, source).metrics
    ref = {"name": "split", "samples_per_class": FEW_SHOT}
    target = split(dataset, data_dirs, range(5, 10), seed)
    out = {"source": source_metrics["test_accuracy"]}
    for mask in MASKS:
        job = {
            "method": "transfer", "dataset": ref, "source_job": "parent", "mask": mask,
            "training": {"seed": seed},
        }  # fmt: skip
        ctx = InMemoryContext(other_jobs={"parent": source.artifacts})
        result = get_method("transfer")(parse_job_spec(job), upload(target, ref, seed), ctx)
        out[mask] = result.metrics["test_accuracy"]
    return out


def print_table(results: dict[tuple[str, float], list[dict[str, float]]], seconds: float) -> None:
    seeds = len(next(iter(results.values())))
    print(
        f"transfer between class splits (0-4 -> 5-9): target test accuracy, mean +- sd over "
        f"{seeds} seeds; parent: {SOURCE_TRAIN} images, {SOURCE_EPOCHS} epochs; few-shot "
        f"{FEW_SHOT} per class, transfer's default 1000 steps; {TEST} test images; the jobs' "
        "deployment step skipped"
    )
    header = f"{'dataset':14} {'density':>7} {'source':>14} " + " ".join(f"{m:>14}" for m in MASKS)
    print(header + "  learned - best baseline")
    print("-" * (len(header) + 26))
    for (dataset, density), runs in results.items():

        def cell(key: str, runs: list[dict[str, float]] = runs) -> str:
            values = [r[key] for r in runs]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            return f"{statistics.fmean(values):.3f}+-{sd:.3f}"

        gaps = [r["learned"] - max(r["reshuffle"], r["magnitude"]) for r in runs]
        wins = sum(g > 0 for g in gaps)
        masks = " ".join(f"{cell(m):>14}" for m in MASKS)
        print(
            f"{dataset:14} {density:>7} {cell('source'):>14} {masks}  "
            f"{statistics.fmean(gaps):+.3f} (learned best in {wins}/{len(runs)} seeds)"
        )
    print(f"total {seconds:.0f} s")
