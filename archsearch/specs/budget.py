"""Training budgets in optimiser steps: what a job will spend, and a spec fitted to a budget.

Equal budget is measured, not assumed: a study compares methods that train in different
phases, so each method's steps are counted over all of them. Each method's spec class says
how (`planned_epochs`, `epochs_fitted`, `budget_knobs`, and for transfer `steps_on`):

- train, search (dnw and every one-phase baseline): `training.epochs` epochs;
- search `lottery_one_shot` / `fine_tune`: `search.dense_epochs` dense epochs (default
  `training.epochs`), then `training.epochs` sparse epochs (the baseline's retraining);
- prune: `training.epochs` of mask training, `finetune_epochs` of bin -> real fine-tuning,
  and for each IMP / magnitude baseline its rounds of `training.epochs` epochs each
  (random and reshuffle baselines train nothing);
- transfer: `steps` (rounded to whole epochs of the repeated few-shot set, as the method
  does) or `training.epochs` epochs when `steps` is null;
- grow: `training.epochs` epochs, growth included: growth steps take no optimiser step, so
  their statistics batches are not charged in steps but on the second axis, samples seen
  (`samples_seen`, which a study shows against the budget in samples). Its optional
  from-scratch baseline trains for the grown net's *wall clock*, so its steps cannot be
  planned: a step budget needs `growth.baseline: false`;
- compare_spectra trains nothing.

One step is one optimiser update of one batch; an epoch is ceil(n_train / batch_size) steps.
Pure Python and pydantic (no torch): the API plans studies without importing the engine.
This module holds what every method shares: the arithmetic of epochs and steps, and the two
entry points, `planned_steps` and `fit_to_budget`.
The engine's count (`core.budget`) must equal `planned_steps`; `tests/core/test_budget.py`
checks it for every method.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, Self, TypeVar

from pydantic import BaseModel

from archsearch.specs.common import DatasetRef


class Budgeted(Protocol):
    """What the budget needs of a job spec (every `JobBase` is one; the spec classes import
    this module for its arithmetic, so it names none of them)."""

    @property
    def dataset(self) -> DatasetRef: ...

    def steps_on(self, n: int) -> int: ...

    def fitted_to_steps(self, budget: int, n: int) -> Self: ...


Spec = TypeVar("Spec", bound=Budgeted)
Model = TypeVar("Model", bound=BaseModel)

BUDGET_UNITS = ("steps", "epochs")

# Test-split evaluations (history rows) of a step-budgeted transfer run.
TRANSFER_EVALUATIONS = 10
# IMP removes this fraction of the remaining weights a round; magnitude is one round of 1.0.
IMP_PRUNE_FRACTION = 0.2
# Search strategies with a dense phase, then a fixed top-k (the engine runs them so too).
DENSE_FIRST = ("lottery_one_shot", "fine_tune")


def steps_for_epochs(epochs: float, n_train: int, batch_size: int) -> int:
    """Optimiser steps of `epochs` passes over `n_train` samples (a partial epoch rounds down)."""
    return math.floor(epochs * math.ceil(n_train / batch_size) + 1e-9)


def steps_per_epoch(n: int, batch_size: int) -> int:
    return math.ceil(n / batch_size)


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


def split_epochs(epochs: int, rounds: int, main: int, second: int) -> tuple[int, int]:
    """Epochs (main, second) with main * rounds + second <= epochs, keeping second / main
    as in the spec (second > 0 gets at least one epoch); the rest of the budget goes to
    `second`. (0, 0) when even one epoch of each does not fit."""
    if second == 0:
        return epochs // rounds, 0
    new_main = max(1, math.floor(epochs * main / (main * rounds + second)))
    new_second = epochs - new_main * rounds
    return (new_main, new_second) if new_second >= 1 else (0, 0)


def updated_spec(spec: Model, changes: dict[str, Any]) -> Model:
    """A validated copy of `spec` with `changes` ({"a.b": value}) applied (bounds checked)."""
    data = spec.model_dump()
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    return type(spec).model_validate(data)


def budget_too_small(budget: int, per_epoch: int, knobs: str) -> ValueError:
    return ValueError(
        f"{knobs}: a budget of {budget} steps is less than the mandatory phases need "
        f"(one epoch is {per_epoch} steps at this training.batch_size)"
    )


def planned_steps(spec: Budgeted, n_train: int, num_classes: int | None = None) -> int:
    """Optimiser steps `spec` will take on a training split of `n_train` samples, every
    phase counted (the subset fields of `spec.dataset` are applied to `n_train`)."""
    return spec.steps_on(train_size(spec.dataset, n_train, num_classes))


def fit_to_budget(
    spec: Spec, budget_steps: int, n_train: int, num_classes: int | None = None
) -> Spec:
    """A copy of `spec` whose epoch / step knobs make `planned_steps` as close to
    `budget_steps` as whole epochs allow, never above it. Raises ValueError naming the
    field when the budget cannot hold one epoch of every mandatory phase."""
    if budget_steps < 0:
        raise ValueError(f"budget: {budget_steps} steps; give a non-negative number")
    fitted = spec.fitted_to_steps(budget_steps, train_size(spec.dataset, n_train, num_classes))
    assert planned_steps(fitted, n_train, num_classes) <= budget_steps, "fitted over budget"
    return fitted
