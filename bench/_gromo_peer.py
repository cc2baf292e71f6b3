"""GroMo (`gromo==0.1.0`, the library of "Growing Tiny Networks: Spotting Expressivity
Bottlenecks and Fixing Them Optimally") driven the way its own tutorial drives it, for the
peer rows of `bench/grow.py`.

How this follows the authors' intent, step by step against the repository's tutorial
`examples/plot_growing_container_tutorial.py` (github.com/growingnet/gromo) and the
installed package's docstrings:
- the model is their `GrowingMLP` from hidden widths [1, 1] (`number_hidden_layers=2`) with
  our activation, SELU (the default of both);
- the network trains between growths: the tutorial trains 3 epochs of 10 batches, i.e. 30
  optimiser steps, before each growth; we train `INTERVAL` = 30 steps too, and growth ends
  by `GROWTH_SHARE` of the budget so the final widths train (as in our job);
- one growth is the tutorial's `grow`: `set_growing_layers`, their `compute_statistics`
  (loss with reduction="sum", as its docstring requires) over a statistics sample (ours:
  up to `stat_batch_max` training samples), `compute_optimal_updates` with
  `maximum_added_neurons` (the neuron cap its docstring offers; we pass our per-step cap),
  then the layer: `select_best_update` (GroMo's own choice, by first-order improvement) or
  `set_growing_layers(index=...)` + `dummy_select_update` in turn (the tutorial's
  round-robin), then the tutorial's line search of the scaling factor over
  [0, 0.1, 0.5, 1.0] on the extended forward, then `apply_change`;
- a factor of 0 "means no growth" (the tutorial's words): the proposal is deleted, never
  applied as zero-weight neurons, which would be dead (no gradient reaches them);
- the optimiser: the tutorial makes a new (stateless) SGD after each growth; we keep our
  Adam and carry its moments over to the grown tensors (zeros for new rows and columns,
  `carry_optimizer_state`, as our own grow loop does), so Adam does not restart each time.
Same data, batches (order by seed and epoch), optimiser, learning rate, schedule after the
last growth (constant before) and number of optimiser steps as our job. A third variant
grows at our job's frequency instead of the tutorial's, to show what the schedule does.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from archsearch.core.data.loaders import Dataset
from archsearch.core.evaluation import evaluate
from archsearch.core.nn.growable import carry_optimizer_state
from archsearch.core.training import epoch_batches, lr_factor, steps_per_epoch
from archsearch.specs import GrowJob

CPU = torch.device("cpu")
INTERVAL = 30  # optimiser steps between growths: the tutorial's 3 epochs x 10 batches
GROWTH_SHARE = 0.8  # growth ends by this share of the budget, leaving the rest to train
FACTORS = (0.0, 0.1, 0.5, 1.0)  # the tutorial's line search of the scaling factor


@dataclass
class PeerRun:
    accuracy: float
    parameters: int
    seconds: float
    widths: list[int]
    grown: int  # growths applied (a factor of 0 applies nothing)
    events: int  # growths attempted
    max_loss: float  # highest training-batch loss after the first growth


def run_gromo(data: Dataset, spec: GrowJob, choice: str, interval: int = INTERVAL) -> PeerRun:
    """GroMo's GrowingMLP trained and grown under our budget; `choice` "best" or "round",
    a growth every `interval` optimiser steps."""
    from gromo.containers.growing_mlp import GrowingMLP

    tr = spec.training
    torch.manual_seed(tr.seed)
    act = torch.nn.SELU() if spec.growth.activation == "selu" else torch.nn.Tanh()
    model = GrowingMLP(list(data.input_shape), data.num_classes, 1, 2, activation=act, device=CPU)
    per_epoch = steps_per_epoch(len(data.x_train), tr.batch_size)
    total = tr.epochs * per_epoch
    events = min(2 * spec.growth.max_growth_steps, int(GROWTH_SHARE * total) // interval)
    optimizer = torch.optim.Adam(model.parameters(), lr=tr.optimizer.lr)
    started, grown, max_loss = time.process_time(), 0, 0.0
    stop_at = interval * events
    order: list[torch.Tensor] = []
    for step in range(total):
        if 0 < step <= stop_at and step % interval == 0:
            event = step // interval - 1
            old = list(model.parameters())
            grown += _grow(model, data, spec, event, choice)
            optimizer = _carried(optimizer, old, model, tr.optimizer.lr)
        _set_lr(optimizer, spec, step, stop_at, total, per_epoch)
        if step % per_epoch == 0:
            order = list(
                epoch_batches(len(data.x_train), tr.batch_size, tr.seed, step // per_epoch)
            )
        index = order[step % per_epoch]
        loss = F.cross_entropy(model(data.x_train[index]), data.y_train[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        max_loss = max(max_loss, loss.item()) if step > interval else max_loss
    seconds = time.process_time() - started
    widths = [layer.in_features for layer in model.layers[1:]]
    _, accuracy = evaluate(model, data.x_test, data.y_test, CPU)
    params = sum(p.numel() for p in model.parameters())
    return PeerRun(accuracy, params, seconds, widths, grown, events, max_loss)


def _set_lr(
    optimizer: torch.optim.Optimizer,
    spec: GrowJob,
    step: int,
    stop_at: int,
    total: int,
    per_epoch: int,
) -> None:
    """As our grow loop: constant while growing, the spec's schedule over the rest."""
    factor = 1.0
    if step >= stop_at:
        left_epochs = max(1, math.ceil((total - stop_at) / per_epoch))
        factor = lr_factor(spec.training.schedule, left_epochs, per_epoch)(step - stop_at)
    for group in optimizer.param_groups:
        group["lr"] = spec.training.optimizer.lr * factor


def _carried(
    optimizer: torch.optim.Optimizer,
    old: list[torch.nn.Parameter],
    model: torch.nn.Module,
    lr: float,
) -> torch.optim.Optimizer:
    """A new Adam over the grown tensors with the old moments carried over."""
    new_params = list(model.parameters())
    new = torch.optim.Adam(new_params, lr=lr)
    carry_optimizer_state(optimizer, old, new, new_params)
    return new


def _grow(model, data: Dataset, spec: GrowJob, event: int, choice: str) -> int:  # type: ignore[no-untyped-def]
    """One growth as the tutorial's `grow`; 1 if neurons were added, 0 if the factor was 0."""
    from gromo.utils.training_utils import compute_statistics

    generator = torch.Generator().manual_seed(spec.training.seed * 7919 + event)
    size = min(spec.growth.stat_batch_max, len(data.x_train))
    index = torch.randperm(len(data.x_train), generator=generator)[:size]
    batches = [
        (data.x_train[part], data.y_train[part]) for part in index.split(spec.training.batch_size)
    ]
    if choice == "round":
        model.set_growing_layers(index=event % len(model._growable_layers))
    else:
        model.set_growing_layers(scheduling_method="all")
    compute_statistics(model, batches, torch.nn.CrossEntropyLoss(reduction="sum"), device=CPU)
    model.compute_optimal_updates(maximum_added_neurons=spec.growth.max_neurons_per_step)
    model.reset_computation()
    if choice == "round":
        model.dummy_select_update()
    else:
        model.select_best_update()
    x, y = data.x_train[index], data.y_train[index]

    def cost(factor: float) -> float:
        model.set_scaling_factor(factor)
        with torch.no_grad():
            return F.cross_entropy(model.extended_forward(x), y).item()

    factor = min(FACTORS, key=cost)  # the tutorial's grid; ties keep the smaller factor
    model.train()
    if factor == 0:  # no decrease along the proposal: "a scaling factor of 0 means no growth"
        model.currently_updated_layer.delete_update()
        model.currently_updated_layer_index = None
        return 0
    model.set_scaling_factor(factor)
    model.apply_change()
    return 1
