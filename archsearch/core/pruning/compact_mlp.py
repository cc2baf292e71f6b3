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


class _Chain:
    """The chain's units, alive or removed, with each alive unit's count of nonzero inputs
    and outputs kept up to date: a removal updates the counts it changes instead of every
    unit being rescanned (the dense matrices are cut once, at the end)."""

    def __init__(self, weights: list[torch.Tensor], biases: list[Bias], activation: str) -> None:
        self.weights, self.biases, self.activation = weights, biases, activation
        self.nonzero = [(w != 0).to(torch.int32) for w in weights]
        hidden = range(len(weights) - 1)
        self.alive = [torch.ones(weights[layer].shape[0], dtype=torch.bool) for layer in hidden]
        self.fan_in = [self.nonzero[layer].sum(1) for layer in hidden]  # (units,)
        self.fan_out = [self.nonzero[layer + 1].sum(0) for layer in hidden]  # (units,)

    def removable(self, layer: int) -> int | None:
        """The first alive unit of hidden `layer` with no outputs, or with no inputs (its
        constant output foldable, or zero when there is no next bias to fold it into)."""
        alive = self.alive[layer]
        if int(alive.sum()) <= 1:
            return None  # a registry config needs at least one unit per layer
        dead_in = self.fan_in[layer] == 0
        if self.biases[layer + 1] is None:
            own = self.biases[layer]
            const = _act(self.activation, own if own is not None else torch.zeros(len(alive)))
            dead_in = dead_in & (const == 0)
        candidates = (alive & ((self.fan_out[layer] == 0) | dead_in)).nonzero()
        return int(candidates[0]) if len(candidates) else None

    def remove(self, layer: int, unit: int) -> None:
        """Drop `unit` of hidden `layer`, folding its constant output into the next bias."""
        next_bias = self.biases[layer + 1]
        if next_bias is not None and int(self.fan_in[layer][unit]) == 0:
            own = self.biases[layer]
            bias = own[unit] if own is not None else torch.zeros(())
            w_next = self.weights[layer + 1]  # (out, in)
            self.biases[layer + 1] = next_bias + w_next[:, unit] * _act(self.activation, bias)
        self.alive[layer][unit] = False
        if layer > 0:  # its inputs, units of the layer before, lose an output
            self.fan_out[layer - 1] -= self.nonzero[layer][unit]
        if layer + 1 < len(self.alive):  # its outputs, units of the next layer, lose an input
            self.fan_in[layer + 1] -= self.nonzero[layer + 1][:, unit]

    def cut(self) -> tuple[list[torch.Tensor], list[Bias]]:
        weights, biases = list(self.weights), list(self.biases)
        for layer, keep in enumerate(self.alive):
            weights[layer] = weights[layer][keep]
            weights[layer + 1] = weights[layer + 1][:, keep]
            own = biases[layer]
            biases[layer] = own[keep] if own is not None else None
        return weights, biases


def compact_chain(
    weights: list[torch.Tensor], biases: list[Bias], activation: str
) -> tuple[list[torch.Tensor], list[Bias]]:
    """Remove dead hidden units of Linear layers applied in sequence (zeros are pruned).

    Units go one at a time, the first removable unit of each layer in turn, until none is
    left: where every unit of a layer is dead, which one stays depends on that order."""
    chain = _Chain(
        [w.clone() for w in weights],
        [b.clone() if b is not None else None for b in biases],
        activation,
    )
    changed = True
    while changed:
        changed = False
        for layer in range(len(weights) - 1):
            unit = chain.removable(layer)
            if unit is not None:
                chain.remove(layer, unit)
                changed = True
    return chain.cut()
