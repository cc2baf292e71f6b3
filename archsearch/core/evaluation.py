"""Test and validation passes: a model's mean cross-entropy and accuracy on held rows, in
eval mode and without gradients, in batches. Every method measures its models here, during
training (`training.fit`, each epoch) and at its end."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.data.inputs import Rows
from archsearch.core.data.loaders import Dataset

# Test passes run in batches of this many samples: at 2048, a neural graph's node states
# (about 50 MB a block) leave the CPU caches and a pass took twice as long; an MLP's time
# is the same at 512.
EVAL_BATCH = 512


def evaluate(
    model: nn.Module, x: Rows, y: torch.Tensor, device: torch.device, batch_size: int = EVAL_BATCH
) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of `model` on (x, y), in eval mode."""
    loss, accuracy, _ = evaluate_predictions(model, x, y, device, batch_size)
    return loss, accuracy


@torch.no_grad()
def evaluate_predictions(
    model: nn.Module, x: Rows, y: torch.Tensor, device: torch.device, batch_size: int = EVAL_BATCH
) -> tuple[float, float, torch.Tensor]:
    """`evaluate`, plus how many inputs the model assigns to each class (argmax counts), so
    the collapse check after training (`core.quality`) needs no second test pass."""
    was_training = model.training
    model.eval()
    loss_sum, correct, predicted = 0.0, 0, []
    for start in range(0, len(x), batch_size):
        xb, yb = x[start : start + batch_size].to(device), y[start : start + batch_size].to(device)
        logits = model(xb)
        loss_sum += F.cross_entropy(logits, yb, reduction="sum").item()
        predicted.append(logits.argmax(1))
        correct += (predicted[-1] == yb).sum().item()
    model.train(was_training)
    counts = torch.bincount(torch.cat(predicted).cpu()) if predicted else torch.zeros(1).long()
    return loss_sum / max(1, len(x)), correct / max(1, len(x)), counts


def validation_metrics(model: nn.Module, data: Dataset, device: torch.device) -> dict[str, float]:
    """`val_loss` and `val_accuracy` of `model` on the rows `data` holds apart (a study's
    trial: `data.loaders.hold_out_validation`); none when it holds none."""
    if data.x_val is None or data.y_val is None:
        return {}
    loss, accuracy = evaluate(model, data.x_val, data.y_val, device)
    return {"val_loss": loss, "val_accuracy": accuracy}
