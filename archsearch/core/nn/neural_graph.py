"""Static, discrete-time and continuous-time neural graphs (Discovering Neural Wirings).

- Static (section 2.1, 2.4, eq. 1-2): nodes are partitioned into blocks; edges only go from
  an earlier block to a later one. Every non-output node applies its op to its input
  I_v = sum_u w_uv Z_u: batch/instance norm, ReLU, 3x3 depthwise conv (one channel per
  node; stride on the input nodes of a downsampling stage), or, for MLP-style graphs,
  batch norm and an activation (section 2.4's node op without the conv: without the norm a
  deep chain of unnormalised sums diverges at the paper's SGD lr 0.1). Output nodes apply
  nothing.
- Discrete time (eq. 11-12): S(l+1) = A conv(relu(norm(S(l)))) for `steps` steps, any edge
  (cycles and self-loops) admissible; the first nodes receive g(X) at l = 0.
- Continuous time (eq. 13): dS/dt = A conv(relu(norm(S(t)))) solved with torchdiffeq
  (dopri5 by default; the adjoint method saves memory).

Node states are 4-d (B, nodes, H, W); MLP-style graphs use H = W = 1. The per-node
parameters live in one `NodeOps` per graph and are sliced per block, so dead nodes are
removed from a compact model by indexing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.nn.graph_edges import Edges

NodeOp = Literal["conv", "act"]
Norm = Literal["instance", "batch", "none"]


@dataclass(frozen=True)
class OpSpec:
    """What each node computes: `conv` (norm, ReLU, 3x3 depthwise conv) or `act` (norm,
    activation). `act` nodes normalise over the batch: their states are 1x1, and an instance
    norm of a single value is zero. `none` leaves eq. 1's bare f (for checks by hand)."""

    kind: NodeOp = "conv"
    norm: Norm = "instance"
    activation: str = "relu"

    @property
    def effective_norm(self) -> Norm:
        return "batch" if self.kind == "act" and self.norm == "instance" else self.norm

    @property
    def source_gain(self) -> float:
        """E[Z_u^2] ratio to undo in the edge init: a ReLU after a norm halves it; the
        conv op's kaiming init (gain 2) restores it."""
        return 2.0 if self.kind == "act" and self.activation == "relu" else 1.0


def mix(z: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Send node states along edges: out_v = sum_u weight[v, u] z_u (a 1x1 convolution)."""
    return F.conv2d(z, weight[:, :, None, None])  # (B, targets, H, W)


class NodeOps(nn.Module):
    """Per-node parameters of `n` nodes: norm affine (+ running stats) and a 3x3 kernel."""

    running_mean: torch.Tensor  # buffers (batch norm only), declared for the type checker
    running_var: torch.Tensor

    def __init__(self, n: int, spec: OpSpec) -> None:
        super().__init__()
        self.spec = spec
        self.n = n
        if spec.effective_norm != "none":
            self.norm_weight = nn.Parameter(torch.ones(n))
            self.norm_bias = nn.Parameter(torch.zeros(n))
        if spec.effective_norm == "batch":
            self.register_buffer("running_mean", torch.zeros(n))
            self.register_buffer("running_var", torch.ones(n))
        if spec.kind == "conv":
            # One 3x3 kernel per node; kaiming-normal for a depthwise (fan_in = 9) conv.
            self.conv_weight = nn.Parameter(torch.randn(n, 1, 3, 3) * (2.0 / 9.0) ** 0.5)

    def norm(self, x: torch.Tensor, a: int, b: int) -> torch.Tensor:
        if self.spec.effective_norm == "none":
            return x
        weight, bias = self.norm_weight[a:b], self.norm_bias[a:b]
        if self.spec.effective_norm == "instance":
            return F.instance_norm(x, weight=weight, bias=bias)
        # Slices of the running buffers are views: batch_norm updates them in place.
        return F.batch_norm(
            x, self.running_mean[a:b], self.running_var[a:b], weight, bias, self.training, 0.1, 1e-5
        )

    def act(self, x: torch.Tensor) -> torch.Tensor:
        name = self.spec.activation if self.spec.kind == "act" else "relu"
        return _ACTS[name](x)

    def conv(self, x: torch.Tensor, a: int, b: int, stride: int = 1) -> torch.Tensor:
        if self.spec.kind != "conv":
            return x
        return F.conv2d(x, self.conv_weight[a:b], stride=stride, padding=1, groups=b - a)

    def macs_per_position(self, nodes: int) -> int:
        return 9 * nodes if self.spec.kind == "conv" else 0


_ACTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "selu": F.selu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
    "elu": F.elu,
    "identity": lambda x: x,
}
ACTIVATIONS = _ACTS  # by name, as node ops apply them


class StaticGraph(nn.Module):
    """A DAG over blocks of nodes; block 0 holds the input nodes, the last the output nodes.

    Args:
        blocks: node count per block.
        edges: `GraphEdges` (search) or `SparseEdges` (compact) over sum(blocks) nodes.
        op: the node operation.
        input_stride: stride of the input nodes' 3x3 conv (2 in a downsampling stage).
        offsets_shape: (H, W) to add a constant per-node input (compact models fold the
            contribution of removed, input-independent nodes into it); None for none.
    """

    offsets: torch.Tensor | None  # a buffer when `offsets_shape` is given

    def __init__(
        self,
        blocks: tuple[int, ...],
        edges: Edges,
        op: OpSpec,
        input_stride: int = 1,
        offsets_shape: tuple[int, int] | None = None,
    ) -> None:
        super().__init__()
        assert len(blocks) >= 2 and all(b >= 1 for b in blocks), f"bad blocks {blocks}"
        self.blocks = tuple(blocks)
        self.starts = [sum(blocks[:i]) for i in range(len(blocks) + 1)]
        assert edges.num_nodes == self.starts[-1], "edges and blocks disagree on the node count"
        self.edges = edges
        self.ops = NodeOps(self.starts[-1] - blocks[-1], op)  # output nodes have no op
        self.input_stride = input_stride
        self.record_states = False
        self.states: torch.Tensor | None = None
        self.hw = (1, 1)
        if offsets_shape is not None:
            self.register_buffer("offsets", torch.zeros(self.starts[-1], *offsets_shape))
        else:
            self.offsets = None

    def node_output(self, i: int, x: torch.Tensor) -> torch.Tensor:
        a, b = self.starts[i], self.starts[i + 1]
        if i == 0 and self.ops.spec.kind == "act":
            # MLP-style input nodes carry g(X) (eq. 1), here a per-feature normalisation.
            return self.ops.norm(x, a, b)
        h = self.ops.act(self.ops.norm(x, a, b))
        return self.ops.conv(h, a, b, self.input_stride if i == 0 else 1)  # (B, n_i, H, W)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, blocks[0], H, W) input-node states -> (B, blocks[-1], H', W') outputs."""
        assert x.shape[1] == self.blocks[0], f"expected {self.blocks[0]} input nodes"
        w = self.edges.matrix()  # (N, N)
        acc: list[torch.Tensor | None] = [None] * len(self.blocks)
        states = []
        for i in range(len(self.blocks) - 1):
            inp = x if i == 0 else acc[i]
            assert inp is not None, "every block is fed by block 0"
            z = self.node_output(i, inp)
            states.append(z)
            b = self.starts[i + 1]
            out = mix(z, w[b:, self.starts[i] : b])  # (B, N - b, H, W)
            pieces = torch.split(out, list(self.blocks[i + 1 :]), dim=1)
            for j, piece in enumerate(pieces, start=i + 1):
                prev = acc[j] if acc[j] is not None else self._offset(j)
                acc[j] = piece if prev is None else prev + piece
        self.hw = tuple(states[0].shape[2:])  # type: ignore[assignment]
        if self.record_states:
            self.states = torch.cat(states, dim=1).detach()  # (B, N - n_out, H, W)
        result = acc[-1]
        assert result is not None
        return result

    def _offset(self, j: int) -> torch.Tensor | None:
        if self.offsets is None:
            return None
        return self.offsets[self.starts[j] : self.starts[j + 1]].unsqueeze(0)  # (1, n_j, H, W)

    def macs(self) -> int:
        """Multiply-adds per sample: real edges and node convs at the graph's resolution."""
        positions = self.hw[0] * self.hw[1]
        return positions * (self.edges.num_real() + self.ops.macs_per_position(self.ops.n))


class _Dynamics(nn.Module):
    """f(S) = A conv(relu(norm(S))) (conv nodes) or A act(norm(S)) (MLP-style nodes).

    Each node applies the static graph's op (norm, ReLU, conv) to its state before sending
    it along the edges, so the states read at the end are not normalised: a global average
    pool of an instance-normalised map would be the constant bias and carry no information.
    """

    def __init__(self, edges: Edges, op: OpSpec) -> None:
        super().__init__()
        self.edges = edges
        self.ops = NodeOps(edges.num_nodes, op)
        self.evaluations = 0

    def forward(self, t: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        self.evaluations += 1
        n = self.ops.n
        h = self.ops.conv(self.ops.act(self.ops.norm(s, 0, n)), 0, n)
        return mix(h, self.edges.matrix())  # (B, N, H, W)


class DynamicGraph(nn.Module):
    """Discrete-time (eq. 11) or continuous-time (eq. 13) neural graph.

    The first `n_in` nodes receive the input at time 0 (the others start at 0, eq. 10); the
    last `n_out` nodes are read at the end.
    """

    def __init__(
        self,
        edges: Edges,
        op: OpSpec,
        n_in: int,
        n_out: int,
        *,
        time: Literal["discrete", "continuous"] = "discrete",
        steps: int = 3,
        ode_method: str = "dopri5",
        ode_tol: float = 1e-3,
        adjoint: bool = False,
        t_end: float = 1.0,
    ) -> None:
        super().__init__()
        assert n_in + n_out <= edges.num_nodes, "input and output nodes must not overlap"
        self.dynamics = _Dynamics(edges, op)
        self.n_in, self.n_out, self.time, self.steps = n_in, n_out, time, steps
        self.ode_method, self.ode_tol, self.adjoint, self.t_end = (
            ode_method,
            ode_tol,
            adjoint,
            t_end,
        )
        self.hw = (1, 1)
        self.last_evaluations = 0

    @property
    def edges(self) -> Edges:
        return self.dynamics.edges

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, n_in, H, W) -> (B, n_out, H, W) states of the output nodes at the end."""
        assert x.shape[1] == self.n_in, f"expected {self.n_in} input nodes"
        rest = x.new_zeros(x.shape[0], self.edges.num_nodes - self.n_in, *x.shape[2:])
        s = torch.cat([x, rest], dim=1)  # (B, N, H, W), eq. 10
        self.hw = tuple(x.shape[2:])  # type: ignore[assignment]
        self.dynamics.evaluations = 0
        if self.time == "discrete":
            for step in range(self.steps):
                s = self.dynamics(torch.tensor(float(step)), s)
        else:
            s = self._solve(s)
        self.last_evaluations = self.dynamics.evaluations
        return s[:, -self.n_out :]

    def _solve(self, s: torch.Tensor) -> torch.Tensor:
        from torchdiffeq import odeint, odeint_adjoint

        times = torch.tensor([0.0, self.t_end], dtype=s.dtype, device=s.device)
        solve = odeint_adjoint if self.adjoint else odeint
        out = solve(
            self.dynamics, s, times, rtol=self.ode_tol, atol=self.ode_tol, method=self.ode_method
        )
        final: torch.Tensor = out[-1]
        return final

    def macs(self) -> int:
        """Multiply-adds per sample of one evaluation of f, times the discrete steps.

        For continuous time the cost is per evaluation of f (an adaptive solver's number of
        evaluations varies with the input; multiply by `last_evaluations` for a run).
        """
        positions = self.hw[0] * self.hw[1]
        per_eval = positions * (
            self.edges.num_real() + self.dynamics.ops.macs_per_position(self.dynamics.ops.n)
        )
        return per_eval * (self.steps if self.time == "discrete" else 1)


def block_admissible(blocks: tuple[int, ...]) -> torch.Tensor:
    """(N, N) bool: u -> v admissible iff block(u) < block(v) (section 2.4)."""
    block_of = torch.repeat_interleave(torch.arange(len(blocks)), torch.tensor(blocks))  # (N,)
    return block_of[:, None] > block_of[None, :]  # [target, source]


def conv_out(size: int, stride: int) -> int:
    """Spatial size after a 3x3 conv with padding 1."""
    return (size - 1) // stride + 1


def model_graphs(model: nn.Module) -> list[StaticGraph | DynamicGraph]:
    """The neural graphs of a DNW model (its `graphs` list), typed."""
    graphs = list(model.get_submodule("graphs").children())
    typed = [g for g in graphs if isinstance(g, StaticGraph | DynamicGraph)]
    assert len(typed) == len(graphs), "a DNW model's `graphs` holds only neural graphs"
    return typed


Graph = StaticGraph | DynamicGraph
