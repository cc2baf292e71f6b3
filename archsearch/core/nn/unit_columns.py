"""Unit granularity of a masked layer: its weight's input columns in groups, one per unit read.

"Differentiable Architecture Pruning for Transfer Learning", section 2.2, with the binary
mask over units instead of connections. One logit per unit of the layer before, i.e. per
input column group of this layer (per input channel of a conv; per input channel's
`positions` flattened inputs of a head that reads a conv's feature map). A unit whose mask
is 0 is read by no one, so compaction removes it (and the filter or neuron that computes
it) exactly: the compact model is an ordinary smaller dense network. The mask sits on the
reading layer, not on the producing one, because a zeroed filter followed by batch norm
still outputs a constant that padding makes impossible to fold away; a cut read edge always
folds to nothing.

Which layer reads which units is each model family's plan (`core.pruning.units`); this
module only groups one layer's columns, so `core.nn` needs nothing from `core.pruning`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class UnitRead(NamedTuple):
    """At unit granularity, what a masked layer reads: the units of layer `source`, `width`
    of them (its input columns come in `width` equal groups, one per unit)."""

    source: str
    width: int


class UnitColumns:
    """How a masked layer's weight columns group into the units it reads; mixed into
    `nn.masked.MaskedMixin`. With no `unit_source`, a mask is per weight and passes as is."""

    weight: torch.Tensor
    unit_source: str | None = None  # unit granularity: the layer whose outputs are masked
    unit_count: int = 0  # its outputs (0: this layer's input width)

    def _units(self) -> int:
        """Input units at unit granularity: in_channels of a conv; for a Linear, the units
        of the layer it reads (`unit_count`, e.g. a conv's channels read by a flattening head)."""
        return self.unit_count or int(self.weight.shape[1])

    def _group(self) -> int:
        """Weight entries per (output, input unit) pair: kernel area or positions."""
        return self.weight[0].numel() // self._units()

    def expand(self, unit_mask: torch.Tensor) -> torch.Tensor:
        """A mask shaped like the logits, broadcast to the weight's shape."""
        if self.unit_source is None:
            return unit_mask
        grouped = unit_mask.view(1, -1, 1).expand(self.weight.shape[0], -1, self._group())
        return grouped.reshape(self.weight.shape)

    def unit_product(self, unit_mask: torch.Tensor) -> torch.Tensor:
        """The weight with each unit's columns multiplied by its mask value (the masked
        weight at unit granularity, differentiable in both)."""
        out = self.weight.shape[0]
        grouped = self.weight.reshape(out, self._units(), -1) * unit_mask.view(1, -1, 1)
        return grouped.reshape(self.weight.shape)

    def units_kept(self, weight_mask: torch.Tensor) -> torch.Tensor:
        """The unit mask of a weight-shaped mask: a unit is kept when any of its columns
        is (`expand` of it gives `weight_mask` back when the mask is unit-structured)."""
        grouped = weight_mask.to(torch.bool).reshape(self.weight.shape[0], self._units(), -1)
        return grouped.any(dim=2).any(dim=0)

    def unit_magnitude(self) -> torch.Tensor:
        """|w| shaped like the logits: per weight, or the L1 norm of a unit's read column."""
        weight = self.weight.detach().abs()
        if self.unit_source is None:
            return weight
        return weight.reshape(weight.shape[0], self._units(), -1).sum(dim=(0, 2))
