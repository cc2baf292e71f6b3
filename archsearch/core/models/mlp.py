"""Multi-layer perceptron: flatten, then Linear + activation blocks, then a classifier."""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import nn

from archsearch.core.models.layers import activation, flat_features, linear_head
from archsearch.core.models.registry import register_model
from archsearch.specs.model_configs import MLPConfig


class MLP(nn.Module):
    """Linear layers are kept in `self.layers` (hidden ones, then the classifier last), so
    pruning and growth find them without knowing the family."""

    def __init__(self, config: MLPConfig, in_features: int, num_classes: int) -> None:
        super().__init__()
        widths = [in_features, *config.hidden, num_classes]
        self.layers = nn.ModuleList(
            nn.Linear(w_in, w_out, bias=config.bias) for w_in, w_out in pairwise(widths)
        )
        self.act = activation(config.activation)
        self.dropout = nn.Dropout(config.dropout) if config.dropout > 0 else nn.Identity()
        self.dropout_active = config.dropout > 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # A dropout of 0 is not called at all (per-step Python time).
        dropout = self.dropout if self.dropout_active else None
        return linear_head(self.layers, self.act, x.flatten(1), dropout)  # (B, classes)


@register_model("mlp")
def _build_mlp(config: MLPConfig, input_shape: tuple[int, ...], num_classes: int) -> MLP:
    return MLP(config, flat_features(input_shape), num_classes)
