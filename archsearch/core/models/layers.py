"""Small shared layers and helpers of the model families."""

from __future__ import annotations

import torch
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "selu": nn.SELU,
    "gelu": nn.GELU,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "identity": nn.Identity,
}


def activation(name: str) -> nn.Module:
    return ACTIVATIONS[name]()


def flat_features(input_shape: tuple[int, ...]) -> int:
    size = 1
    for dim in input_shape:
        size *= dim
    return size


def linear_head(
    layers: nn.ModuleList, act: nn.Module, h: torch.Tensor, dropout: nn.Module | None = None
) -> torch.Tensor:
    """The Linear layers in turn, `act` (then `dropout`, if any) after each but the last
    (the logits).

    Iterated, not sliced: `layers[:-1]` builds a new ModuleList on every forward pass
    (per-step Python time)."""
    last = len(layers) - 1
    for i, layer in enumerate(layers):
        h = layer(h)
        if i < last:
            h = act(h)
            if dropout is not None:
                h = dropout(h)
    return h
