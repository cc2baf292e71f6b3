"""The tiny neural-graph classifier of Discovering Neural Wirings, section 3.1.

A downsampling stem g (a strided 3x3 conv, then a strided depthwise-separable conv, as in the
paper's footnote 3) feeds one channel per input node of a neural graph (static, discrete or
continuous time); h pools the output nodes and applies a linear classifier. With the paper's
sizes (32 input nodes, 4 x 192 nodes, 100 outputs, 5% density) this is the 41k-parameter
model of Table 1. `node_op="act"` gives an MLP-style graph over the flattened input.
"""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core.models.registry import register_model
from archsearch.core.nn.graph_edges import GraphEdges, SparseEdges
from archsearch.core.nn.neural_graph import (
    DynamicGraph,
    OpSpec,
    StaticGraph,
    block_admissible,
    conv_out,
)
from archsearch.specs.graph_model_configs import NeuralGraphConfig


def downsample_stem(channels_in: int, nodes: int, strides: tuple[int, int]) -> nn.Sequential:
    mid = max(1, nodes // 2)
    # No conv biases: each conv feeds a batch norm, which would cancel them.
    return nn.Sequential(
        nn.Conv2d(channels_in, mid, 3, stride=strides[0], padding=1, bias=False),
        nn.BatchNorm2d(mid),
        nn.ReLU(),
        nn.Conv2d(mid, mid, 3, stride=strides[1], padding=1, groups=mid),  # depthwise
        nn.Conv2d(mid, nodes, 1, bias=False),  # pointwise
        nn.BatchNorm2d(nodes),
    )


def _graph_hw(config: NeuralGraphConfig, input_shape: tuple[int, ...]) -> tuple[int, int]:
    if config.node_op == "act":
        return (1, 1)
    s1, s2 = config.stem_strides(input_shape)
    return conv_out(conv_out(input_shape[1], s1), s2), conv_out(conv_out(input_shape[2], s1), s2)


def build_graph(config: NeuralGraphConfig, input_shape: tuple[int, ...]) -> nn.Module:
    op = OpSpec(config.node_op, config.node_norm, config.activation)
    compact = config.compact
    if config.setting == "static":
        blocks = (
            compact.blocks
            if compact
            else (config.first_block(input_shape), *config.hidden_blocks, config.output_nodes)
        )
        edges = (
            SparseEdges(sum(blocks), list(compact.edges))
            if compact
            else GraphEdges(
                block_admissible(blocks), config.edge_budget(input_shape), op.source_gain
            )
        )
        offsets = _graph_hw(config, input_shape) if compact and compact.offsets else None
        return StaticGraph(blocks, edges, op, offsets_shape=offsets)
    n = sum(compact.blocks) if compact else config.num_nodes(input_shape)
    edges = (
        SparseEdges(n, list(compact.edges))
        if compact
        else GraphEdges(
            torch.ones(n, n, dtype=torch.bool), config.edge_budget(input_shape), op.source_gain
        )
    )
    n_in = config.first_block(input_shape)
    return DynamicGraph(
        edges,
        op,
        n_in,
        config.output_nodes,
        time=config.setting,
        steps=config.steps,
        ode_method=config.ode_method,
        ode_tol=config.ode_tol,
        adjoint=config.adjoint,
    )


class NeuralGraphClassifier(nn.Module):
    """stem g -> neural graph -> h (global average pool of the output nodes, linear)."""

    def __init__(
        self, config: NeuralGraphConfig, input_shape: tuple[int, ...], num_classes: int
    ) -> None:
        super().__init__()
        self.config = config
        self.stem = (
            downsample_stem(input_shape[0], config.input_nodes, config.stem_strides(input_shape))
            if config.node_op == "conv"
            else nn.Flatten()
        )
        self.graphs = nn.ModuleList([build_graph(config, input_shape)])
        # h_psi (eq. 1's output function) normalises MLP-style output nodes: they apply no
        # op, and their unnormalised sums over hundreds of inputs feed the classifier.
        self.head_norm = (
            nn.BatchNorm1d(config.output_nodes) if config.node_op == "act" else nn.Identity()
        )
        self.fc = nn.Linear(config.output_nodes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(x)
        if z.dim() == 2:
            z = z[:, :, None, None]  # MLP-style: one node per feature, (B, F, 1, 1)
        out = self.graphs[0](z)  # (B, output_nodes, H, W)
        logits: torch.Tensor = self.fc(self.head_norm(out.mean(dim=(2, 3))))  # (B, classes)
        return logits


@register_model("neural_graph")
def _build_neural_graph(
    config: NeuralGraphConfig, input_shape: tuple[int, ...], num_classes: int
) -> NeuralGraphClassifier:
    return NeuralGraphClassifier(config, input_shape, num_classes)
