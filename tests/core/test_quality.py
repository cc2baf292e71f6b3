"""The usefulness check every method runs last: collapse and chance level are flagged."""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.evaluation import evaluate, evaluate_predictions
from archsearch.core.quality import predicted_class_counts, prediction_check
from archsearch.core.training import fit
from archsearch.specs.common import DatasetRef, TrainingSpec


class Constant(nn.Module):
    """Always answers `label`, whatever the input."""

    def __init__(self, num_classes: int, label: int) -> None:
        super().__init__()
        self.logits = torch.zeros(num_classes)
        self.logits[label] = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(len(x), -1)


def test_a_constant_classifier_is_flagged_as_collapsed() -> None:
    data = load_dataset(DatasetRef(name="digits"), ())
    metrics, warnings = prediction_check(Constant(10, 3), data, torch.device("cpu"), 0.1, 2.2)
    assert metrics["predicted_classes"] == 1 and metrics["majority_prediction_share"] == 1.0
    assert [w.code for w in warnings] == ["collapsed_predictions"]
    assert "class 3" in warnings[0].message


def test_a_model_that_learned_passes_the_check() -> None:
    data = load_dataset(DatasetRef(name="digits"), ())
    torch.manual_seed(0)
    model = nn.Linear(data.x_train[0].numel(), 10)
    flat = nn.Sequential(nn.Flatten(), model)
    optimizer = torch.optim.Adam(flat.parameters(), lr=0.05)
    for _ in range(100):
        optimizer.zero_grad()
        nn.functional.cross_entropy(flat(data.x_train), data.y_train).backward()
        optimizer.step()
    accuracy = (flat(data.x_test).argmax(1) == data.y_test).float().mean().item()
    metrics, warnings = prediction_check(flat, data, torch.device("cpu"), accuracy, 0.3)
    assert accuracy > 0.9 and warnings == [] and metrics["predicted_classes"] == 10


def test_a_random_guesser_at_chance_level_is_flagged() -> None:
    data = load_dataset(DatasetRef(name="digits"), ())
    torch.manual_seed(0)
    guesser = nn.Sequential(nn.Flatten(), nn.Linear(data.x_train[0].numel(), 10))
    _, warnings = prediction_check(guesser, data, torch.device("cpu"), 0.09, 2.4)
    assert [w.code for w in warnings] == ["chance_accuracy"]


class MostlyOne(nn.Module):
    """Answers `label` except for the first `exceptions` inputs of a batch, which it gets
    right: nearly collapsed, yet above chance."""

    def __init__(self, labels: torch.Tensor, label: int, exceptions: int) -> None:
        super().__init__()
        self.labels, self.label, self.exceptions = labels, label, exceptions

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        answers = torch.full((len(x),), self.label)
        answers[: self.exceptions] = self.labels[: self.exceptions]
        return nn.functional.one_hot(answers, 10).float()


def test_a_nearly_collapsed_model_is_flagged() -> None:
    data = load_dataset(DatasetRef(name="digits"), ())
    model = MostlyOne(data.y_test, label=3, exceptions=len(data.y_test) // 20)
    accuracy = (model(data.x_test).argmax(1) == data.y_test).float().mean().item()
    metrics, warnings = prediction_check(model, data, torch.device("cpu"), accuracy, 2.0)
    assert accuracy > 0.12 and metrics["majority_prediction_share"] >= 0.9
    assert [w.code for w in warnings] == ["dominant_class"]


def test_the_final_evaluation_counts_replace_a_second_test_pass() -> None:
    """The counts `evaluate_predictions` returns are those the check would compute,
    a train job hands them over, and a check given them does not run the model again."""
    data = load_dataset(DatasetRef(name="digits"), ())
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(data.x_train[0].numel(), 10))
    ctx = InMemoryContext()
    outcome = fit(model, data, TrainingSpec(epochs=2, batch_size=64), ctx)
    cpu = torch.device("cpu")
    assert outcome.predicted_counts is not None
    reference = predicted_class_counts(model, data.x_test, cpu, batch_size=100)
    assert torch.equal(outcome.predicted_counts, reference)
    loss, accuracy, counts = evaluate_predictions(model, data.x_test, data.y_test, cpu)
    assert (loss, accuracy) == evaluate(model, data.x_test, data.y_test, cpu)
    assert torch.equal(counts, reference) and int(counts.sum()) == len(data.x_test)

    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    given = prediction_check(model, data, cpu, accuracy, loss, counts)
    assert calls == [], "no second pass over the test split"
    assert given == prediction_check(model, data, cpu, accuracy, loss)
    assert calls, "without counts the check runs the model itself"
