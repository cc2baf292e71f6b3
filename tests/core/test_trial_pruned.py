"""A study trial stopped by its pruner: the training loop asks the run context after every
epoch (after the epoch's checkpoint) with the epoch's validation accuracy, stops there with
`TrialPruned`, and the `train` method keeps the model it reached and what the run really
spent. A run with no validation split is never asked: no trial is stopped on its test split."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import hold_out_validation, load_dataset
from archsearch.core.errors import TrialPruned
from archsearch.core.methods import get_method
from archsearch.core.training import steps_per_epoch
from archsearch.specs import parse_job_spec


def train_spec(epochs: int) -> dict[str, object]:
    return {
        "method": "train",
        "dataset": {"name": "digits", "train_subset": 400},
        "model": {"name": "mlp", "hidden": [16]},
        "training": {"epochs": epochs, "batch_size": 100},
    }


def test_a_pruned_train_run_stops_at_the_epoch_and_keeps_model_and_spend() -> None:
    spec = parse_job_spec(train_spec(epochs=6))
    data = hold_out_validation(load_dataset(spec.dataset, ()), 0.1)
    asked: list[tuple[int, float]] = []

    class Asking(InMemoryContext):
        def should_prune(self, epoch: int, value: float) -> bool:
            asked.append((epoch, value))
            return epoch >= 2

    ctx = Asking()
    with pytest.raises(TrialPruned) as caught:
        get_method("train")(spec, data, ctx)

    per_epoch = steps_per_epoch(len(data.x_train), 100)
    assert [epoch for epoch, _ in asked] == [1, 2]  # asked after each epoch, stopped at 2
    assert all(0.0 <= value <= 1.0 for _, value in asked)
    metrics = caught.value.metrics
    assert metrics["optimizer_steps"] == 2 * per_epoch  # what it spent, not the planned 6
    assert metrics["samples_seen"] == 2 * len(data.x_train)
    assert metrics["val_accuracy"] == asked[-1][1] and metrics["parameters"] > 0
    assert 0.0 <= metrics["test_accuracy"] <= 1.0  # measured, but not what the pruner read
    assert ctx.reports[-1][0] == 2 * per_epoch  # progress stopped where the run did
    weights = load(ctx.artifacts["model.safetensors"])
    assert weights and "architecture.json" in ctx.artifacts
    assert ctx.load_checkpoint() is not None and ctx.load_checkpoint()["epoch"] == 2


def test_a_run_nobody_prunes_trains_every_epoch() -> None:
    spec = parse_job_spec(train_spec(epochs=2))
    data = load_dataset(spec.dataset, ())
    result = get_method("train")(spec, data, InMemoryContext(prune_after_epochs=None))
    assert len(result.history) == 2


def test_a_run_without_validation_rows_is_never_asked() -> None:
    spec = parse_job_spec(train_spec(epochs=2))
    data = load_dataset(spec.dataset, ())
    result = get_method("train")(spec, data, InMemoryContext(prune_after_epochs=1))
    assert len(result.history) == 2 and "val_accuracy" not in result.history[-1]


def test_the_validation_rows_are_held_apart_and_the_same_for_every_job() -> None:
    data = load_dataset(parse_job_spec(train_spec(epochs=1)).dataset, ())
    first, second = hold_out_validation(data, 0.1), hold_out_validation(data, 0.1)
    assert first.y_val is not None and second.y_val is not None and first.x_val is not None
    assert len(first.y_val) == 40 and len(first.y_train) == 360
    assert torch.equal(first.y_val, second.y_val)
    train_rows = {tuple(row.flatten().tolist()) for row in first.x_train[:]}
    assert not any(tuple(row.flatten().tolist()) in train_rows for row in first.x_val[:])
    assert len(first.x_test) == len(data.x_test)  # the test split is untouched
