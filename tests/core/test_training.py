"""The shared training loop: schedules, divergence, cancellation and exact resumption."""

from __future__ import annotations

import math
import pickle

import pytest
import torch
from torch import nn

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.errors import DivergedError, JobCancelled, TrialPruned, UnknownDatasetError
from archsearch.core.methods import train as train_method
from archsearch.core.models import Architecture, create_model
from archsearch.core.training import TrainHooks, fit, lr_factor, seed_everything
from archsearch.specs import (
    DatasetRef,
    MLPConfig,
    ScheduleSpec,
    TrainingSpec,
    TrainJob,
    parse_job_spec,
)


@pytest.fixture(scope="module")
def digits() -> Dataset:
    return load_dataset(DatasetRef(name="digits", train_subset=400), ())


def fresh_model(data: Dataset) -> nn.Module:
    seed_everything(0)
    # Dropout makes the run depend on the RNG state, which the checkpoint must restore.
    return create_model(Architecture(MLPConfig(hidden=(32,), dropout=0.2), data.input_shape, 10))


def test_cosine_schedule_with_warmup() -> None:
    factor = lr_factor(ScheduleSpec(name="cosine", warmup_epochs=1), epochs=5, steps_per_epoch=10)
    assert [factor(s) for s in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0])
    assert factor(10) == pytest.approx(1.0)
    assert factor(30) == pytest.approx(0.5 * (1 + math.cos(math.pi * 20 / 40)))
    assert factor(49) == pytest.approx(0.5 * (1 + math.cos(math.pi * 39 / 40)))
    step = lr_factor(
        ScheduleSpec(name="step", step_epochs=2, gamma=0.5), epochs=6, steps_per_epoch=3
    )
    assert [step(s) for s in (0, 5, 6, 12)] == [1.0, 1.0, 0.5, 0.25]


def test_resumed_run_reproduces_the_uninterrupted_one(digits: Dataset) -> None:
    spec = TrainingSpec(epochs=4, batch_size=64)
    reference = fit(fresh_model(digits), digits, spec, InMemoryContext())

    steps_per_epoch = math.ceil(400 / 64)
    interrupted = InMemoryContext(
        stop_after_reports=2 * (steps_per_epoch + 1) + 3
    )  # inside epoch 3
    with pytest.raises(JobCancelled):
        fit(fresh_model(digits), digits, spec, interrupted)
    saved = interrupted.load_checkpoint()
    assert saved is not None and saved["epoch"] == 2

    resumed_ctx = InMemoryContext(checkpoint=interrupted.checkpoint)
    resumed = fit(fresh_model(digits), digits, spec, resumed_ctx)
    assert [row["train_loss"] for row in resumed.history] == [
        row["train_loss"] for row in reference.history
    ]
    assert resumed.test_accuracy == reference.test_accuracy
    # The resumed run trained only the remaining epochs.
    assert resumed_ctx.reports[0][0] == 2 * steps_per_epoch + 1


def test_checkpoint_of_another_phase_is_ignored(digits: Dataset) -> None:
    ctx = InMemoryContext()
    fit(fresh_model(digits), digits, TrainingSpec(epochs=1), ctx, phase="dense")
    second = fit(fresh_model(digits), digits, TrainingSpec(epochs=1), ctx, phase="retrain")
    saved = ctx.load_checkpoint()
    assert len(second.history) == 1 and saved is not None and saved["phase"] == "retrain"


def test_divergence_raises_a_user_error_naming_the_fix(digits: Dataset) -> None:
    calls = 0

    def loss_turning_nan(model, x, y):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        loss = torch.nn.functional.cross_entropy(model(x), y)
        return loss * float("nan") if calls == 5 else loss

    with pytest.raises(DivergedError, match="optimizer.lr") as caught:
        fit(
            fresh_model(digits),
            digits,
            TrainingSpec(epochs=3),
            InMemoryContext(),
            hooks=TrainHooks(loss=loss_turning_nan),
        )
    assert caught.value.step == 4


def test_errors_with_their_own_arguments_cross_a_process_boundary() -> None:
    # A process pool pickles an exception back to its parent: it must come back whole.
    for error in (
        DivergedError(4, float("inf")),
        UnknownDatasetError("nope", ["digits"]),
        TrialPruned(2, {"val_accuracy": 0.5}),
    ):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert vars(again) == vars(error)


def test_training_learns_digits(digits: Dataset) -> None:
    outcome = fit(
        fresh_model(digits), digits, TrainingSpec(epochs=20, batch_size=32), InMemoryContext()
    )
    assert outcome.test_accuracy > 0.85
    assert outcome.history[-1]["train_loss"] < outcome.history[0]["train_loss"]


def _train_job(optimizer: dict[str, object]) -> TrainJob:
    spec = parse_job_spec(
        {
            "method": "train",
            "dataset": {"name": "digits"},
            "training": {"epochs": 2, "optimizer": optimizer},
        }
    )
    assert isinstance(spec, TrainJob)
    return spec


@pytest.mark.parametrize(
    ("optimizer", "collapsed"),
    [({"name": "sgd", "lr": 5.0, "momentum": 0.0}, True), ({"name": "adam"}, False)],
)
def test_train_method_flags_a_collapsed_model(
    optimizer: dict[str, object], collapsed: bool
) -> None:
    # An absurd learning rate kills every ReLU: one class for every input, finite loss.
    spec = _train_job(optimizer)
    result = train_method.run(spec, load_dataset(spec.dataset, ()), InMemoryContext())
    codes = [warning.code for warning in result.warnings]
    assert codes == (["collapsed_predictions"] if collapsed else [])
    assert (result.metrics["predicted_classes"] == 1.0) == collapsed
    assert (result.metrics["test_accuracy"] > 0.5) != collapsed
