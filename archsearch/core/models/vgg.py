"""A VGG-style network (Simonyan and Zisserman, 2014), the parent network of the pruning
paper's transfer experiments ("Differentiable Architecture Pruning", section 3.2).

Stages of 3x3 convolutions (+ batch norm) + activation, each closed by a 2x2 max pool; then
global average pooling (so any image size works) and a fully connected head.
"""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core.models.layers import activation, linear_head
from archsearch.core.models.registry import register_model
from archsearch.specs.prune_model_configs import VGGConfig


def vgg_stage(c_in: int, widths: tuple[int, ...], config: VGGConfig) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in widths:
        layers += [
            nn.Conv2d(c_in, width, 3, padding=1, bias=config.bias),
            nn.BatchNorm2d(width) if config.batch_norm else nn.Identity(),
            activation(config.activation),
        ]
        c_in = width
    layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


class VGG(nn.Module):
    def __init__(self, config: VGGConfig, input_shape: tuple[int, ...], num_classes: int) -> None:
        super().__init__()
        c_in = input_shape[0]
        stages = []
        for widths in config.stages:
            stages.append(vgg_stage(c_in, widths, config))
            c_in = widths[-1]
        self.features = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        dims = [c_in, *config.hidden, num_classes]
        self.head = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:], strict=False))
        self.act = activation(config.activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.features(x)).flatten(1)  # (B, C)
        return linear_head(self.head, self.act, h)  # (B, classes)


@register_model("vgg")
def _build_vgg(config: VGGConfig, input_shape: tuple[int, ...], num_classes: int) -> VGG:
    return VGG(config, input_shape, num_classes)
