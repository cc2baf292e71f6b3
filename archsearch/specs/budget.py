"""Training budgets in optimiser steps: what a job will spend, and a spec fitted to a budget.

Issue 12 ("Equal budget is measured, not assumed"): a study compares methods that train in
different phases, so each method's steps are counted over all of them:

- train, search (dnw and every one-phase baseline): `training.epochs` epochs;
- search `lottery_one_shot` / `fine_tune`: `search.dense_epochs` dense epochs (default
  `training.epochs`), then `training.epochs` sparse epochs (the baseline's retraining);
- prune: `training.epochs` of mask training, `finetune_epochs` of bin -> real fine-tuning,
  and for each IMP / magnitude baseline its rounds of `training.epochs` epochs each
  (random and reshuffle baselines train nothing);
- transfer: `steps` (rounded to whole epochs of the repeated few-shot set, as the method
  does) or `training.epochs` epochs when `steps` is null;
- grow: `training.epochs` epochs, growth included: growth steps take no optimiser step and
  their statistics batches are reported apart (`statistics_batches`), not charged to the
  budget. Its optional from-scratch baseline trains for the grown net's *wall clock*, so its
  steps cannot be planned: a step budget needs `growth.baseline: false`;
- compare_spectra trains nothing.

One step is one optimiser update of one batch; an epoch is ceil(n_train / batch_size) steps.
Pure Python and pydantic (no torch): the API plans studies without importing the engine.
The engine's count (`core.budget`) must equal `planned_steps`; `tests/core/test_budget.py`
checks it for every method.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from archsearch.specs.common import DatasetRef
from archsearch.specs.train import JobBase

BUDGET_UNITS = ("steps", "epochs")

# Test-split evaluations (history rows) of a step-budgeted transfer run.
TRANSFER_EVALUATIONS = 10
# IMP removes this fraction of the remaining weights a round; magnitude is one round of 1.0.
IMP_PRUNE_FRACTION = 0.2
# Search strategies with a dense phase before the sparse one (= core.search.strategies).
DENSE_FIRST = ("lottery_one_shot", "fine_tune")


def steps_for_epochs(epochs: float, n_train: int, batch_size: int) -> int:
    """Optimiser steps of `epochs` passes over `n_train` samples (a partial epoch rounds down)."""
    return math.floor(epochs * math.ceil(n_train / batch_size) + 1e-9)


def train_size(dataset: DatasetRef, n_train: int, num_classes: int | None = None) -> int:
    """Samples a job trains on: its `train_subset` / `samples_per_class` of `n_train`."""
    n = n_train
    if dataset.samples_per_class is not None:
        if num_classes is None:
            raise ValueError(
                "dataset.samples_per_class: the number of classes is needed to plan its steps"
            )
        n = min(n, dataset.samples_per_class * num_classes)
    if dataset.train_subset is not None:
        n = min(n, dataset.train_subset)
    return n


def imp_schedule(densities: Sequence[float], prune_fraction: float) -> list[float]:
    """Densities IMP visits, one training round each: remove `prune_fraction` of what
    remains, landing on each target (the engine's `iterative_magnitude_pruning` uses this)."""
    steps, current = [], 1.0
    for target in sorted(densities, reverse=True):
        while current > target + 1e-12:
            current = max(current * (1.0 - prune_fraction), target)
            steps.append(current)
    return steps


def transfer_schedule(n: int, batch_size: int, steps: int) -> tuple[int, int]:
    """(repeat, epochs) with which `transfer` runs about `steps` steps on `n` samples: the
    set is tiled `repeat` times per epoch so that there are about TRANSFER_EVALUATIONS epochs."""
    repeat = max(1, round(steps * batch_size / (TRANSFER_EVALUATIONS * n)))
    epochs = max(1, round(steps / math.ceil(n * repeat / batch_size)))
    return repeat, epochs


def _per_epoch(spec: JobBase, n: int) -> int:
    return math.ceil(n / spec.training.batch_size)


def _prune_rounds(spec: Any) -> int:
    """Mask training plus the IMP / magnitude baselines' rounds, each `training.epochs` long."""
    rounds = 1
    if "imp" in spec.baselines:
        rounds += len(imp_schedule([spec.density], IMP_PRUNE_FRACTION))
    if "magnitude" in spec.baselines:
        rounds += len(imp_schedule([spec.density], 1.0))
    return rounds


def _planned_epochs(spec: Any) -> int:
    """Epochs of every phase, for the methods whose phases are whole epochs of the data."""
    epochs = int(spec.training.epochs)
    if spec.method == "prune":
        return epochs * _prune_rounds(spec) + int(spec.finetune_epochs)
    if spec.method == "search" and spec.search.strategy in DENSE_FIRST:
        return epochs + int(spec.search.dense_epochs or epochs)
    if spec.method == "grow" and spec.growth.baseline:
        raise ValueError(
            "growth.baseline: the from-scratch baseline trains for the grown network's wall "
            "clock, so its steps cannot be planned; set it to false for a step budget"
        )
    if spec.method == "compare_spectra":
        return 0
    return epochs


def planned_steps(spec: JobBase, n_train: int, num_classes: int | None = None) -> int:
    """Optimiser steps `spec` will take on a training split of `n_train` samples, every
    phase counted (the subset fields of `spec.dataset` are applied to `n_train`)."""
    n = train_size(spec.dataset, n_train, num_classes)
    transfer_steps = getattr(spec, "steps", None)
    if spec.method == "transfer" and transfer_steps is not None:
        repeat, epochs = transfer_schedule(n, spec.training.batch_size, transfer_steps)
        return epochs * _per_epoch(spec, n * repeat)
    return _planned_epochs(spec) * _per_epoch(spec, n)


def _updated(spec: JobBase, changes: dict[str, Any]) -> JobBase:
    """A validated copy of `spec` with `changes` ({"a.b": value}) applied (bounds checked)."""
    data = spec.model_dump()
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    return type(spec).model_validate(data)


def _too_small(budget: int, per_epoch: int, needed: str) -> ValueError:
    return ValueError(
        f"{needed}: a budget of {budget} steps is less than the mandatory phases need "
        f"(one epoch is {per_epoch} steps at this training.batch_size)"
    )


def _split(epochs: int, rounds: int, main: int, second: int) -> tuple[int, int]:
    """Epochs (main, second) with main * rounds + second <= epochs, keeping second / main
    as in the spec (second > 0 gets at least one epoch); the rest of the budget goes to
    `second`. (0, 0) when even one epoch of each does not fit."""
    if second == 0:
        return epochs // rounds, 0
    new_main = max(1, math.floor(epochs * main / (main * rounds + second)))
    new_second = epochs - new_main * rounds
    return (new_main, new_second) if new_second >= 1 else (0, 0)


def _fit_prune(spec: Any, epochs: int) -> dict[str, Any]:
    rounds = _prune_rounds(spec)
    main, finetune = _split(epochs, rounds, spec.training.epochs, spec.finetune_epochs)
    return {"training.epochs": main, "finetune_epochs": finetune}


def _fit_search(spec: Any, epochs: int) -> dict[str, Any]:
    if spec.search.strategy not in DENSE_FIRST:
        return {"training.epochs": epochs}
    dense = spec.search.dense_epochs or spec.training.epochs
    sparse, dense = _split(epochs, 1, spec.training.epochs, dense)
    return {"training.epochs": sparse, "search.dense_epochs": dense or None}


def _fit_grow(spec: Any, epochs: int) -> dict[str, Any]:
    # The timed baseline cannot be planned in steps (see the module docstring); a study
    # compares against its own dense `train` arms instead.
    return {"training.epochs": epochs, "growth.baseline": False}


def _fit_epochs(spec: Any, epochs: int) -> dict[str, Any]:
    return {"training.epochs": epochs}


EpochFitter = Callable[[Any, int], dict[str, Any]]
_FITTERS: dict[str, EpochFitter] = {
    "prune": _fit_prune,
    "search": _fit_search,
    "grow": _fit_grow,
}
_FIELD_NEEDED = {
    "prune": "training.epochs / finetune_epochs",
    "search": "training.epochs / search.dense_epochs",
}


def _fit_transfer_steps(spec: JobBase, budget: int, n: int) -> JobBase:
    # Rounding to whole epochs can overshoot `steps`: take the largest that does not.
    for steps in range(min(budget, 1_000_000), 0, -1):
        repeat, epochs = transfer_schedule(n, spec.training.batch_size, steps)
        if epochs * _per_epoch(spec, n * repeat) <= budget:
            return _updated(spec, {"steps": steps})
    raise ValueError(f"steps: a budget of {budget} steps is too small to plan a transfer run")


def fit_to_budget(
    spec: JobBase, budget_steps: int, n_train: int, num_classes: int | None = None
) -> JobBase:
    """A copy of `spec` whose epoch / step knobs make `planned_steps` as close to
    `budget_steps` as whole epochs allow, never above it. Raises ValueError naming the
    field when the budget cannot hold one epoch of every mandatory phase."""
    if budget_steps < 0:
        raise ValueError(f"budget: {budget_steps} steps; give a non-negative number")
    n = train_size(spec.dataset, n_train, num_classes)
    if spec.method == "compare_spectra":
        return spec
    if spec.method == "transfer" and getattr(spec, "steps", None) is not None:
        return _fit_transfer_steps(spec, budget_steps, n)
    per_epoch = _per_epoch(spec, n)
    epochs = budget_steps // per_epoch
    changes = _FITTERS.get(spec.method, _fit_epochs)(spec, epochs)
    if changes["training.epochs"] < 1:
        needed = _FIELD_NEEDED.get(spec.method, "training.epochs")
        raise _too_small(budget_steps, per_epoch, needed)
    fitted = _updated(spec, changes)
    assert planned_steps(fitted, n_train, num_classes) <= budget_steps, "fitted over budget"
    return fitted
