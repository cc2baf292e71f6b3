"""A discrete-time graph's compiled form: one node op and one matrix product per step
(Discovering Neural Wirings, eq. 11).

A discrete-time graph gets one product per step, over only the nodes the result is read
from: at the last step the output nodes, at step l the sources of the nodes step l + 1
needs (`needed_per_step`). Nodes other than the inputs start at 0, so their first op output
is a constant, folded into the first step's bias; a batch norm of the steps folds into the
rows before it (`core.deploy.norm_folding`). One sample runs one `addmv` per step (CSR where
that product's chosen form is sparse). The products and node ops are the layers of
`core.deploy.graph_layers`, the node ops built as a static graph's (`node_op`, in
`core.deploy.compiled_static`); `core.deploy.compiled_graph` compiles a whole model with it.
Continuous-time graphs (an ODE solver's steps depend on the input) are not compiled.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from archsearch.core.deploy.compiled_static import node_op
from archsearch.core.deploy.graph_layers import NodeOp, Piece, Products
from archsearch.core.deploy.norm_folding import fold_step_norms, input_scale_to_columns
from archsearch.core.deploy.one_sample import tracing
from archsearch.core.nn.neural_graph import ACTIVATIONS, DynamicGraph, NodeOps


def needed_per_step(a: torch.Tensor, n_out: int, steps: int) -> list[torch.Tensor]:
    """Node indices whose state at step l (0..steps) is read by the outputs at the end."""
    n = a.shape[0]
    needed = [torch.arange(n - n_out, n)]
    for _ in range(steps):
        sources = (a[needed[0]] != 0).any(0).nonzero().flatten()
        needed.insert(0, sources if len(sources) else needed[0][:1])  # keep the step defined
    return needed


class CompiledDynamicGraph(nn.Module):
    """A discrete-time graph (eq. 11, eval mode) as one node op and one product per step,
    each over only the nodes its result is read from."""

    def __init__(self, graph: DynamicGraph) -> None:
        super().__init__()
        assert graph.time == "discrete", "an ODE solver's steps depend on the input"
        ops, n_in = graph.dynamics.ops, graph.n_in
        self.spatial = ops.spec.kind == "conv"
        self.norm = ops.spec.effective_norm
        self.activation = ops.spec.activation if not self.spatial else "relu"
        a = graph.edges.matrix().detach()  # (N, N), built once
        needed = needed_per_step(a, graph.n_out, graph.steps)
        node_ops = [node_op(ops, torch.arange(n_in), False)]
        bias = self._start_constants(ops, a[needed[1]], needed[0][needed[0] >= n_in], graph.hw)
        pieces: list[Piece] = [((0,), a[needed[1]][:, :n_in], bias)]
        for step in range(2, graph.steps + 1):
            node_ops.append(node_op(ops, needed[step - 1], self.fold))
            weight = a[needed[step]][:, needed[step - 1]]
            pieces.append(((0,), weight, weight.new_zeros(len(weight), 1, 1)))
        if self.fold:
            fold_step_norms(ops, pieces, needed)
        if not self.spatial:
            input_scale_to_columns(node_ops[0], pieces)
        self.node_ops = nn.ModuleList(node_ops)
        self.products = Products(pieces, self.spatial)
        self._act = self.act  # a plain function, looked up once

    @property
    def fold(self) -> bool:
        """Whether the node ops' norm is a batch norm (affine in eval mode): MLP-style."""
        return self.norm == "batch"

    @property
    def act(self) -> Callable[[torch.Tensor], torch.Tensor]:
        # torch.relu skips F.relu's Python wrapper: at batch 1 every call counts.
        return torch.relu if self.activation == "relu" else ACTIVATIONS[self.activation]

    def _start_constants(
        self, ops: NodeOps, rows: torch.Tensor, constant: torch.Tensor, hw: tuple[int, int]
    ) -> torch.Tensor:
        """Step 1's bias: what nodes that start at 0 send, op(0), a constant per node."""
        if len(constant) == 0:
            return rows.new_zeros(len(rows), 1, 1)
        op = node_op(ops, constant, False).eval()
        zeros = rows.new_zeros(1, len(constant), *(hw if self.spatial else ()))
        sent: torch.Tensor = op(zeros)[0].reshape(len(constant), -1)  # (k, H * W)
        bias = rows[:, constant] @ sent  # (n, H * W)
        return bias.reshape(len(rows), *(hw if self.spatial else (1, 1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, n_in, H, W) -> (B, n_out, H, W), the output nodes after the last step."""
        if not self.spatial:
            return self.forward_flat(x.flatten(1))[:, :, None, None]
        s = x
        for j, op in enumerate(self.node_ops):
            s = self.products.run(j, [op(s)])
        return s

    def forward_flat(self, x: torch.Tensor) -> torch.Tensor:
        """MLP-style: (B, n_in) -> (B, n_out); after the first step's op (the input nodes'
        norm and activation) every op is the activation alone (its norm folded)."""
        act = self.act
        if x.shape[0] == 1 and self.norm != "instance" and not tracing():
            return self.forward_vector(x[0])[None]
        s = self.products.run(0, [self.node_ops[0](x)])
        for j in range(1, len(self.node_ops)):
            s = self.products.run(j, [act(s) if self.fold else self.node_ops[j](s)])
        return s

    def forward_vector(self, x: torch.Tensor) -> torch.Tensor:
        """One sample (n_in,) -> (n_out,): one `addmv` per step (CSR where the product's
        chosen batch-1 form is sparse), without module calls, which cost as much as a
        step's product at batch 1 (measured in bench/deploy.py, graph_discrete row)."""
        act, forms = self._act, self.products.vector_forms()
        norm_kind, scale, shift = self._input_norm or self.input_norm()
        if norm_kind == "affine":  # the input nodes' batch norm: one fused op
            x = torch.addcmul(shift, x, scale)
        elif norm_kind == "shift":
            x = x + shift
        s = act(x)  # the input nodes' activation is the graph's (MLP-style node ops)
        for j, (matrix, bias) in enumerate(forms):
            s = torch.addmv(bias, matrix, s if j == 0 else act(s))
        return s

    _input_norm: tuple[str, torch.Tensor, torch.Tensor] | None = None

    def input_norm(self) -> tuple[str, torch.Tensor, torch.Tensor]:
        """The input nodes' norm kind and its (scale, shift) buffers (empty if none), kept
        for `forward_vector` (the buffers themselves: their in-place changes show)."""
        first = self.node_ops[0]
        assert isinstance(first, NodeOp), "the input nodes' op"
        none = torch.empty(0)
        kind = first.norm_kind
        norm = (kind, first.norm_weight, first.norm_bias) if kind != "none" else (kind, none, none)
        self._input_norm = norm
        return norm
