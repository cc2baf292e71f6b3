"""Compaction of fully connected chains against the rules applied the plain way.

`compact_chain` keeps counts of each unit's nonzero inputs and outputs instead of rescanning
the matrices after every removal; the reference below rescans, removing the first removable
unit of each layer in turn. Both must give the very same tensors (the order decides which
unit stays when a whole layer is dead, and the order of the folded constants' sums)."""

from __future__ import annotations

import itertools

import pytest
import torch

from archsearch.core.models.layers import ACTIVATIONS
from archsearch.core.pruning.compact_mlp import Bias, compact_chain


def act(name: str, x: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = ACTIVATIONS[name]()(x)
    return out


def removable(
    weights: list[torch.Tensor], biases: list[Bias], layer: int, activation: str
) -> int | None:
    w, w_next = weights[layer], weights[layer + 1]
    if w.shape[0] <= 1:
        return None
    dead_in = ~w.any(dim=1)
    if biases[layer + 1] is None:
        own = biases[layer]
        dead_in &= act(activation, own if own is not None else torch.zeros(w.shape[0])) == 0
    candidates = (~w_next.any(dim=0) | dead_in).nonzero().flatten()
    return int(candidates[0]) if len(candidates) else None


def reference(
    weights: list[torch.Tensor], biases: list[Bias], activation: str
) -> tuple[list[torch.Tensor], list[Bias]]:
    weights, biases = list(weights), list(biases)
    changed = True
    while changed:
        changed = False
        for layer in range(len(weights) - 1):
            unit = removable(weights, biases, layer, activation)
            if unit is None:
                continue
            own, next_bias = biases[layer], biases[layer + 1]
            if next_bias is not None and not weights[layer][unit].any():
                bias = own[unit] if own is not None else torch.zeros(())
                biases[layer + 1] = next_bias + weights[layer + 1][:, unit] * act(activation, bias)
            keep = torch.arange(weights[layer].shape[0]) != unit
            weights[layer], weights[layer + 1] = weights[layer][keep], weights[layer + 1][:, keep]
            biases[layer] = own[keep] if own is not None else None
            changed = True
    return weights, biases


def sparse_chain(
    widths: list[int], density: float, bias: bool, generator: torch.Generator
) -> tuple[list[torch.Tensor], list[Bias]]:
    """Random weights at `density`, with about a third of the hidden units cut off whole
    (no inputs, or no outputs), as learned masks leave them."""
    weights, biases = [], []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
        kept = torch.rand(fan_out, fan_in, generator=generator) < density
        w = torch.randn(fan_out, fan_in, generator=generator) * kept
        if i < len(widths) - 2:
            w[torch.rand(fan_out, generator=generator) < 0.3] = 0
        if i > 0:
            w[:, torch.rand(fan_in, generator=generator) < 0.3] = 0
        weights.append(w)
        biases.append(torch.randn(fan_out, generator=generator) if bias else None)
    return weights, biases


@pytest.mark.parametrize("activation", ["relu", "selu", "tanh"])
@pytest.mark.parametrize("bias", [True, False])
def test_compaction_equals_the_rules_applied_one_unit_at_a_time(
    activation: str, bias: bool
) -> None:
    generator = torch.Generator().manual_seed(0)
    for trial in range(60):
        widths = [int(n) for n in torch.randint(1, 12, (3 + trial % 4,), generator=generator)]
        density = (0.05, 0.2, 0.5, 1.0)[trial % 4]
        weights, biases = sparse_chain(widths, density, bias, generator)
        expected = reference(weights, biases, activation)
        got = compact_chain(weights, biases, activation)
        for want, have in zip(expected[0] + expected[1], got[0] + got[1], strict=True):
            assert (want is None and have is None) or torch.equal(want, have), widths
