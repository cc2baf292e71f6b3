"""Small shared layers and helpers of the model families."""

from __future__ import annotations

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
