"""The growth schedule's rules: when to grow, on how many samples, and when to stop.

"Spotting expressivity bottlenecks and fixing them optimally", section 4 and appendix C: all
hidden layers are grown in turn every interval of training (steps, or seconds as in the
paper); the statistics batch grows as n_l = base * ceil(sqrt(max(fan-in of layer l, width of
layer l + 1))) (section 3.4: the estimator's variance grows with that dimension); growth
stops at a target accuracy, a parameter budget, `max_growth_steps`, or once no layer has a
lambda_1^2 above `lambda_stop`. The parameter budget is checked before each layer grows (a
layer adds at most the neurons that still fit), so `max_parameters` is never exceeded. The
loop that applies them is `core.growth.loop`.
A CNN (`growth.family = "cnn"`) grows every layer of its conv chain (`core.growth.cnn_step`):
the convolutions' channels and the head's hidden widths, in that order in `hidden_widths`.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch
from torch import nn

from archsearch.core.budget import count_statistics
from archsearch.core.data.loaders import Dataset
from archsearch.core.evaluation import evaluate_predictions
from archsearch.core.export import count_parameters
from archsearch.core.growth import cnn_step
from archsearch.core.growth.layer_step import LayerPolicy, grow_layer
from archsearch.core.models import Architecture, create_model
from archsearch.core.nn.growable import linears
from archsearch.specs.grow import GrowJob
from archsearch.specs.model_configs import CNNConfig, MLPConfig

# The test split's mean loss, accuracy and predicted-class counts (`evaluate_predictions`).
Evaluation = tuple[float, float, torch.Tensor]


@dataclass
class GrowState:
    """Everything besides tensors that a resumed job needs."""

    step: int = 0  # optimiser steps done
    last_growth_step: int = 0
    growth_steps: int = 0
    stopped_at: int | None = None  # optimiser step at which growth stopped
    stop_reason: str = ""
    seconds: float = 0.0  # wall clock spent so far (training + growth), across attempts
    seconds_at_growth: float = 0.0
    log: list[dict[str, Any]] = field(default_factory=list)  # one entry per growth step
    history: list[dict[str, float]] = field(default_factory=list)


def is_cnn(model: nn.Module) -> bool:
    return isinstance(getattr(model, "features", None), nn.Sequential)


def hidden_widths(model: nn.Module) -> list[int]:
    """Every growable width: the hidden MLP widths, or a CNN's channels then head widths."""
    if is_cnn(model):
        channels = [conv.out_channels for conv in cnn_step.convs_of(model)]
        return channels + [layer.out_features for layer in cnn_step.head_of(model)[:-1]]
    return [layer.out_features for layer in linears(model)[:-1]]


def mlp_architecture(widths: list[int], activation: str, data: Dataset) -> Architecture:
    config = MLPConfig.model_validate({"hidden": widths, "activation": activation})
    return Architecture(config, data.input_shape, data.num_classes)


def cnn_architecture(
    channels: list[int], hidden: list[int], activation: str, data: Dataset
) -> Architecture:
    """A registry `cnn` growth can use: no pooling or batch norm between grown layers."""
    config = CNNConfig.model_validate(
        {
            "channels": channels,
            "hidden": hidden,
            "activation": activation,
            "kernel_size": 3,
            "batch_norm": False,
            "pool": False,
            "bias": True,
        }
    )
    return Architecture(config, data.input_shape, data.num_classes)


def architecture_for(widths: list[int], spec: GrowJob, data: Dataset) -> Architecture:
    """The registry architecture of the grown widths (`hidden_widths` order)."""
    g = spec.growth
    if g.family == "cnn":
        convs = len(g.initial_channels)
        return cnn_architecture(list(widths[:convs]), list(widths[convs:]), g.activation, data)
    return mlp_architecture(list(widths), g.activation, data)


def growable_count(model: nn.Module) -> int:
    if is_cnn(model):
        return len(cnn_step.convs_of(model)) + len(cnn_step.head_of(model)) - 1
    return len(linears(model)) - 1


def _cnn_fans(model: nn.Module) -> list[tuple[int, int]]:
    """(fan-in, outputs) of each chain layer of a CNN: convs' patches, then the head."""
    convs = [(conv.weight[0].numel(), conv.out_channels) for conv in cnn_step.convs_of(model)]
    return convs + [(layer.in_features, layer.out_features) for layer in cnn_step.head_of(model)]


def stat_batch_size(model: nn.Module, h: int, spec: GrowJob, n_train: int) -> int:
    """Section 3.4: the estimator's variance grows like sqrt(max(n_{l-1}, n_{l+1}))."""
    if is_cnn(model):
        # The new channel's patch size and the next layer's output count; every position of
        # a sample is another (correlated) observation, so the sample count stays modest.
        fans = _cnn_fans(model)
        fan = max(fans[h][0], fans[h + 1][1])
    else:
        layers = linears(model)
        fan = max(layers[h].in_features, layers[h + 1].out_features)
    size = spec.growth.stat_batch_base * math.ceil(math.sqrt(fan))
    return max(1, min(size, spec.growth.stat_batch_max, n_train))


def policy_of(spec: GrowJob) -> LayerPolicy:
    g = spec.growth
    return LayerPolicy(
        g.max_neurons_per_step,
        g.lambda_rel_threshold,
        g.lambda_stop,
        g.eig_rtol,
        random=g.neurons == "random",
        max_amplitude=g.max_amplitude,
    )


def architecture_parameters(widths: list[int], spec: GrowJob, data: Dataset) -> int:
    """Parameters of the registry network with these grown widths (counted on the meta
    device: no memory, no initialisation)."""
    with torch.device("meta"):
        return count_parameters(create_model(architecture_for(widths, spec, data)))


def neuron_cost(widths: list[int], h: int, spec: GrowJob, data: Dataset) -> int:
    """Parameters one more neuron (channel) of layer h adds: its in- and out-weights."""
    wider = [w + (1 if i == h else 0) for i, w in enumerate(widths)]
    return architecture_parameters(wider, spec, data) - architecture_parameters(widths, spec, data)


def neurons_that_fit(model: nn.Module, h: int, spec: GrowJob, data: Dataset) -> int:
    """How many neurons layer h may still add without passing `growth.max_parameters`."""
    cap = spec.growth.max_neurons_per_step
    if spec.growth.max_parameters is None:
        return cap
    room = spec.growth.max_parameters - count_parameters(model)
    return max(0, min(cap, room // neuron_cost(hidden_widths(model), h, spec, data)))


def _grow_one(
    model: nn.Module, data: Dataset, spec: GrowJob, state: GrowState, h: int, device: torch.device
) -> dict[str, Any]:
    seed = spec.training.seed * 1_000_003 + state.growth_steps * 101 + h
    generator = torch.Generator().manual_seed(seed)
    n = stat_batch_size(model, h, spec, len(data.x_train))
    index = torch.randperm(len(data.x_train), generator=generator)[:n]
    x, y = data.x_train[index].to(device), data.y_train[index].to(device)
    count_statistics(n)  # no optimiser step: reported apart from the step budget
    policy = replace(policy_of(spec), max_neurons=neurons_that_fit(model, h, spec, data))
    grow = cnn_step.grow_pair if is_cnn(model) else grow_layer
    record = grow(model, x, y, h, policy, generator)
    return {**asdict(record), "measured_decrease": record.measured_decrease, "stat_batch": n}


def growth_step(
    model: nn.Module, data: Dataset, spec: GrowJob, state: GrowState, device: torch.device
) -> dict[str, Any]:
    """Grow every hidden layer once, each on its own seeded statistics batch; a layer with no
    room left under `growth.max_parameters` is skipped (no statistics are read for it)."""
    started = time.perf_counter()
    records = [
        _grow_one(model, data, spec, state, h, device)
        for h in range(growable_count(model))
        if neurons_that_fit(model, h, spec, data) > 0
    ]
    full = all(neurons_that_fit(model, h, spec, data) == 0 for h in range(growable_count(model)))
    return {
        "growth_step": state.growth_steps + 1,
        "optimizer_step": state.step,
        "widths": hidden_widths(model),
        "layers": records,
        "at_max_parameters": spec.growth.max_parameters is not None and full,
        "growth_seconds": time.perf_counter() - started,
    }


def stop_reason(
    model: nn.Module, spec: GrowJob, state: GrowState, entry: dict[str, Any], accuracy: float
) -> str:
    g = spec.growth
    if g.target_accuracy is not None and accuracy >= g.target_accuracy:
        return "target_accuracy"
    if entry.get("at_max_parameters"):  # no layer can take one more neuron within the cap
        return "max_parameters"
    if state.growth_steps >= g.max_growth_steps:
        return "max_growth_steps"
    top = [layer["lambdas"][0] ** 2 if layer["lambdas"] else 0.0 for layer in entry["layers"]]
    if all(value < g.lambda_stop for value in top):
        return "no_lambda_above_threshold"
    return ""


def growth_due(spec: GrowJob, state: GrowState) -> bool:
    if state.stopped_at is not None:
        return False
    if spec.growth.max_growth_steps == 0:
        return True  # stops at once: trains the start (or loaded) network only
    if spec.growth.seconds_between_growth is not None:
        return state.seconds - state.seconds_at_growth >= spec.growth.seconds_between_growth
    return state.step - state.last_growth_step >= spec.growth.steps_between_growth


def evaluation_row(
    model: nn.Module, data: Dataset, state: GrowState, device: torch.device, train_loss: float
) -> tuple[dict[str, float], Evaluation]:
    """A history row, and the evaluation behind it (the last one is the job's final test)."""
    test = evaluate_predictions(model, data.x_test, data.y_test, device)
    test_loss, test_acc, _ = test
    row = {
        "step": float(state.step),
        "seconds": state.seconds,
        "train_loss": train_loss,
        "test_loss": test_loss,
        "test_accuracy": test_acc,
        "parameters": float(count_parameters(model)),
        "growth_steps": float(state.growth_steps),
    }
    row.update({f"width_{i}": float(w) for i, w in enumerate(hidden_widths(model))})
    return row, test
