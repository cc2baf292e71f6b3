"""An MLP-style static graph unrolled into a few matrix products (Discovering Neural Wirings,
section 2.1: a static graph's forward pass, each node's state the activation of the
weighted sum of the states of the nodes before it).

`core.deploy.compiled_static` compiles a static graph to one product per destination block;
for an MLP-style classifier at one sample, and in its ONNX export, those products run
unrolled instead: one product from the input nodes to every later node, then (hidden blocks
- 1) rounds of h = act(a + U h) with U block lower triangular, then one output product. At
batch 1 the calls, not the arithmetic, cost most, so fewer and larger products win.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch
from torch import nn


def sparse_if_small(weight: torch.Tensor) -> torch.Tensor:
    """`weight` as CSR with int32 indices when under a quarter of it is nonzero. The input
    product is the largest (every later node's row over all inputs, mostly zero): measured
    on the bench's MLP-style graph (106 x 784, 18% nonzero) at batch 1, 23 us for the whole
    graph against 28 us dense, and 27 against 48 us when other models run in between
    (the dense matrix no longer in cache)."""
    if int((weight != 0).sum()) * 4 >= weight.numel():
        return weight
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CSR support is in beta", as in core.deploy.forms
        csr = weight.to_sparse_csr()
        crow, col = csr.crow_indices().int(), csr.col_indices().int()
        return torch.sparse_csr_tensor(crow, col, csr.values(), csr.shape)


# (input weight (H + n_out, n_0), bias (H + n_out), hidden to hidden (H, H), hidden to
# output (n_out, H), rounds: hidden blocks - 1, -1 if none): H the hidden nodes, all blocks.
UnrolledPlan = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]


def unrolled_plan(layers: Sequence[nn.Linear], sources: list[tuple[int, ...]]) -> UnrolledPlan:
    """The dense products as one matrix over all nodes, split by what it reads: the input
    nodes (one product for every later node), the hidden nodes (block lower triangular U)
    and, for the outputs, the hidden nodes. Hidden states solve h = act(a + U h): h0 =
    act(a) has block 1 right, each round one more block (U sends only to later blocks),
    so blocks - 1 rounds of one product each, instead of one product per block pair or
    per block. The zero blocks of U cost arithmetic, the calls they save cost more (at
    batch 1 in torch and onnxruntime; measured in bench/deploy.py). `layers[j]` reads the
    concatenated states of the blocks `sources[j]` and computes block j + 1."""
    widths = [layers[0].in_features] + [layer.out_features for layer in layers]
    starts = [sum(widths[:k]) for k in range(len(widths) + 1)]
    n_in, total = widths[0], starts[-1]
    full = layers[0].weight.new_zeros(total - n_in, starts[-2])  # rows: every later node
    for j, layer in enumerate(layers):  # product j computes block j + 1
        at = 0
        for i in sources[j]:
            rows = slice(starts[j + 1] - n_in, starts[j + 2] - n_in)
            full[rows, starts[i] : starts[i + 1]] = layer.weight.detach()[:, at : at + widths[i]]
            at += widths[i]
    hidden = starts[-2] - n_in
    bias = torch.cat([layer.bias.detach() for layer in layers])
    u, out = full[:hidden, n_in:].contiguous(), full[hidden:, n_in:].contiguous()
    return full[:, :n_in].contiguous(), bias, u, out, len(layers) - 2


def unrolled_vector(
    plan: UnrolledPlan, act: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor
) -> torch.Tensor:
    """One sample (n_0,) -> (n_out,) by `unrolled_plan`, as GEMVs: no batch dimension."""
    w_in, bias, u, out, rounds = plan
    acc = torch.addmv(bias, w_in, x)
    if rounds < 0:  # no hidden nodes
        return acc
    a, o = acc.split((u.shape[0], out.shape[0]))  # type: ignore[no-untyped-call]
    h = act(a)
    for _ in range(rounds):
        h = act(torch.addmv(a, u, h))
    return torch.addmv(o, out, h)


def unrolled_batch(
    plan: tuple[torch.Tensor, ...],
    rounds: int,
    act: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
) -> torch.Tensor:
    """(B, n_0) -> (B, n_out) by `unrolled_plan` transposed, its input product in two (see
    `build_plan`): in ONNX a Gemm per product, each hidden one followed by the activation
    (onnxruntime fuses Gemm and Relu)."""
    in_hidden, in_out, bias_hidden, bias_out, u, out = plan
    o = torch.addmm(bias_out, x, in_out)
    if rounds < 0:  # no hidden nodes
        return o
    a = torch.addmm(bias_hidden, x, in_hidden)
    h = act(a)
    for _ in range(rounds):
        h = act(torch.addmm(a, h, u))
    return torch.addmm(o, h, out)
