"""Is the finished model of any method useful? A sanity check every method runs last.

A model that predicts one class for every test input, or scores no better than always
answering the most frequent class while its loss is finite, has learned nothing usable.
Such a job must not end as a plain success: the check returns `RunWarning`s that the
service records on the job (an event each, and the job's `warnings`), plus two metrics
that make the collapse visible in `metrics.json`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from archsearch.core.context import RunWarning
from archsearch.core.data.inputs import Rows
from archsearch.core.data.loaders import Dataset
from archsearch.core.evaluation import EVAL_BATCH

# Accuracy within this margin of the best constant answer counts as chance level. A margin,
# because a model that beats "always the majority class" by a hair has still learned nothing.
CHANCE_MARGIN = 0.02
# Nearly collapsed: one class takes this share of the predictions while the labels give it
# at most half of the inputs (e.g. 94% of predictions in one class of ten, accuracy 0.16).
DOMINANT_SHARE = 0.9


@torch.no_grad()
def predicted_class_counts(
    model: nn.Module, x: Rows, device: torch.device, batch_size: int = EVAL_BATCH
) -> torch.Tensor:
    """How many test inputs the model assigns to each class (argmax of its logits)."""
    was_training = model.training
    model.eval()
    predictions = [
        model(x[s : s + batch_size].to(device)).argmax(1).cpu()
        for s in range(0, len(x), batch_size)
    ]
    model.train(was_training)
    return torch.bincount(torch.cat(predictions), minlength=1)


def chance_accuracy(y: torch.Tensor) -> float:
    """The accuracy of always answering the most frequent class."""
    return torch.bincount(y).max().item() / max(1, len(y))


def prediction_check(
    model: nn.Module,
    data: Dataset,
    device: torch.device,
    test_accuracy: float,
    test_loss: float,
    counts: torch.Tensor | None = None,
) -> tuple[dict[str, float], list[RunWarning]]:
    """Metrics `predicted_classes` and `majority_prediction_share`, and the warnings.

    `counts`: the predicted-class counts on the test split when the caller's final
    evaluation already computed them (`evaluation.evaluate_predictions`, `FitResult`); the
    test split is then not run through the model a second time.
    """
    if counts is None:
        counts = predicted_class_counts(model, data.x_test, device)
    predicted_classes = int((counts > 0).sum().item())
    majority_share = counts.max().item() / max(1, int(counts.sum().item()))
    metrics = {
        "predicted_classes": float(predicted_classes),
        "majority_prediction_share": majority_share,
    }
    warnings = []
    dominant = int(counts.argmax().item())
    if predicted_classes <= 1:
        warnings.append(_collapsed(dominant, data.num_classes))
    elif math.isfinite(test_loss) and test_accuracy <= chance_accuracy(data.y_test) + CHANCE_MARGIN:
        warnings.append(_at_chance(test_accuracy, chance_accuracy(data.y_test)))
    elif majority_share >= DOMINANT_SHARE and _label_share(data.y_test, dominant) <= 0.5:
        warnings.append(_dominated(dominant, majority_share, test_accuracy))
    return metrics, warnings


def _label_share(y: torch.Tensor, label: int) -> float:
    return (y == label).float().mean().item() if len(y) else 0.0


def _collapsed(only_class: int, num_classes: int) -> RunWarning:
    return RunWarning(
        code="collapsed_predictions",
        message=(
            f"the model predicts class {only_class} for every test input ({num_classes} classes): "
            "it learned nothing usable; try a lower learning rate, more epochs, a higher density, "
            "or the method's documented defaults"
        ),
    )


def _dominated(label: int, share: float, accuracy: float) -> RunWarning:
    return RunWarning(
        code="dominant_class",
        message=(
            f"the model predicts class {label} for {share:.0%} of the test inputs (accuracy "
            f"{accuracy:.3f}): it has nearly collapsed; try a lower learning rate, more epochs, "
            "a higher density, or the method's documented defaults"
        ),
    )


def _at_chance(accuracy: float, chance: float) -> RunWarning:
    return RunWarning(
        code="chance_accuracy",
        message=(
            f"test accuracy {accuracy:.3f} is at chance level (always answering the most frequent "
            f"class scores {chance:.3f}): try a lower learning rate, more epochs, a higher "
            "density, or the method's documented defaults"
        ),
    )
