"""Edge-selection strategies of Discovering Neural Wirings and its comparison set (section 3.3).

An `EdgeController` plugs a strategy into the shared training loop through `TrainHooks`:
it re-selects the real edges after every optimiser step (Algorithm 1, line 5, for the next
forward pass), counts the edges that entered and left the real set (swaps), adds the L1 term
of `l1_anneal` and draws the targeted-dropout masks.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.nn.graph_edges import GraphEdges
from archsearch.core.nn.neural_graph import model_graphs
from archsearch.core.nn.topk import topk_mask
from archsearch.core.training import TrainHooks
from archsearch.specs.search import SearchSpec

SELECTING = ("dnw", "no_update")  # top-k of |w| recomputed after every step


def searchable_edges(model: nn.Module) -> list[GraphEdges]:
    """Every top-k edge set of a model: one per graph, plus the FC of a "-Small" model."""
    layers = [g.edges for g in model_graphs(model) if isinstance(g.edges, GraphEdges)]
    fc_edges = getattr(model.fc, "edges", None)
    return layers + ([fc_edges] if isinstance(fc_edges, GraphEdges) else [])


def anneal_k(k_final: int, k_start: int, progress: float) -> int:
    """Cubic annealing of the budget from k_start (dense) to k_final (Zhu & Gupta)."""
    remaining = (1.0 - min(1.0, max(0.0, progress))) ** 3
    return k_final + round((k_start - k_final) * remaining)


class EdgeController:
    """Runs one strategy's edge selection around `fit`.

    Args:
        model: a neural-graph model; its budgets are read at construction (config k).
        spec: the search spec.
        phase: "search" (single-phase strategies), "dense" or "sparse" (lottery / fine_tune).
        total_steps: optimiser steps of this phase (for l1_anneal's schedule).
    """

    def __init__(
        self, model: nn.Module, spec: SearchSpec, phase: str, total_steps: int, budgets: list[int]
    ) -> None:
        self.layers = searchable_edges(model)
        self.budgets = budgets
        self.spec, self.phase, self.total_steps = spec, phase, total_steps
        self.entered = self.left = self.steps = 0
        self.dense_phase = phase == "dense" or spec.strategy in (
            "complete",
            "l1_anneal",
            "targeted_dropout",
        )

    def setup(self) -> None:
        """Initial masks and gradient routing of the phase (not on resume: masks are state)."""
        strategy = self.spec.strategy
        for layer, k in zip(self.layers, self.budgets, strict=True):
            layer.gradient_to = (
                "admissible" if strategy == "dnw" and self.phase == "search" else "real"
            )
            if self.dense_phase:
                layer.reinit_dense()  # init scaled to the dense in-degree
                layer.set_mask(layer.admissible)
            elif self.phase == "sparse":
                layer.select(k)  # keep the top-k of the dense weights, fixed from now on
            else:
                layer.k = k

    def hooks(self) -> TrainHooks:
        loss = (
            self._l1_loss if self.spec.strategy == "l1_anneal" and self.phase == "search" else None
        )
        hooks = TrainHooks(after_step=self.after_step, after_epoch=self.after_epoch)
        if loss is not None:
            hooks.loss = loss
        return hooks

    def _l1_loss(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        l1 = sum((layer.weight * layer.mask).abs().sum() for layer in self.layers)
        return F.cross_entropy(model(x), y) + self.spec.l1 * l1

    @torch.no_grad()
    def after_step(self, step: int) -> dict[str, float] | None:
        strategy = self.spec.strategy
        self.steps += 1
        if self.phase != "search":
            return None
        if strategy in SELECTING:
            for layer in self.layers:
                entered = layer.select()
                self.entered, self.left = self.entered + entered, self.left + entered
        elif strategy == "l1_anneal":
            self._anneal(step)
        elif strategy == "targeted_dropout":
            self._targeted_dropout()
        return None

    def _anneal(self, step: int) -> None:
        progress = (step + 1) / max(1.0, self.spec.anneal_fraction * self.total_steps)
        for layer, k in zip(self.layers, self.budgets, strict=True):
            before = layer.num_real()
            entered = layer.select(anneal_k(k, int(layer.admissible.sum()), progress))
            layer.weight.mul_(layer.mask)  # pruned edges are gone for good
            self.entered += entered
            self.left += entered + before - layer.k

    def _targeted_dropout(self) -> None:
        # Unconstrained targeted weight dropout (Appendix B): the bottom (1 - k/admissible)
        # of all edges by |w| is dropped with probability rho at each step.
        for layer, k in zip(self.layers, self.budgets, strict=True):
            keep = layer.admissible.clone()
            candidates = layer.admissible & ~topk_mask(layer.weight.abs(), layer.admissible, k)
            keep &= ~(
                candidates & (torch.rand(keep.shape, device=keep.device) < self.spec.drop_rate)
            )
            layer.set_mask(keep)

    def after_epoch(self, epoch: int) -> dict[str, float]:
        row = {
            "edges_entered": float(self.entered),
            "edges_left": float(self.left),
            "swaps_per_step": self.entered / max(1, self.steps),
            "real_edges": float(sum(layer.num_real() for layer in self.layers)),
        }
        self.entered = self.left = self.steps = 0
        return row

    def finish(self) -> bool:
        """Final real edges: exactly the budgets (targeted dropout prunes to top-k here).

        Returns whether a mask changed: if not, the model is the one the training loop
        evaluated last, and its test metrics can be reused.
        """
        changed = False
        for layer, k in zip(self.layers, self.budgets, strict=True):
            if self.spec.strategy == "targeted_dropout" or self.spec.strategy in SELECTING:
                before = layer.mask.clone()
                layer.select(k)
                changed = changed or not torch.equal(before, layer.mask)
            if self.spec.strategy != "complete":
                assert layer.num_real() == k, f"{layer.num_real()} real edges, budget {k}"
        return changed

    def state(self) -> dict[str, Any]:
        return {"budgets": list(self.budgets)}
