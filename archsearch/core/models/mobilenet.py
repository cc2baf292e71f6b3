"""MobileNetV1 (Howard et al., 2017): a 3x3 stem conv, then depthwise-separable blocks
(3x3 depthwise conv + 1x1 pointwise conv, each with batch norm and activation), global
average pooling and a linear classifier. A parent network of the prune method.
"""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core.models.layers import activation
from archsearch.core.models.registry import register_model
from archsearch.specs.prune_model_configs import MobileNetV1Config


def conv_bn(
    c_in: int, c_out: int, kernel: int, stride: int, groups: int, act: str
) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(
            c_in, c_out, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False
        ),
        nn.BatchNorm2d(c_out),
        activation(act),
    )


def separable_block(c_in: int, c_out: int, stride: int, act: str) -> nn.Sequential:
    return nn.Sequential(
        conv_bn(c_in, c_in, 3, stride, groups=c_in, act=act),  # depthwise
        conv_bn(c_in, c_out, 1, 1, groups=1, act=act),  # pointwise
    )


class MobileNetV1(nn.Module):
    def __init__(
        self, config: MobileNetV1Config, input_shape: tuple[int, ...], num_classes: int
    ) -> None:
        super().__init__()

        def width(channels: int) -> int:
            return max(1, round(channels * config.width_multiplier))

        c_in = width(config.stem)
        blocks: list[nn.Module] = [conv_bn(input_shape[0], c_in, 3, 1, 1, config.activation)]
        for channels, stride in config.blocks:
            blocks.append(separable_block(c_in, width(channels), stride, config.activation))
            c_in = width(channels)
        self.features = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.features(x)).flatten(1)  # (B, C)
        logits: torch.Tensor = self.classifier(h)  # (B, classes)
        return logits


@register_model("mobilenet_v1")
def _build_mobilenet_v1(
    config: MobileNetV1Config, input_shape: tuple[int, ...], num_classes: int
) -> MobileNetV1:
    return MobileNetV1(config, input_shape, num_classes)
