"""Compaction of fully connected chains: hidden units without inputs or outputs removed.

"Differentiable Architecture Pruning for Transfer Learning", section 2.1: the output of
pruning is an architecture; here it is made physically small. A hidden unit with no
outgoing connection is unused; one with no incoming connection outputs the constant
act(bias), which is folded into the next layer's bias. Removing one unit can strand
others, so the rules are applied until nothing changes.
"""

from __future__ import annotations

import torch

from archsearch.core.models.layers import ACTIVATIONS

Bias = torch.Tensor | None


def _act(name: str, x: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = ACTIVATIONS[name]()(x)
    return out


def _remove_unit(
    weights: list[torch.Tensor], biases: list[Bias], layer: int, unit: int, activation: str
) -> None:
    """Drop hidden unit `unit` of `layer` (an output of weights[layer]), folding its constant."""
    w_next = weights[layer + 1]  # (out, in)
    next_bias = biases[layer + 1]
    if next_bias is not None and not weights[layer][unit].any():
        own = biases[layer]
        bias = own[unit] if own is not None else torch.zeros(())
        biases[layer + 1] = next_bias + w_next[:, unit] * _act(activation, bias)
    keep = torch.arange(weights[layer].shape[0]) != unit
    weights[layer] = weights[layer][keep]
    own = biases[layer]
    if own is not None:
        biases[layer] = own[keep]
    weights[layer + 1] = w_next[:, keep]


def _removable(
    weights: list[torch.Tensor], biases: list[Bias], layer: int, activation: str
) -> int | None:
    w, w_next = weights[layer], weights[layer + 1]
    if w.shape[0] <= 1:
        return None  # a registry config needs at least one unit per layer
    dead_out = ~w_next.any(dim=0)  # (units,)
    dead_in = ~w.any(dim=1)
    if biases[layer + 1] is None:
        # Without a next bias a constant cannot be folded: only zero constants may go.
        own = biases[layer]
        const = _act(activation, own if own is not None else torch.zeros(w.shape[0]))
        dead_in = dead_in & (const == 0)
    candidates = (dead_out | dead_in).nonzero().flatten()
    return int(candidates[0]) if len(candidates) else None


def compact_chain(
    weights: list[torch.Tensor], biases: list[Bias], activation: str
) -> tuple[list[torch.Tensor], list[Bias]]:
    """Remove dead hidden units of Linear layers applied in sequence (zeros are pruned)."""
    weights = [w.clone() for w in weights]
    biases = [b.clone() if b is not None else None for b in biases]
    changed = True
    while changed:
        changed = False
        for layer in range(len(weights) - 1):
            unit = _removable(weights, biases, layer, activation)
            if unit is not None:
                _remove_unit(weights, biases, layer, unit, activation)
                changed = True
    return weights, biases
