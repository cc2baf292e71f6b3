"""A static graph's compiled form: one matrix product per destination block and the node ops
(Discovering Neural Wirings, sections 2.1 and 2.4).

A compact `StaticGraph` (dead nodes removed and input-independent ones folded into offsets by
`core.search.compact`) still runs the way it is searched: every call rebuilds the N x N edge
matrix from the edge list and sends each block's states to all later blocks through it. Its
compiled form (`CompiledStaticGraph`), built once from the eval-mode graph:
- one product per destination block: its kept in-edges, the block pairs that hold an edge
  stacked column-wise, applied to the concatenated states of those source blocks (block
  pairs without an edge are left out). An `nn.Linear` for MLP-style nodes, a 1x1
  `nn.Conv2d` for conv nodes. One call per destination instead of one per block pair: at
  batch 1 the calls, not the arithmetic, cost most. The Linear products are ordinary layers,
  so `core.deploy.forms` times each one dense against int32 CSR and keeps the faster form
  per batch regime, and `model.onnx` stores mostly-zero products as sparse initializers.
- batch norm in eval mode (an affine map per node) folded into the product that feeds it:
  rows scaled, a bias added; the MLP-style input nodes' norm folded into the columns that
  read them (the tensor folds in `core.deploy.norm_folding`). The compact model's offsets
  become the bias (a per-node map where padding makes them vary across positions).
- after the product, the rest of the node op: instance norm (it depends on the sample, so it
  stays an op), the activation, the 3x3 depthwise conv (these layers: `core.deploy.graph_layers`).
- MLP-style nodes: one sample, and the ONNX export, run the graph unrolled
  (`core.deploy.unrolled`, the plan built by `build_plan`): one product from the input
  nodes to every later node, then blocks - 1 rounds of h = act(a + U h) over all hidden
  nodes, one output product.
For one sample on the small maps of a conv graph, the 1x1 products run as `addmm` over the
(channels, positions) states and small depthwise convs as CSR matrix-vector products
(`DepthwiseConv`): oneDNN's per-call set-up costs more than the arithmetic there, and
nn.Module's per-call machinery about as much as a small op, so the one-sample paths call
the ops themselves. Hidden conv blocks are padded with zero channels to a multiple of 8,
and the ONNX export sums one 1x1 Conv per source block instead of concatenating:
onnxruntime then keeps the whole graph in its NCHWc layout.
`core.deploy.compiled_graph` compiles a whole model with it (its head and the conv graphs'
input norms folded in there).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.deploy.graph_layers import NodeOp, NormRecord, Piece, Products
from archsearch.core.deploy.norm_folding import batch_affine, fold_rows
from archsearch.core.deploy.one_sample import GraphLinear, tracing
from archsearch.core.deploy.unrolled import (
    UnrolledPlan,
    sparse_if_small,
    unrolled_batch,
    unrolled_plan,
    unrolled_vector,
)
from archsearch.core.nn.neural_graph import ACTIVATIONS, NodeOps, StaticGraph


def _norm_record(ops: NodeOps, index: torch.Tensor) -> NormRecord:
    """The unfolded norm of the nodes `index` (batch norm as an affine map)."""
    norm = ops.spec.effective_norm
    if norm == "none":
        return None
    if norm == "instance":
        return ("instance", ops.norm_weight[index], ops.norm_bias[index])
    scale, shift = batch_affine(ops, 0, ops.n)
    return ("affine", scale[index], shift[index])


def node_op(ops: NodeOps, index: torch.Tensor, fold_norm: bool, stride: int = 1) -> NodeOp:
    """The node op after the product of nodes `index` (without its norm where that is folded
    into the product); the discrete-time graph's steps (`core.deploy.compiled_dynamic`) too."""
    spec = ops.spec
    norm = None if fold_norm else _norm_record(ops, index)
    kernel = ops.conv_weight[index].detach() if spec.kind == "conv" else None
    return NodeOp(spec.activation if spec.kind == "act" else "relu", norm, kernel, stride)


def _static_weight(
    graph: StaticGraph, w: torch.Tensor, j: int
) -> tuple[tuple[int, ...], torch.Tensor, torch.Tensor]:
    """Destination block j's source blocks, stacked in-edge weights and bias (n_j, H, W)."""
    s = graph.starts
    rows = w[s[j] : s[j + 1]]  # (n_j, N)
    sources = tuple(i for i in range(j) if bool(rows[:, s[i] : s[i + 1]].any())) or (0,)
    weight = torch.cat([rows[:, s[i] : s[i + 1]] for i in sources], dim=1)
    n = s[j + 1] - s[j]
    offsets = graph.offsets
    bias = offsets[s[j] : s[j + 1]] if offsets is not None else w.new_zeros(n, 1, 1)
    if (
        graph.ops.spec.kind == "act"
        and sources[0] == 0
        and graph.ops.spec.effective_norm == "batch"
    ):
        # MLP-style input nodes apply only their norm: W (a x + c) = (W a) x + W c.
        scale, shift = batch_affine(graph.ops, 0, s[1])
        head = weight[:, : s[1]]
        bias = bias + (head @ shift)[:, None, None]
        weight = torch.cat([head * scale, weight[:, s[1] :]], dim=1)
    return sources, weight, bias


CHANNEL_MULTIPLE = 8


def _pad_hidden_blocks(ops: list[nn.Module], pieces: list[Piece], widths: list[int]) -> None:
    """Pad each hidden conv block with zero channels (zero rows in the product computing it,
    zero columns where it is read, a zero kernel) to a multiple of 8: onnxruntime runs such
    convs in its blocked NCHWc layout, others in a generic kernel (measured on a 31-channel
    7x7 depthwise conv: 16 us, against 3 us for its 32-channel neighbours)."""
    for j in range(1, len(pieces)):  # pieces[j - 1] computes hidden block j
        pad = -widths[j] % CHANNEL_MULTIPLE
        op = ops[j]
        if pad == 0 or not isinstance(op, NodeOp):
            continue
        sources, weight, bias = pieces[j - 1]
        pieces[j - 1] = (sources, F.pad(weight, (0, 0, 0, pad)), F.pad(bias, (0, 0, 0, 0, 0, pad)))
        for k in range(j, len(pieces)):
            sources, weight, bias = pieces[k]
            if j in sources:
                end = sum(widths[i] for i in sources[: sources.index(j) + 1])
                zeros = weight.new_zeros(len(weight), pad)
                pieces[k] = (sources, torch.cat([weight[:, :end], zeros, weight[:, end:]], 1), bias)
        op.pad_channels(pad)
        widths[j] += pad


class CompiledStaticGraph(nn.Module):
    """A static graph (eval mode) as one product per destination block and the node ops;
    same input and output as the graph it was compiled from."""

    def __init__(self, graph: StaticGraph) -> None:
        super().__init__()
        spec, s, last = graph.ops.spec, graph.starts, len(graph.blocks) - 1
        self.spatial = spec.kind == "conv"
        # MLP-style nodes after a folded norm apply only their activation: no module call.
        self.activation = spec.activation if not self.spatial else ""
        w = graph.edges.matrix().detach()  # (N, N), built once
        fold = spec.effective_norm == "batch"
        ops: list[nn.Module] = [node_op(graph.ops, torch.arange(s[1]), False, graph.input_stride)]
        pieces = []
        for j in range(1, last + 1):
            sources, weight, bias = _static_weight(graph, w, j)
            if j < last:
                if fold:
                    weight, bias = fold_rows(graph.ops, s[j], s[j + 1], weight, bias)
                ops.append(node_op(graph.ops, torch.arange(s[j], s[j + 1]), fold))
            pieces.append((sources, weight, bias))
        widths = [s[i + 1] - s[i] for i in range(last + 1)]
        if self.spatial:
            _pad_hidden_blocks(ops, pieces, widths)  # widths padded too
        self.node_ops = nn.ModuleList(ops if self.spatial else [])
        self.products = Products(pieces, self.spatial)
        self.products.widths = widths if self.spatial else []
        # What the products are now, read per call without nn.Module's attribute lookup.
        self._layer_slots = self.products.layers._modules

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, n_0, H, W) input-node states -> (B, n_out, H', W')."""
        if not self.spatial:
            return self.forward_flat(x.flatten(1))[:, :, None, None]
        if x.shape[0] == 1 and not tracing():
            return self.forward_one(x)
        states = [self.node_ops[0](x)]
        last = len(self.products.layers) - 1
        for j in range(last):
            states.append(self.node_ops[j + 1](self.products.run(j, states)))
        return self.products.run(last, states)

    def forward_one(self, x: torch.Tensor) -> torch.Tensor:
        """Conv nodes, one sample: `forward`'s ops, each product one `addmm` over the
        (channels, positions) states and each node op's `forward` called directly. At
        batch 1 nn.Module's per-call machinery (hooks, scopes) costs about as much as a
        small op; measured in bench/deploy.py (graph_conv row)."""
        ops = [op.forward for op in self.node_ops]
        products = self.products
        states = [ops[0](x)]
        for j in range(len(ops) - 1):
            states.append(ops[j + 1](products.run_one(j, states)))
        return products.run_one(len(ops) - 1, states)

    def forward_flat(self, x: torch.Tensor) -> torch.Tensor:
        """MLP-style: (B, n_0) -> (B, n_out); the input nodes' norm is in the products."""
        act = self.act
        if tuple(self._layer_slots.values()) == self._plan_layers:  # the plan is current
            if tracing():  # the export: the transposed buffers, stored as initializers
                names = ("in_hidden", "in_out", "bias_hidden", "bias_out", "u", "out")
                plan = tuple(getattr(self, f"plan_{name}") for name in names)
                return unrolled_batch(plan, self._plan[4], act, x)
            if x.shape[0] == 1:
                return unrolled_vector(self.vector_plan(), act, x[0])[None]
        run = self.products.run
        states = [x]
        last = len(self.products.layers) - 1
        for j in range(last):
            states.append(act(run(j, states)))
        return run(last, states)

    @property
    def act(self) -> Callable[[torch.Tensor], torch.Tensor]:
        # torch.relu skips F.relu's Python wrapper: at batch 1 every call counts.
        return torch.relu if self.activation == "relu" else ACTIVATIONS[self.activation]

    _plan_layers: tuple[nn.Module | None, ...] = ()  # set by `build_plan`

    def build_plan(self) -> None:
        """Build the unrolled plan from the final (dense) products, used while they are the
        products (a sparse form chosen per batch regime replaces them, and runs itself).
        The export reads it transposed (x @ W: Gemm without a transpose the exporter would
        fold into a constant) from buffers, stored as initializers, not in the state dict;
        the input product in two, the hidden rows (mostly zero: stored sparse) and the
        output rows (dense once the head is folded in)."""
        layers = tuple(self._layer_slots.values())
        if self.spatial or not all(isinstance(layer, GraphLinear) for layer in layers):
            return
        linears = [layer for layer in layers if isinstance(layer, GraphLinear)]
        plan = unrolled_plan(linears, self.products.sources)
        w_in, bias, u, out, _ = plan
        hidden = len(u)
        export = {
            "in_hidden": w_in[:hidden].t(),
            "in_out": w_in[hidden:].t(),
            "bias_hidden": bias[:hidden],
            "bias_out": bias[hidden:],
            "u": u.t(),
            "out": out.t(),
        }
        for name, tensor in export.items():
            self.register_buffer(f"plan_{name}", tensor.contiguous(), persistent=False)
        self._plan = plan
        self._plan_layers = layers

    _vector_plan: UnrolledPlan | None = None

    def vector_plan(self) -> UnrolledPlan:
        """The plan for one sample: its input product sparse if mostly zero (built at the
        first call: a sparse tensor cannot be deep-copied, as `core.deploy.forms` does)."""
        if self._vector_plan is None:
            self._vector_plan = (sparse_if_small(self._plan[0]), *self._plan[1:])
        return self._vector_plan

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_vector_plan": None}  # a copy builds its own
