"""A small CNN: conv blocks (conv, batch norm, activation, 2x2 max pool unless `pool` is
false), then an MLP head."""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import nn

from archsearch.core.models.layers import activation, linear_head
from archsearch.core.models.registry import register_model
from archsearch.specs.model_configs import CNNConfig


def conv_block(c_in: int, c_out: int, config: CNNConfig) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(
            c_in, c_out, config.kernel_size, padding=config.kernel_size // 2, bias=config.bias
        ),
        nn.BatchNorm2d(c_out) if config.batch_norm else nn.Identity(),
        activation(config.activation),
        *([nn.MaxPool2d(2)] if config.pool else []),
    )


class CNN(nn.Module):
    def __init__(self, config: CNNConfig, input_shape: tuple[int, ...], num_classes: int) -> None:
        super().__init__()
        channels_in, height, width = input_shape
        channels = [channels_in, *config.channels]
        self.features = nn.Sequential(
            *(conv_block(c_in, c_out, config) for c_in, c_out in pairwise(channels))
        )
        shrink = 2 ** len(config.channels) if config.pool else 1
        flat = channels[-1] * (height // shrink) * (width // shrink)
        widths = [flat, *config.hidden, num_classes]
        self.head = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(widths))
        self.act = activation(config.activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(x).flatten(1)  # (B, C*H'*W')
        return linear_head(self.head, self.act, h)  # (B, classes)


@register_model("cnn")
def _build_cnn(config: CNNConfig, input_shape: tuple[int, ...], num_classes: int) -> CNN:
    return CNN(config, input_shape, num_classes)
