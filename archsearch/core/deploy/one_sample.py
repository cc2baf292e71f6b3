"""Layers of a compiled graph that run one sample faster than torch's own call, and the same
op as torch's for a batch and under the ONNX exporter (Discovering Neural Wirings, section
2.1: a graph's products and node ops, here in the form deployment runs).

At batch 1 on the small maps of a compact graph, oneDNN's per-call set-up costs more than
the arithmetic; each class below says what it measured.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn


def tracing() -> bool:
    """Under the ONNX exporter's tracer: take the batch-general path, whatever the batch."""
    active: bool = torch.jit.is_tracing()  # type: ignore[attr-defined,no-untyped-call]
    return active


class DepthwiseConv(nn.Conv2d):
    """A depthwise conv that runs one sample on a small map as one sparse matrix-vector
    product: the conv as a CSR matrix (int32 indices) over the flattened map, built once per
    weight and map size (rebuilt if either changes). Measured at batch 1, one thread, 7x7
    map, 3x3 kernel, 32 channels: oneDNN's depthwise conv 49 us (its set-up, about the same
    from 8 to 128 channels), a dense block-diagonal conv 29 us (im2col alone 21 us), the
    CSR product 10 us (16 channels: 14 against 7.5 us; 8 channels 14x14 at stride 2: 11
    against 6 us). Its cost grows with the nonzeros, oneDNN's hardly: at 64 channels on
    14x14 (100k nonzeros) both took 52 us, so only convs up to `SPARSE_LIMIT` nonzeros run
    it; a batch and the ONNX export (a Conv) run the conv itself."""

    SPARSE_LIMIT = 64 * 1024

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 1 or tracing() or self._nonzeros(x) > self.SPARSE_LIMIT:
            return super().forward(x)
        matrix, bias, out_hw = self.sparse_form(x.shape[2], x.shape[3])
        flat = x.reshape(-1)
        y = torch.mv(matrix, flat) if bias is None else torch.addmv(bias, matrix, flat)
        return y.view(1, self.out_channels, *out_hw)

    def _nonzeros(self, x: torch.Tensor) -> int:
        kh, kw = self.kernel_size
        sh, sw = self.stride
        return self.out_channels * kh * kw * (x.shape[2] // sh) * (x.shape[3] // sw)

    def sparse_form(
        self, h: int, w: int
    ) -> tuple[torch.Tensor, torch.Tensor | None, tuple[int, int]]:
        """(CSR matrix, bias per output or None, output (H, W)) for an h x w map, cached."""
        bias = self.bias
        key: tuple[int, ...] = (self.weight.data_ptr(), self.weight._version, h, w)
        key += (bias.data_ptr(), bias._version) if bias is not None else ()
        if getattr(self, "_sparse_key", None) != key:
            matrix, out_hw = depthwise_matrix(self, h, w)
            rows = out_hw[0] * out_hw[1]
            full = None if bias is None else bias.detach().repeat_interleave(rows)
            self._sparse, self._sparse_key = (matrix, full, out_hw), key
        form: tuple[torch.Tensor, torch.Tensor | None, tuple[int, int]] = self._sparse
        return form

    def __getstate__(self) -> dict[str, object]:
        # A sparse tensor cannot be deep-copied (`core.deploy.forms` copies models): a copy
        # builds its own.
        return {**self.__dict__, "_sparse": None, "_sparse_key": None}


def depthwise_matrix(conv: nn.Conv2d, h: int, w: int) -> tuple[torch.Tensor, tuple[int, int]]:
    """A depthwise conv (no dilation) on an h x w map as a CSR matrix with int32 indices,
    (channels * H' * W', channels * h * w), rows in the output's memory order; and (H', W')."""
    (kh, kw), (sh, sw) = conv.kernel_size, conv.stride
    ph, pw = conv_pair(conv.padding)
    out_h, out_w = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    grids = torch.meshgrid(
        *(torch.arange(n) for n in (conv.out_channels, out_h, out_w, kh, kw)), indexing="ij"
    )
    c, oi, oj, a, b = (g.flatten() for g in grids)
    ii, jj = oi * sh + a - ph, oj * sw + b - pw
    inside = (ii >= 0) & (ii < h) & (jj >= 0) & (jj < w)  # the rest reads zero padding
    c, oi, oj, a, b, ii, jj = (t[inside] for t in (c, oi, oj, a, b, ii, jj))
    rows = (c * out_h + oi) * out_w + oj  # ascending: the grid is in row order
    n_rows = conv.out_channels * out_h * out_w
    crow = torch.zeros(n_rows + 1, dtype=torch.int32)
    crow[1:] = torch.bincount(rows, minlength=n_rows).cumsum(0)
    values = conv.weight.detach()[c, 0, a, b]
    shape = (n_rows, conv.in_channels * h * w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CSR support is in beta"
        cols = ((c * h + ii) * w + jj).int()
        return torch.sparse_csr_tensor(crow, cols, values, shape), (out_h, out_w)


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
