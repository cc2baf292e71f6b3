"""MobileNetV1-DNW (Discovering Neural Wirings, Table 4 and section 2.4).

A 3x3 conv stem g, then one static neural graph per spatial resolution (stage): the stage's
input nodes are the previous stage's output nodes and apply batch norm, ReLU and a 3x3
depthwise conv (stride 2 when the stage downsamples); inner nodes do the same at stride 1;
output nodes apply nothing. The edge budget of each stage equals the pointwise edges of
MobileNetV1 at `edge_width`. The head h is batch norm, ReLU, global pool and the FC layer,
whose edges are also chosen by top-k in the "-Small" variant.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.models.registry import register_model
from archsearch.core.nn.graph_edges import GraphEdges, SparseEdges
from archsearch.core.nn.neural_graph import OpSpec, StaticGraph, block_admissible, conv_out
from archsearch.specs.graph_model_configs import MobileNetDNWConfig


class MaskedLinear(nn.Module):
    """A linear layer whose real edges are the top-k |w| (MobileNetV1-DNW-Small's FC)."""

    def __init__(self, features: int, classes: int, k: int) -> None:
        super().__init__()
        self.edges = GraphEdges(torch.ones(classes, features, dtype=torch.bool), k)
        self.bias = nn.Parameter(torch.zeros(classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.edges.matrix(), self.bias)  # (B, classes)

    def macs(self) -> int:
        return self.edges.num_real()


def stage_resolutions(
    config: MobileNetDNWConfig, input_shape: tuple[int, ...]
) -> list[tuple[int, int]]:
    h, w = (
        conv_out(input_shape[1], config.stem_stride),
        conv_out(input_shape[2], config.stem_stride),
    )
    sizes = []
    for stage in range(len(config.stage_layers)):
        if stage > 0:
            h, w = conv_out(h, 2), conv_out(w, 2)
        sizes.append((h, w))
    return sizes


def _stage_graph(config: MobileNetDNWConfig, stage: int, hw: tuple[int, int]) -> StaticGraph:
    op = OpSpec("conv", "batch")
    stride = 1 if stage == 0 else 2
    if config.compact is not None:
        compact = config.compact[stage]
        sparse = SparseEdges(sum(compact.blocks), list(compact.edges))
        return StaticGraph(compact.blocks, sparse, op, stride, hw if compact.offsets else None)
    blocks = config.stage_blocks()[stage]
    edges = GraphEdges(block_admissible(blocks), config.stage_budgets()[stage])
    return StaticGraph(blocks, edges, op, stride)


class MobileNetDNW(nn.Module):
    def __init__(
        self, config: MobileNetDNWConfig, input_shape: tuple[int, ...], num_classes: int
    ) -> None:
        super().__init__()
        self.config = config
        channels = config.channels(config.width)
        self.stem = nn.Conv2d(input_shape[0], channels[0], 3, config.stem_stride, 1, bias=False)
        sizes = stage_resolutions(config, input_shape)
        self.graphs = nn.ModuleList(_stage_graph(config, s, hw) for s, hw in enumerate(sizes))
        self.head_norm = nn.BatchNorm2d(channels[-1])
        fc_budget = config.fc_budget(num_classes)
        self.fc: nn.Module = (
            MaskedLinear(channels[-1], num_classes, fc_budget)
            if fc_budget
            else nn.Linear(channels[-1], num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(x)  # (B, 32d, H, W)
        for graph in self.graphs:
            z = graph(z)  # the output nodes of stage s are the input nodes of stage s + 1
        z = F.relu(self.head_norm(z)).mean(dim=(2, 3))  # (B, 1024d)
        logits: torch.Tensor = self.fc(z)  # (B, classes)
        return logits


@register_model("mobilenet_dnw")
def _build_mobilenet_dnw(
    config: MobileNetDNWConfig, input_shape: tuple[int, ...], num_classes: int
) -> MobileNetDNW:
    return MobileNetDNW(config, input_shape, num_classes)
