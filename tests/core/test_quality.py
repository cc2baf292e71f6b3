"""The usefulness check every method runs last: collapse and chance level are flagged."""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core.data.loaders import load_dataset
from archsearch.core.quality import prediction_check
from archsearch.core.spec.common import DatasetRef


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
