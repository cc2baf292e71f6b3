"""A study trial stopped by its pruner: the training loop asks the run context after every
epoch (after the epoch's checkpoint), stops there with `TrialPruned`, and the `train` method
keeps the model it reached and what the run really spent."""

from __future__ import annotations

import pytest
from safetensors.torch import load

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
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
    data = load_dataset(spec.dataset, ())
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
    assert metrics["test_accuracy"] == asked[-1][1] and metrics["parameters"] > 0
    assert ctx.reports[-1][0] == 2 * per_epoch  # progress stopped where the run did
    weights = load(ctx.artifacts["model.safetensors"])
    assert weights and "architecture.json" in ctx.artifacts
    assert ctx.load_checkpoint() is not None and ctx.load_checkpoint()["epoch"] == 2


def test_a_run_nobody_prunes_trains_every_epoch() -> None:
    spec = parse_job_spec(train_spec(epochs=2))
    data = load_dataset(spec.dataset, ())
    result = get_method("train")(spec, data, InMemoryContext(prune_after_epochs=None))
    assert len(result.history) == 2
