"""The layers a compiled neural graph is made of (Discovering Neural Wirings, section 2.1:
each node sums its weighted in-edges, then applies its node op: norm, activation and, for
conv nodes, a 3x3 depthwise conv).

- `Products`: one product per destination block over the concatenated states of its source
  blocks (a Linear for MLP-style nodes, a 1x1 conv for conv nodes), with the forms one
  sample runs (`run_one`, `vector_forms`) and the Concat-free form the ONNX export takes.
- `NodeOp`: what follows a product, the rest of the node op.

`core.deploy.compiled_static` and `core.deploy.compiled_dynamic` build them from a compact
graph.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.deploy.forms import SparseLinear
from archsearch.core.deploy.one_sample import (
    DepthwiseConv,
    GraphLinear,
    PointwiseConv,
    conv_pair,
    tracing,
)
from archsearch.core.nn.neural_graph import ACTIVATIONS

Piece = tuple[tuple[int, ...], torch.Tensor, torch.Tensor]  # sources, weight, bias (n, H, W)
NormRecord = tuple[Literal["affine", "instance"], torch.Tensor, torch.Tensor] | None


def per_channel(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return v.view(-1, *([1] * (x.dim() - 2)))  # broadcast over (B, n, ...)


class NodeOp(nn.Module):
    """A block's node op after its product: [norm], activation, [3x3 depthwise conv].

    `norm` is None where a batch norm was folded into the product (or there is none);
    "affine" is an eval-mode batch norm that could not be folded (the input nodes).
    """

    norm_weight: torch.Tensor  # buffers when `norm` is given, declared for the type checker
    norm_bias: torch.Tensor

    def __init__(
        self, activation: str, norm: NormRecord, kernel: torch.Tensor | None, stride: int = 1
    ) -> None:
        super().__init__()
        self.activation = activation
        # "shift": an affine norm whose scale moved into the products reading the nodes.
        self.norm_kind: Literal["none", "affine", "instance", "shift"] = (
            "none" if norm is None else norm[0]
        )
        if norm is not None:
            self.register_buffer("norm_weight", norm[1].detach().clone())
            self.register_buffer("norm_bias", norm[2].detach().clone())
        self.conv: nn.Conv2d | None = None
        if kernel is not None:
            n = kernel.shape[0]
            self.conv = DepthwiseConv(n, n, 3, conv_pair(stride), 1, groups=n, bias=False)
            self.conv.weight.data.copy_(kernel)

    def pad_channels(self, pad: int) -> None:
        """`pad` more channels that stay 0: zero norm affine, zero kernel."""
        if self.norm_kind != "none":
            self.norm_weight = F.pad(self.norm_weight, (0, pad))
            self.norm_bias = F.pad(self.norm_bias, (0, pad))
        if self.conv is not None:
            kernel = F.pad(self.conv.weight.detach(), (0, 0, 0, 0, 0, 0, 0, pad))
            n, stride = kernel.shape[0], self.conv.stride
            self.conv = DepthwiseConv(n, n, 3, conv_pair(stride), 1, groups=n, bias=False)
            self.conv.weight.data.copy_(kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm_kind == "instance":
            x = F.instance_norm(x, weight=self.norm_weight, bias=self.norm_bias)
        elif self.norm_kind == "affine":
            x = x * per_channel(self.norm_weight, x) + per_channel(self.norm_bias, x)
        elif self.norm_kind == "shift":  # an affine norm whose scale moved to the readers
            x = x + per_channel(self.norm_bias, x)
        x = ACTIVATIONS[self.activation](x)
        conv = self.conv  # `forward` itself: at batch 1 the module call costs as much
        return x if conv is None else conv.forward(x)


def product_layer(weight: torch.Tensor, bias: torch.Tensor, spatial: bool) -> nn.Module:
    """A destination's in-edges as one layer: a 1x1 conv (conv nodes) or a Linear, with the
    per-node part of `bias` (n, H, W) (`bias_map` is the part that varies by position)."""
    n, m = weight.shape
    layer = PointwiseConv(m, n, 1) if spatial else GraphLinear(m, n)
    layer.weight.data.copy_(weight.reshape(layer.weight.shape))
    assert layer.bias is not None, "product layers have a bias"
    layer.bias.data.copy_(bias.flatten(1)[:, 0])
    return layer


def bias_map(bias: torch.Tensor) -> torch.Tensor | None:
    """What a bias (n, H, W) adds beyond its value at the first position; None if nothing."""
    rest = bias - bias.flatten(1)[:, :1, None]  # (n, H, W)
    return rest.clone() if bool(rest.any()) else None


class Products(nn.Module):
    """Destination products of a compiled graph: `layers[j]` reads the concatenated states
    of `sources[j]`; the buffer `map{j}` (or None) is added where the bias varies."""

    def __init__(self, pieces: list[Piece], spatial: bool) -> None:
        super().__init__()
        self.sources = [sources for sources, _, _ in pieces]
        self.layers = nn.ModuleList(product_layer(w, b, spatial) for _, w, b in pieces)
        self.has_map = []
        self._matrices: dict[int, tuple[nn.Module, torch.Tensor, torch.Tensor]] = {}
        for j, (_, _, bias) in enumerate(pieces):
            rest = bias_map(bias)
            self.register_buffer(f"map{j}", rest)
            self.has_map.append(rest is not None)

    widths: list[int] = []  # block widths, set by a conv graph for `_summed`

    def run(self, j: int, states: list[torch.Tensor]) -> torch.Tensor:
        sources, layer = self.sources[j], self.layers[j]
        if len(sources) == 1:
            y: torch.Tensor = layer(states[sources[0]])
        elif self.widths and tracing() and isinstance(layer, nn.Conv2d):
            y = self._summed(layer, [states[i] for i in sources], sources)
        else:
            y = layer(torch.cat([states[i] for i in sources], 1))
        return y + getattr(self, f"map{j}") if self.has_map[j] else y

    def run_one(self, j: int, states: list[torch.Tensor]) -> torch.Tensor:
        """`run` for one sample of conv states (1, m, H, W): one `addmm` over the
        concatenated states as (m, H * W), whatever the product's own forward."""
        sources, layer = self.sources[j], self.layers[j]
        flat = (
            states[sources[0]] if len(sources) == 1 else torch.cat([states[i] for i in sources], 1)
        )
        h, w = flat.shape[2], flat.shape[3]
        weight, bias = self._matrix(j, layer)
        y = torch.addmm(bias, weight, flat.view(-1, h * w)).view(1, -1, h, w)
        return y + getattr(self, f"map{j}") if self.has_map[j] else y

    def vector_forms(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each Linear product's `vector_form`, kept while the layers are the same ones."""
        layers = tuple(self.layers)
        if self._vector_layers != layers:
            self._vectors = [vector_form(layer) for layer in layers]
            self._vector_layers = layers
        return self._vectors

    _vector_layers: tuple[nn.Module, ...] = ()
    _vectors: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_vector_layers": (), "_vectors": []}  # CSR: not copied

    def _matrix(self, j: int, layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """Product j's weight (n, m) and bias column (n, 1): views of its parameters (their
        in-place changes show), kept while `layers[j]` is the same layer."""
        kept = self._matrices.get(j)
        if kept is None or kept[0] is not layer:
            assert isinstance(layer, nn.Conv2d) and layer.bias is not None, "a conv product"
            weight = layer.weight.detach()
            kept = (layer, weight.view(weight.shape[0], -1), layer.bias.detach()[:, None])
            self._matrices[j] = kept
        return kept[1], kept[2]

    def _summed(
        self, layer: nn.Conv2d, states: list[torch.Tensor], sources: tuple[int, ...]
    ) -> torch.Tensor:
        """A conv product exported as one 1x1 Conv per source block, summed: no Concat,
        which onnxruntime runs outside its NCHWc layout, reordering before and after
        (measured at batch 1 on the default conv graph: 25 us, against 21 us summed)."""
        at, y = 0, None
        for i, state in zip(sources, states, strict=True):
            weight = layer.weight[:, at : at + self.widths[i]]
            at += self.widths[i]
            term = F.conv2d(state, weight, layer.bias if y is None else None)
            y = term if y is None else y + term
        assert y is not None, "a product has sources"
        return y


def vector_form(layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """A Linear product's batch-1 weight (CSR where its chosen form is sparse) and bias."""
    if isinstance(layer, SparseLinear):
        matrix = layer.csr if layer.sparse_small else layer.dense
        assert matrix is not None, "a dense regime keeps its dense weight"
        bias = layer.bias if layer.bias is not None else matrix.new_zeros(matrix.shape[0])
        return matrix, bias
    assert isinstance(layer, nn.Linear) and layer.bias is not None, "a Linear product"
    return layer.weight.detach(), layer.bias.detach()
