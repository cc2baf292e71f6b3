"""Folding eval-mode batch norm into the products and convs around it (Discovering Neural
Wirings, section 2.1: a node op normalises, activates and, for conv nodes, convolves;
section 2.4: a discrete-time graph applies its node ops at every step).

In eval mode a batch norm is an affine map per node, x * scale + shift, so it folds into the
product that computes its input (rows scaled, a bias added) or, where an activation comes
first, stays an op. These helpers fold into tensors, convs and a compiled graph's layers;
the folds that need the compiled graph itself (the head, the input norms between stages)
are in `core.deploy.compiled_graph`.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from archsearch.core.deploy.graph_layers import NodeOp, Piece, Products
from archsearch.core.deploy.one_sample import depthwise, pointwise
from archsearch.core.nn.neural_graph import NodeOps


def batch_affine(ops: NodeOps, a: int, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Eval-mode batch norm of nodes a:b as x * scale + shift."""
    scale = ops.norm_weight[a:b] / torch.sqrt(ops.running_var[a:b] + 1e-5)
    return scale, ops.norm_bias[a:b] - ops.running_mean[a:b] * scale


def fold_rows(
    ops: NodeOps, a: int, b: int, weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """BN(W z + c) = (scale W) z + scale c + shift, for the eval-mode batch norm of a:b."""
    scale, shift = batch_affine(ops, a, b)
    return weight * scale[:, None], bias * scale[:, None, None] + shift[:, None, None]


def fold_step_norms(ops: NodeOps, pieces: list[Piece], needed: list[torch.Tensor]) -> None:
    """Each step's eval-mode batch norm folded into the rows of the product before it
    (pieces[p] computes the nodes needed[p + 1], whose op starts with that norm)."""
    scale, shift = batch_affine(ops, 0, ops.n)
    for p, (sources, weight, bias) in enumerate(pieces[:-1]):
        k, c = scale[needed[p + 1]], shift[needed[p + 1]]
        pieces[p] = (sources, weight * k[:, None], bias * k[:, None, None] + c[:, None, None])


def folded_stem(stem: nn.Sequential) -> nn.Sequential:
    """The stem with each eval-mode batch norm folded into the conv before it, and 1x1
    convs as `PointwiseConv`: fewer and cheaper calls for one sample."""
    layers: list[nn.Module] = []
    for layer in stem:
        previous = layers[-1] if layers else None
        if isinstance(layer, nn.BatchNorm2d) and isinstance(previous, nn.Conv2d):
            layers[-1] = scaled_conv(previous, *batch_norm_affine(layer))
        else:
            layers.append(layer)
    return nn.Sequential(
        *(depthwise(pointwise(m)) if isinstance(m, nn.Conv2d) else m for m in layers)
    )


def scaled_conv(conv: nn.Conv2d, scale: torch.Tensor, shift: torch.Tensor) -> nn.Conv2d:
    """scale * conv(x) + shift per output channel, as one conv with a bias."""
    scaled = copy.deepcopy(conv)
    scaled.weight.data.mul_(scale[:, None, None, None])
    bias = shift.clone() if conv.bias is None else conv.bias.detach() * scale + shift
    scaled.bias = nn.Parameter(bias)
    return scaled


def batch_norm_affine(norm: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    assert norm.running_mean is not None and norm.running_var is not None
    scale = norm.weight.detach() / torch.sqrt(norm.running_var + norm.eps)
    return scale, norm.bias.detach() - norm.running_mean * scale


def input_scale_to_columns(op: NodeOp, pieces: list[Piece]) -> None:
    """relu(a x + c) = a relu(x + c / a) for a > 0: the input nodes' batch-norm scale moves
    into the columns of the first step's product, leaving the op a shift and the relu (one
    op fewer per call: at batch 1 on the bench's graph, an addcmul took 3.9 us, a relu 1.2)."""
    if op.norm_kind != "affine" or op.activation != "relu" or not bool((op.norm_weight > 0).all()):
        return
    sources, weight, bias = pieces[0]
    pieces[0] = (sources, weight * op.norm_weight, bias)
    op.norm_bias = op.norm_bias / op.norm_weight
    op.norm_kind = "shift"


def scale_last_product(products: Products, scale: torch.Tensor, shift: torch.Tensor) -> None:
    """Make the last product compute scale * y + shift per node (a batch norm folded)."""
    last = len(products.layers) - 1
    layer = products.layers[last]
    assert isinstance(layer, nn.Conv2d) and layer.bias is not None, "a conv-node product"
    layer.weight.data.mul_(scale[:, None, None, None])
    layer.bias.data.mul_(scale).add_(shift)
    if products.has_map[last]:
        getattr(products, f"map{last}").mul_(scale[:, None, None])
