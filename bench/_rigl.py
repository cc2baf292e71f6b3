"""RigL (Evci et al., 2020) against the two-temperature learned mask at equal density and
steps (`python bench/prune.py --only 5`): the same MLP, data, epochs and seeds; a static
random sparse network (RigL with no update) shows what the rewiring adds.

Every arm is tuned alike (`_tuning`): trained at each of `factors` times the prune method's
documented learning rate on the training images less 10% held apart (the same rows for
every arm), and per seed the run best on the held-apart rows is reported. One factor runs
the untuned comparison on every training image."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _tuning import LR_FACTORS, VALIDATION_FRACTION, choose, default_lr, factors_text, mean_sd

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, hold_out_validation, load_dataset
from archsearch.core.errors import DivergedError
from archsearch.core.methods import prune
from archsearch.specs import DatasetRef, parse_job_spec

ARMS: dict[str, dict[str, Any]] = {
    "learned (two temperatures)": {},
    "rigl": {"algorithm": "rigl"},
    "static random (rigl, no update)": {
        "algorithm": "rigl",
        "rigl": {"update_interval": 1_000_000},
    },
}
# (test accuracy, validation accuracy) per lr factor
Runs = dict[float, tuple[float, float]]


def _data(ref: dict[str, Any], data_dirs: tuple[Path, ...], seed: int, tuning: bool) -> Dataset:
    data = load_dataset(DatasetRef(**ref), data_dirs, seed=seed)
    return hold_out_validation(data, VALIDATION_FRACTION) if tuning else data


def _runs(job: dict[str, Any], data: Dataset, seed: int, factors: tuple[float, ...]) -> Runs:
    """The arm's job at each lr factor: its test and validation accuracy."""
    runs = {}
    for factor in factors:
        training = {"seed": seed, "optimizer": {"lr": default_lr("prune") * factor}}
        spec = parse_job_spec({**job, "training": training})
        try:
            metrics = prune.run(spec, data, InMemoryContext()).metrics  # type: ignore[arg-type]
            runs[factor] = (metrics["test_accuracy"], metrics.get("val_accuracy", float("nan")))
        except DivergedError:  # a learning rate too large for this arm: never the one chosen
            runs[factor] = (float("nan"), float("nan"))
    return runs


def _print_arm(
    density: float, label: str, per_seed: list[Runs], factors: tuple[float, ...]
) -> None:
    picks = [choose(runs) for runs in per_seed]
    mean, sd = mean_sd(test for _, test in picks)
    line = f"density {density:<5} {label:34s} {mean:.4f} +- {sd:.4f}"
    if len(factors) > 1 and 1.0 in factors:
        at_one = mean_sd(runs[1.0][0] for runs in per_seed)
        line += f"   at 1x {at_one[0]:.4f} +- {at_one[1]:.4f}"
    if len(factors) > 1:
        line += f"   chosen {factors_text(f for f, _ in picks)}"
    print(line, flush=True)


def _title(train: int, seeds: list[int], factors: tuple[float, ...]) -> None:
    print(
        f"\n== 5. RigL vs the learned mask: MNIST {train} training images, the default MLP "
        f"(256, 128) and 10 epochs, seeds {seeds}; test accuracy mean +- sd =="
    )
    if len(factors) > 1:
        print(
            f"every arm at {factors_text(factors)} the prune job's documented lr "
            f"({default_lr('prune'):g}), trained on the images less {VALIDATION_FRACTION:.0%} "
            "held apart (the same for every arm); per seed, the run best on them. 'at 1x': "
            "the documented lr, no choice; 'chosen': the factor picked in each seed"
        )


def rigl_benchmark(
    data_dirs: tuple[Path, ...], quick: bool, factors: tuple[float, ...] = LR_FACTORS
) -> None:
    train, seeds, densities = (1000, [0], (0.1,)) if quick else (4000, [0, 1, 2], (0.1, 0.05))
    ref = {"name": "mnist", "train_subset": train}
    tuning = len(factors) > 1
    _title(train, seeds, factors)
    for density in densities:
        for label, fields in ARMS.items():
            job = {"method": "prune", "dataset": ref, "density": density, **fields}
            per_seed = [
                _runs(job, _data(ref, data_dirs, seed, tuning), seed, factors) for seed in seeds
            ]
            _print_arm(density, label, per_seed, factors)
