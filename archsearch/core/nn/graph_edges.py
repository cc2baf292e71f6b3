"""The weighted edges of one neural graph (Discovering Neural Wirings, sections 2.1-2.2).

`GraphEdges` holds w_uv for every pair as a matrix `weight[v, u]` (row = target v, column =
source u), a boolean `admissible` matrix (the block structure of a static graph forbids some
entries) and the current real-edge `mask`. The mask is a persistent buffer: the search method
re-selects it with `select()` after each optimiser step (Algorithm 1, line 5) and a downloaded
model simply uses the saved one. `SparseEdges` is the compact form: an explicit edge list.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from archsearch.core.nn.topk import straight_through, topk_mask, topk_select

GradientTo = Literal["admissible", "real"]


class GraphEdges(nn.Module):
    """Dense edge weights of an N-node graph (or a layer) with a top-k real-edge mask.

    Args:
        admissible: (N, N) bool, admissible[v, u] is True when u -> v may be an edge.
        k: the edge budget of this graph (number of real edges), <= admissible.sum().
        source_gain: 1 / E[Z_u^2] of the source states (2 after a ReLU of a normalised
            input), so that the init keeps E[I_v^2] near 1.
    """

    admissible: torch.Tensor  # buffers, declared for the type checker
    mask: torch.Tensor

    def __init__(self, admissible: torch.Tensor, k: int, source_gain: float = 1.0) -> None:
        super().__init__()
        n_adm = int(admissible.sum())
        assert admissible.dim() == 2, "admissible is a (targets, sources) matrix"
        assert 0 < k <= n_adm, f"edge budget {k} must lie in [1, {n_adm}]"
        self.k = k
        self.n_admissible = n_adm
        self.threshold: float | None = None  # last selection's k-th largest |w| (a search hint)
        self.gradient_to: GradientTo = "admissible"
        self.source_gain = source_gain
        self.register_buffer("admissible", admissible.clone(), persistent=False)
        self.weight = nn.Parameter(
            self._uniform_init(admissible, k, source_gain)
        )  # (N, N) target x source
        self.register_buffer("mask", topk_mask(self.weight.abs(), admissible, k).float())

    @staticmethod
    def _uniform_init(admissible: torch.Tensor, real: int, source_gain: float) -> torch.Tensor:
        # Algorithm 1, line 2: uniform init, one scale for the whole graph, so the top-k of
        # |w| at init is a uniformly random graph (the paper's RG baseline, section 3). The
        # scale is He's for the fan-in a node aggregates over all earlier blocks: the mean
        # real in-degree (real / targets), var(w) = gain / fan-in. A per-node scale would
        # bias the top-k towards nodes with few admissible sources; the normalisation at
        # every node absorbs the remaining per-node differences (section 2.4).
        targets = max(1, int(admissible.any(1).sum()))
        bound = math.sqrt(3.0 * source_gain / max(1.0, real / targets))
        return torch.empty(admissible.shape).uniform_(-bound, bound) * admissible

    @torch.no_grad()
    def reinit_dense(self) -> None:
        """Re-draw the weights for a graph whose every admissible edge is real (dense start)."""
        dense = int(self.admissible.sum())
        self.weight.copy_(self._uniform_init(self.admissible, dense, self.source_gain))

    @property
    def num_nodes(self) -> int:
        assert self.weight.shape[0] == self.weight.shape[1], "a graph's edge matrix is square"
        return int(self.weight.shape[0])

    def matrix(self) -> torch.Tensor:
        """The weighted adjacency used in the forward pass: only real edges are non-zero."""
        gate = self.admissible if self.gradient_to == "admissible" else self.mask
        return straight_through(self.weight, self.mask, gate)  # (N, N)

    @torch.no_grad()
    def select(self, k: int | None = None) -> int:
        """Re-choose the real edges as the top-k admissible |w|; returns how many entered."""
        if k is not None:
            self.k = k
        hint = None if self.threshold is None else 0.99 * self.threshold
        new, threshold = topk_select(
            self.weight.abs(), self.admissible, self.k, hint, self.n_admissible
        )
        if threshold is not None:
            self.threshold = threshold
        real = new.to(self.mask.dtype)  # (N, N) 0/1
        # entered = |new| - |new & old| = k - <new, old>: one dot product, no boolean temporaries.
        entered = self.k - int(torch.dot(real.flatten(), self.mask.flatten()))
        self.mask.copy_(real)
        return entered

    @torch.no_grad()
    def set_mask(self, mask: torch.Tensor) -> None:
        assert not bool((mask & ~self.admissible).any()), "a mask may only hold admissible edges"
        self.k = int(mask.sum())
        self.mask.copy_(mask.float())

    def real(self) -> torch.Tensor:
        return self.mask.bool()  # (N, N)

    def num_real(self) -> int:
        return int(self.mask.sum())


class SparseEdges(nn.Module):
    """The compact form: only the real edges, as (target, source) index lists and weights."""

    targets: torch.Tensor  # buffers, declared for the type checker
    sources: torch.Tensor

    def __init__(self, num_nodes: int, edges: list[tuple[int, int]]) -> None:
        super().__init__()
        index = torch.tensor(edges, dtype=torch.long).reshape(-1, 2)  # (E, 2) target, source
        assert bool((index >= 0).all()) and bool((index < num_nodes).all()), "edge out of range"
        self.n = num_nodes
        self.register_buffer("targets", index[:, 0].contiguous(), persistent=False)
        self.register_buffer("sources", index[:, 1].contiguous(), persistent=False)
        self.weight = nn.Parameter(torch.zeros(len(index)))  # (E,)

    @property
    def num_nodes(self) -> int:
        return self.n

    def matrix(self) -> torch.Tensor:
        dense = self.weight.new_zeros(self.n, self.n)
        return dense.index_put((self.targets, self.sources), self.weight)  # (N, N)

    def real(self) -> torch.Tensor:
        real = torch.zeros(self.n, self.n, dtype=torch.bool, device=self.weight.device)
        real[self.targets, self.sources] = True
        return real

    def num_real(self) -> int:
        return int(self.weight.numel())


Edges = GraphEdges | SparseEdges
