"""The resumable growth loop ("Spotting expressivity bottlenecks and fixing them optimally",
section 4): train with the spec's optimiser, grow every interval, then train the final
widths with the spec's schedule. `core.growth.schedule` holds the rules it applies.

Growing changes parameter shapes, so the shared `fit` loop (one optimiser per phase,
checkpoints per epoch) cannot interleave growth every few steps; this loop reuses its parts
(`epoch_batches`, `make_optimizer`, `lr_factor`, `ensure_finite`, `check_stop`,
`evaluate_predictions`) and checkpoints after every growth step and every epoch: widths,
weights, optimiser moments (carried over to the widened tensors), growth log, RNG.
"""

from __future__ import annotations

import math
import time
from dataclasses import fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core import runlog
from archsearch.core.budget import count_training_samples
from archsearch.core.context import RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.growth.schedule import (
    Evaluation,
    GrowState,
    architecture_for,
    evaluation_row,
    growth_due,
    growth_step,
    hidden_widths,
    stop_reason,
)
from archsearch.core.models import create_model
from archsearch.core.nn.growable import carry_optimizer_state
from archsearch.core.optimizers import FunctionalOptimizer
from archsearch.core.precision import autocast
from archsearch.core.training import (
    StepMeans,
    check_stop,
    ensure_finite,
    epoch_batches,
    lr_factor,
    make_optimizer,
    steps_per_epoch,
)
from archsearch.specs.grow import GrowJob

CHECKPOINT_PHASE = "grow"


def _checkpoint(
    ctx: RunContext, model: nn.Module, optimizer: FunctionalOptimizer, state: GrowState
) -> None:
    ctx.save_checkpoint(
        {
            "phase": CHECKPOINT_PHASE,
            "widths": hidden_widths(model),
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            # Shallow: the context serialises at once; `asdict` deep-copied the whole log each time.
            "state": {f.name: getattr(state, f.name) for f in fields(state)},
            "rng": torch.get_rng_state(),
        }
    )


def _restore(
    ctx: RunContext,
    spec: GrowJob,
    data: Dataset,
    model: nn.Module,
) -> tuple[nn.Module, FunctionalOptimizer, GrowState]:
    saved: dict[str, Any] | None = ctx.load_checkpoint()
    if saved is None or saved.get("phase") != CHECKPOINT_PHASE:
        return model, make_optimizer(model.parameters(), spec.training.optimizer), GrowState()
    # A redelivered job: rebuild the grown widths, then load weights and optimiser moments.
    arch = architecture_for(list(saved["widths"]), spec, data)
    model = create_model(arch).to(ctx.device)
    model.load_state_dict(saved["model"])
    optimizer = make_optimizer(model.parameters(), spec.training.optimizer)
    optimizer.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["rng"])
    return model, optimizer, GrowState(**saved["state"])


class _Batches:
    """Training batches by global step; the order depends only on (seed, epoch)."""

    def __init__(self, n: int, batch_size: int, seed: int) -> None:
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.per_epoch = steps_per_epoch(n, batch_size)
        self._epoch: int = -1
        self._order: list[torch.Tensor] = []

    def at(self, step: int) -> torch.Tensor:
        epoch = step // self.per_epoch
        if epoch != self._epoch:
            self._epoch, self._order = (
                epoch,
                list(epoch_batches(self.n, self.batch_size, self.seed, epoch)),
            )
        return self._order[step % self.per_epoch]


def _set_lr(
    optimizer: FunctionalOptimizer, spec: GrowJob, state: GrowState, total: int, per_epoch: int
) -> None:
    """Constant rate while growing; the spec's schedule over the steps left after growth."""
    factor = 1.0
    if state.stopped_at is not None:
        left_epochs = max(1, math.ceil((total - state.stopped_at) / per_epoch))
        factor = lr_factor(spec.training.schedule, left_epochs, per_epoch)(
            state.step - state.stopped_at
        )
    for group in optimizer.param_groups:
        group["lr"] = spec.training.optimizer.lr * factor


def _grow(
    model: nn.Module,
    optimizer: FunctionalOptimizer,
    data: Dataset,
    spec: GrowJob,
    state: GrowState,
    ctx: RunContext,
    train_loss: float,
) -> FunctionalOptimizer:
    old_params = list(model.parameters())
    entry = growth_step(model, data, spec, state, ctx.device)
    state.growth_steps += 1
    state.last_growth_step = state.step
    row, _ = evaluation_row(model, data, state, ctx.device, train_loss)
    entry.update(
        seconds=state.seconds, parameters=row["parameters"], test_accuracy=row["test_accuracy"]
    )
    state.log.append(entry)
    state.history.append(row)
    _log_growth(entry, row)
    reason = stop_reason(model, spec, state, entry, row["test_accuracy"])
    if reason:
        state.stopped_at, state.stop_reason = state.step, reason
        runlog.phase_line(
            "growth stopped (%s) at step %d; training on with %d parameters",
            reason,
            state.step,
            int(row["parameters"]),
        )
    # New shapes need a new optimiser; the old moments carry over, zero for new neurons.
    new_optimizer = make_optimizer(model.parameters(), spec.training.optimizer)
    carry_optimizer_state(optimizer, old_params, new_optimizer, list(model.parameters()))
    return new_optimizer


def _log_growth(entry: dict[str, Any], row: dict[str, float]) -> None:
    """One line per growth step: neurons added per layer, and the first-order loss decrease
    the solver predicted against the one measured on the statistics batch."""
    layers = entry["layers"]
    runlog.phase_line(
        "growth step %d at step %d: added %s neurons (widths %s); loss decrease predicted "
        "%.4g, measured %.4g; test_accuracy %.4g",
        entry["growth_step"],
        entry["optimizer_step"],
        "+".join(str(layer["added"]) for layer in layers),
        ", ".join(str(w) for w in entry["widths"]),
        sum(layer["predicted_decrease"] for layer in layers),
        sum(layer["measured_decrease"] for layer in layers),
        row["test_accuracy"],
    )


def _verb(state: GrowState) -> str:
    return "resumes at" if state.step else "starts at"


def _train_step(
    model: nn.Module,
    optimizer: FunctionalOptimizer,
    xb: torch.Tensor,
    yb: torch.Tensor,
    spec: GrowJob,
    step: int,
) -> float:
    """One optimiser step on a batch; returns its loss."""
    with autocast(spec.training.precision, xb.device):
        loss = F.cross_entropy(model(xb), yb)
    ensure_finite(loss, step)
    optimizer.zero_grad()
    torch.autograd.backward(loss)
    if spec.training.max_grad_norm is not None:
        nn.utils.clip_grad_norm_(model.parameters(), spec.training.max_grad_norm)
    optimizer.step()
    return loss.item()


def run_growth(
    model: nn.Module, data: Dataset, spec: GrowJob, ctx: RunContext
) -> tuple[nn.Module, GrowState, Evaluation | None]:
    """Grow and train `model`; returns the final model, the growth state (log, history) and
    the final model's test evaluation (None when this attempt trained no step)."""
    model, optimizer, state = _restore(ctx, spec, data, model.to(ctx.device))
    batches = _Batches(len(data.x_train), spec.training.batch_size, spec.training.seed)
    total = spec.training.epochs * batches.per_epoch
    runlog.phase_line("phase grow %s step %d of %d", _verb(state), state.step + 1, total)
    clock, seconds_base = time.perf_counter(), state.seconds
    loss_sum, count = 0.0, 0
    means = StepMeans()
    final: Evaluation | None = None
    model.train()
    while state.step < total:
        check_stop(ctx)
        if growth_due(spec, state):
            optimizer = _grow(model, optimizer, data, spec, state, ctx, loss_sum / max(1, count))
            # The wall-clock interval counts training time after this growth step.
            state.seconds = state.seconds_at_growth = seconds_base + time.perf_counter() - clock
            _checkpoint(ctx, model, optimizer, state)
        _set_lr(optimizer, spec, state, total, batches.per_epoch)
        index = batches.at(state.step)
        xb, yb = data.x_train[index].to(ctx.device), data.y_train[index].to(ctx.device)
        value = _train_step(model, optimizer, xb, yb, spec, state.step)
        count_training_samples(len(index))
        state.step += 1
        state.seconds = seconds_base + time.perf_counter() - clock
        loss_sum, count = loss_sum + value, count + 1
        means.add({"train_loss": value})  # a mean per REPORT_EVERY steps, not a row each
        ctx.report(state.step, total, **means.due(last=state.step == total))
        if state.step % batches.per_epoch == 0 or state.step == total:
            row, final = evaluation_row(model, data, state, ctx.device, loss_sum / count)
            state.history.append(row)
            epoch = math.ceil(state.step / batches.per_epoch)
            runlog.epoch_line("grow", epoch, spec.training.epochs, row)
            loss_sum, count = 0.0, 0
            _checkpoint(ctx, model, optimizer, state)
    return model, state, final
