"""Time-matched training of a fixed architecture: the baselines of Figures 5, 6 and 10 of
"Spotting expressivity bottlenecks and fixing them optimally" (a fixed network trained for
the same wall clock as the growing one).
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.budget import count_training_samples
from archsearch.core.data.loaders import Dataset
from archsearch.core.evaluation import evaluate
from archsearch.core.training import ensure_finite, epoch_batches, make_optimizer
from archsearch.specs.common import TrainingSpec


def train_for_seconds(
    model: nn.Module,
    data: Dataset,
    spec: TrainingSpec,
    seconds: float,
    device: torch.device,
    evaluations: int = 10,
) -> list[dict[str, float]]:
    """Train for `seconds` of wall clock (cosine decay over that time when the schedule is
    cosine); evaluate on the test split about `evaluations` times. Returns the curve."""
    model.to(device).train()
    optimizer = make_optimizer(model.parameters(), spec.optimizer)
    curve: list[dict[str, float]] = []
    start, step, epoch, next_eval = time.perf_counter(), 0, 0, seconds / evaluations
    while True:
        for index in epoch_batches(len(data.x_train), spec.batch_size, spec.seed, epoch):
            elapsed = time.perf_counter() - start
            if elapsed >= next_eval or elapsed >= seconds:
                _, acc = evaluate(model, data.x_test, data.y_test, device)
                curve.append({"seconds": elapsed, "step": float(step), "test_accuracy": acc})
                next_eval += seconds / evaluations
                if elapsed >= seconds:
                    return curve
            progress = min(1.0, elapsed / seconds)
            factor = (
                0.5 * (1 + math.cos(math.pi * progress)) if spec.schedule.name == "cosine" else 1.0
            )
            for group in optimizer.param_groups:
                group["lr"] = spec.optimizer.lr * factor
            xb, yb = data.x_train[index].to(device), data.y_train[index].to(device)
            loss = F.cross_entropy(model(xb), yb)
            ensure_finite(loss, step)
            optimizer.zero_grad()
            torch.autograd.backward(loss)
            optimizer.step()
            count_training_samples(len(index))
            step += 1
        epoch += 1
