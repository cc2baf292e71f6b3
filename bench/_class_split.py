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
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _section5 import skip_deployment
from _tuning import choose, default_lr, factors_text

from archsearch.core.context import InMemoryContext
from archsearch.core.data.catalog import find_idx_files
from archsearch.core.data.idx import read_idx
from archsearch.core.data.inputs import Inputs
from archsearch.core.data.loaders import Dataset
from archsearch.core.data.uploaded import normalise, uploaded_dataset, uploaded_info
from archsearch.core.errors import DivergedError
from archsearch.core.methods import get_method
from archsearch.jobs.runtime.executor import final_validation
from archsearch.specs import DatasetRef, parse_job_spec

DATASETS = ("mnist", "fashion_mnist")
DENSITIES = (0.1, 0.05)
MASKS = ("learned", "reshuffle", "magnitude")
SOURCE_TRAIN, TEST = 5000, 1000
SOURCE_EPOCHS = 5
FEW_SHOT = 50
TARGET_REF = {"name": "split", "samples_per_class": FEW_SHOT}
# Classes 5-9 training images, apart from the few-shot pool and the test images, that every
# mask's lr is chosen on: 10% of the 250 few-shot images would be too few to tell lrs apart.
VALIDATION = 1000


def split(
    name: str, data_dirs: tuple[Path, ...], classes: range, seed: int, validation: int = 0
) -> dict[str, Any]:
    """Arrays of `classes` (relabelled from 0): SOURCE_TRAIN training and TEST test images,
    and `validation` more training images (x_val, y_val), none of them among the
    SOURCE_TRAIN the few-shot set is drawn from. The draws do not depend on `validation`."""
    files = find_idx_files(name, data_dirs)
    assert files is not None, f"{name} is not in {data_dirs}"
    rng = np.random.default_rng(seed)
    out = {}
    for part, suffix, count in (("train", "", SOURCE_TRAIN), ("test", "_test", TEST)):
        x, y = read_idx(files[f"{part}_images"]), read_idx(files[f"{part}_labels"])
        order = rng.permutation(np.flatnonzero(np.isin(y, list(classes))))
        picks = {suffix: order[:count]}
        if part == "train" and validation:  # the images after the pool in the same order
            picks["_val"] = order[count : count + validation]
        for name_suffix, keep in picks.items():
            out[f"x{name_suffix}"] = x[keep][:, None].astype(np.float32)  # (N, 1, 28, 28)
            out[f"y{name_suffix}"] = (y[keep] - classes.start).astype(np.int64)
    return out


def upload(arrays: dict[str, Any], ref: dict[str, Any], seed: int) -> Any:
    x = arrays["x"]
    info = uploaded_info(
        "split", "class split", x.shape[1:], 5, len(arrays["y"]), len(arrays["y_test"]),
        [float(x.mean())], [float(x.std())],
    )  # fmt: skip
    return uploaded_dataset(info, arrays, DatasetRef.model_validate(ref), seed)


def with_validation(data: Dataset, arrays: dict[str, Any]) -> Dataset:
    """`data` holding `arrays`' validation images apart, normalised as its own images."""
    if "x_val" not in arrays:
        return data
    x_val = Inputs.from_tensor(normalise(arrays["x_val"], data.info))
    return replace(data, x_val=x_val, y_val=torch.from_numpy(arrays["y_val"]))


def parent(dataset: str, density: float, seed: int, data_dirs: tuple[Path, ...]) -> Any:
    """The prune job on classes 0-4 (shared by every mask and lr): its context and metrics."""
    prune = {
        "method": "prune", "dataset": {"name": "split"}, "density": density,
        "baselines": ["magnitude"], "training": {"epochs": SOURCE_EPOCHS, "seed": seed},
    }  # fmt: skip
    source = InMemoryContext()
    data = upload(split(dataset, data_dirs, range(0, 5), seed), prune["dataset"], seed)
    return source, get_method("prune")(parse_job_spec(prune), data, source).metrics


def retrained(
    mask: str, seed: int, factor: float, target: Dataset, source: InMemoryContext
) -> tuple[float, float]:
    """(test, validation accuracy) of `mask` retrained few-shot at `factor` times the transfer
    job's documented lr; NaN when that lr diverged."""
    job = {
        "method": "transfer", "dataset": TARGET_REF, "source_job": "parent", "mask": mask,
        "training": {"seed": seed, "optimizer": {"lr": default_lr("transfer") * factor}},
    }  # fmt: skip
    ctx = InMemoryContext(other_jobs={"parent": source.artifacts})
    try:
        result = get_method("transfer")(parse_job_spec(job), target, ctx)
    except DivergedError:  # a learning rate too large for this mask: never the one chosen
        return float("nan"), float("nan")
    validation = final_validation(result.history).get("val_accuracy", float("nan"))
    return result.metrics["test_accuracy"], validation


def one_cell(
    dataset: str,
    density: float,
    seed: int,
    data_dirs: tuple[Path, ...],
    factors: tuple[float, ...] = (1.0,),
) -> dict[str, float]:
    """Target-split test accuracy of each transferred mask (one parent prune job), each mask
    retrained at every lr factor and the run best on the validation images kept (`<mask> lr`:
    its factor; `<mask> 1x`: the run at the documented lr)."""
    torch.set_num_threads(1)
    skip_deployment()
    source, source_metrics = parent(dataset, density, seed, data_dirs)
    held = VALIDATION if len(factors) > 1 else 0
    arrays = split(dataset, data_dirs, range(5, 10), seed, held)
    target = with_validation(upload(arrays, TARGET_REF, seed), arrays)
    out = {"source": source_metrics["test_accuracy"]}
    for mask in MASKS:
        runs = {f: retrained(mask, seed, f, target, source) for f in factors}
        out[f"{mask} lr"], out[mask] = choose(runs)
        out[f"{mask} 1x"] = runs[1.0][0] if 1.0 in runs else float("nan")
    return out


def _cell(runs: list[dict[str, float]], key: str) -> str:
    values = [r[key] for r in runs]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.3f}+-{sd:.3f}"


def _rows(results: dict[tuple[str, float], list[dict[str, float]]], suffix: str = "") -> None:
    """One row per cell: each mask's test accuracy (`suffix` " 1x": the runs at the
    documented lr) and learned's paired gap to the better baseline."""
    header = f"{'dataset':14} {'density':>7} {'source':>14} " + " ".join(f"{m:>14}" for m in MASKS)
    print(header + "  learned - best baseline")
    print("-" * (len(header) + 26))
    for (dataset, density), runs in results.items():
        learned, others = f"learned{suffix}", [f"{m}{suffix}" for m in MASKS[1:]]
        gaps = [r[learned] - max(r[o] for o in others) for r in runs]
        wins = sum(g > 0 for g in gaps)
        masks = " ".join(f"{_cell(runs, f'{m}{suffix}'):>14}" for m in MASKS)
        print(
            f"{dataset:14} {density:>7} {_cell(runs, 'source'):>14} {masks}  "
            f"{statistics.fmean(gaps):+.3f} (learned best in {wins}/{len(runs)} seeds)"
        )


def _chosen(results: dict[tuple[str, float], list[dict[str, float]]]) -> None:
    print("chosen lr factor per seed:")
    for (dataset, density), runs in results.items():
        picks = "; ".join(f"{m} {factors_text(r[f'{m} lr'] for r in runs)}" for m in MASKS)
        print(f"  {dataset:14} {density:>7}  {picks}")


def print_table(
    results: dict[tuple[str, float], list[dict[str, float]]],
    seconds: float,
    factors: tuple[float, ...] = (1.0,),
) -> None:
    seeds = len(next(iter(results.values())))
    print(
        f"transfer between class splits (0-4 -> 5-9): target test accuracy, mean +- sd over "
        f"{seeds} seeds; parent: {SOURCE_TRAIN} images, {SOURCE_EPOCHS} epochs; few-shot "
        f"{FEW_SHOT} per class, transfer's default 1000 steps; {TEST} test images; the jobs' "
        "deployment step skipped"
    )
    tuning = len(factors) > 1
    if tuning:
        print(
            f"every mask retrained at {factors_text(factors)} the transfer job's documented lr "
            f"({default_lr('transfer'):g}); per seed, the run best on {VALIDATION} validation "
            "images of classes 5-9 (training images apart from the few-shot pool and the test "
            "images, the same for every mask); the parent prune is shared, not swept"
        )
    _rows(results)
    if tuning and 1.0 in factors:
        print("the same runs at 1x the documented lr (no choice):")
        _rows(results, " 1x")
    if tuning:
        _chosen(results)
    print(f"total {seconds:.0f} s")
