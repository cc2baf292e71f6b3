"""Layers of a compiled graph that run one sample faster than torch's own call, and the same
op as torch's for a batch and under the ONNX exporter (Discovering Neural Wirings, section
2.1: a graph's products and node ops, here in the form deployment runs).

At batch 1 on the small maps of a compact graph, oneDNN's per-call set-up costs more than
the arithmetic; each class below says what it measured.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def tracing() -> bool:
    """Under the ONNX exporter's tracer: take the batch-general path, whatever the batch."""
    active: bool = torch.jit.is_tracing()  # type: ignore[attr-defined,no-untyped-call]
    return active


class DepthwiseConv(nn.Conv2d):
    """A 3x3 depthwise conv that runs one sample on a small map as a dense conv whose
    weight is block diagonal (kernel c on channel c, zeros elsewhere: the same sums plus
    exact zeros). Measured at batch 1 on a 7x7 map, 32 channels: the oneDNN depthwise conv
    48 us, the dense one 28 us (16 channels: 13 us); a dense conv costs channels times the
    arithmetic, so only maps up to `DENSE_LIMIT` channels^2 x positions run it."""

    DENSE_LIMIT = 32 * 32 * 49

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.in_channels
        small = n * n * x.shape[2] * x.shape[3] <= self.DENSE_LIMIT
        if x.shape[0] != 1 or not small or tracing():
            return super().forward(x)
        return F.conv2d(x, self.block_diagonal(), self.bias, self.stride, self.padding)

    def block_diagonal(self) -> torch.Tensor:
        """(n, n, 3, 3), built once per weight (rebuilt if the weight changes)."""
        key = (self.weight.data_ptr(), self.weight._version)
        if getattr(self, "_dense_key", None) != key:
            n = self.in_channels
            weight = self.weight.new_zeros(n, n, *self.kernel_size)
            weight[torch.arange(n), torch.arange(n)] = self.weight.detach()[:, 0]
            self._dense, self._dense_key = weight, key
        dense: torch.Tensor = self._dense
        return dense


def depthwise(conv: nn.Conv2d) -> nn.Conv2d:
    """`conv` as a `DepthwiseConv` when it is a depthwise conv; else `conv` itself."""
    n = conv.in_channels
    plain = conv.kernel_size == (3, 3) and not isinstance(conv.padding, str)
    if conv.groups != n or conv.out_channels != n or n == 1 or not plain:
        return conv
    fast = DepthwiseConv(n, n, 3, conv_pair(conv.stride), conv_pair(conv.padding), groups=n)
    fast.weight, fast.bias = conv.weight, conv.bias
    return fast


class GraphLinear(nn.Linear):
    """A product of MLP-style node states: `torch.addmv` for one sample (measured 3.3 us
    against 7.4 us for an nn.Linear call with a 32 x 784 weight: the call costs most)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == 1 and not tracing():
            return torch.addmv(self.bias, self.weight, x[0]).unsqueeze(0)  # (1, out)
        return F.linear(x, self.weight, self.bias)


class PointwiseConv(nn.Conv2d):
    """A 1x1 conv that runs one sample as one matrix product (measured at batch 1 on a 7x7
    map: the oneDNN 1x1 convolution took about 80 us a call, mostly setting itself up,
    where the product takes a few); a batch and the ONNX export (a Conv) as a conv."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 1 or tracing() or self.stride != (1, 1) or self.groups != 1:
            return super().forward(x)
        weight = self.weight.view(self.out_channels, self.in_channels)
        flat = x.view(self.in_channels, -1) if x.is_contiguous() else x.reshape(x.shape[1], -1)
        y = weight @ flat if self.bias is None else torch.addmm(self.bias[:, None], weight, flat)
        return y.view(1, self.out_channels, *x.shape[2:])


def conv_pair(value: object) -> tuple[int, int]:
    """A conv's stride or padding (an int or an (h, w) pair) as the pair its constructor
    takes (a padding given as a string is kept out by the callers)."""
    if isinstance(value, int):
        return value, value
    assert isinstance(value, tuple) and len(value) == 2, "2-d convs have (h, w) pairs"
    return int(value[0]), int(value[1])


def pointwise(conv: nn.Conv2d) -> nn.Conv2d:
    """`conv` as a `PointwiseConv` when it is a plain 1x1 conv; else `conv` itself."""
    if conv.kernel_size != (1, 1) or conv.padding not in ((0, 0), "valid") or conv.groups != 1:
        return conv
    plain = PointwiseConv(conv.in_channels, conv.out_channels, 1, conv_pair(conv.stride), 0, 1, 1)
    plain.weight = conv.weight
    plain.bias = conv.bias
    return plain
