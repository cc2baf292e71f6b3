"""RigL, dynamic sparse training ("Rigging the Lottery: Making All Tickets Winners", Evci et
al., 2020, section 3): the sparse-training baseline a user expects beside magnitude pruning.

The network trains at a fixed density from the first step. Every `update_interval` steps
(the paper's 100, shortened on a short job so that it still makes updates:
`specs.prune.RigLSpec.interval_for`), until `end_fraction` of the training, each layer
drops the k smallest-magnitude active weights and grows the k inactive weights with the
largest gradient of the dense weight (k = the cosine-decayed `drop_fraction` of its active
weights); grown weights start at zero. Layer densities: Erdos-Renyi-Kernel (`erk`,
section 3) or the same in every layer.

The masks live in the masked layers' frozen logits (`nn.masked_model.set_masks`), so the
trained model is saved, compacted and transferred like a learned mask. Inactive weights are
kept at zero at every update, so the dense gradient is one backward of the same function
with every mask open. Deviation: the optimiser's moments of a grown weight are not reset
(`fit` owns the optimiser); an inactive weight's gradient is zero, so its first moment has
decayed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.budget import count_statistics
from archsearch.core.data.loaders import Dataset
from archsearch.core.nn.masked import MaskedConv2d, MaskedLinear
from archsearch.core.nn.masked_model import masked_layers, set_masks
from archsearch.core.training import TrainHooks

Masks = dict[str, torch.Tensor]


@dataclass(frozen=True)
class RigLSchedule:
    """When and how much to swap: `total_steps` of training, an update every `interval`."""

    density: float
    total_steps: int
    interval: int = 100
    drop_fraction: float = 0.3
    end_fraction: float = 0.75
    distribution: str = "erk"

    def fraction_at(self, step: int) -> float:
        """Cosine decay of the swapped fraction (eq. 1), 0 after `end_fraction`."""
        end = self.end_fraction * self.total_steps
        if step >= end:
            return 0.0
        return self.drop_fraction / 2 * (1 + math.cos(math.pi * step / end))


def _erk_weight(shape: torch.Size) -> float:
    """Erdos-Renyi-Kernel: density proportional to sum(shape) / prod(shape)."""
    return sum(shape) / math.prod(shape)


def layer_densities(
    shapes: dict[str, torch.Size], density: float, distribution: str
) -> dict[str, float]:
    """Per-layer densities whose kept weights total round(density * all weights); ERK layers
    that would exceed 1 are made dense and the others rescaled (the paper's procedure)."""
    if distribution == "uniform":
        return dict.fromkeys(shapes, density)
    dense: set[str] = set()
    total = sum(math.prod(s) for s in shapes.values())
    while True:
        sparse = {n: s for n, s in shapes.items() if n not in dense}
        budget = density * total - sum(math.prod(shapes[n]) for n in dense)
        raw = sum(_erk_weight(s) * math.prod(s) for s in sparse.values())
        scale = budget / raw
        over = {n for n, s in sparse.items() if scale * _erk_weight(s) > 1}
        if not over:
            break
        dense |= over
    return {n: 1.0 if n in dense else scale * _erk_weight(s) for n, s in shapes.items()}


def initial_masks(
    shapes: dict[str, torch.Size], densities: dict[str, float], generator: torch.Generator
) -> Masks:
    """Random positions, round(density * size) kept in each layer."""
    out = {}
    for name, shape in shapes.items():
        size = math.prod(shape)
        keep = torch.zeros(size, dtype=torch.bool)
        keep[torch.randperm(size, generator=generator)[: round(densities[name] * size)]] = True
        out[name] = keep.view(shape)
    return out


@torch.no_grad()
def swap(
    weight: torch.Tensor, mask: torch.Tensor, grad: torch.Tensor, fraction: float
) -> torch.Tensor:
    """One layer's update: drop the k smallest |w| among active, grow the k largest |grad|
    among the rest, grown weights set to zero (in `weight`, in place). Returns the new mask,
    with exactly as many active weights as `mask`."""
    active = int(mask.sum())
    k = min(math.floor(fraction * active), mask.numel() - active)
    if k == 0:
        return mask
    flat_mask, flat_w, flat_g = mask.flatten(), weight.flatten(), grad.flatten()
    drop_score = torch.where(flat_mask, flat_w.abs(), torch.inf)
    kept = flat_mask.clone()
    kept[drop_score.topk(k, largest=False).indices] = False
    # Candidates: every inactive position after the drop, the dropped ones included.
    grow_score = torch.where(kept, -torch.inf, flat_g.abs())
    grown = grow_score.topk(k).indices
    kept[grown] = True
    flat_w[grown] = 0.0
    return kept.view(mask.shape)


class RigL:
    """TrainHooks for `fit` that rewire a masked model every `schedule.interval` steps."""

    def __init__(
        self, model: nn.Module, data: Dataset, schedule: RigLSchedule, batch_size: int, seed: int
    ) -> None:
        self.model, self.data, self.schedule, self.batch_size = model, data, schedule, batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.layers: dict[str, MaskedLinear | MaskedConv2d] = dict(masked_layers(model))
        shapes = {n: layer.mask_logits.shape for n, layer in self.layers.items()}
        densities = layer_densities(shapes, schedule.density, schedule.distribution)
        self.updates = 0
        self._apply(initial_masks(shapes, densities, self.generator))
        self._rescale(densities)

    def hooks(self) -> TrainHooks:
        return TrainHooks(after_step=self.after_step)

    def after_step(self, step: int) -> dict[str, float] | None:
        done = step + 1
        if done % self.schedule.interval or self.schedule.fraction_at(done) == 0.0:
            return None
        self.update(self.schedule.fraction_at(done))
        return None

    def update(self, fraction: float) -> None:
        """Drop and grow `fraction` of each layer's active weights."""
        masks = self.masks()  # read from the model: a resumed run continues its own masks
        grads = self._dense_gradients(masks)
        for name, layer in self.layers.items():
            masks[name] = swap(layer.weight.data, masks[name], grads[name], fraction)
        self._apply(masks)
        self.updates += 1

    def masks(self) -> Masks:
        return {n: layer.mask_logits.detach() > 0 for n, layer in self.layers.items()}

    def _dense_gradients(self, masks: Masks) -> dict[str, torch.Tensor]:
        """d loss / d weight with every mask open, on a random training batch: with the
        inactive weights at zero, the same function as the sparse network."""
        self._apply(masks)
        set_masks(self.model, {n: torch.ones_like(m) for n, m in masks.items()})
        device = next(self.model.parameters()).device
        index = torch.randint(len(self.data.x_train), (self.batch_size,), generator=self.generator)
        count_statistics(len(index))  # samples read without a step are charged too
        x, y = self.data.x_train[index].to(device), self.data.y_train[index].to(device)
        weights = [layer.weight for layer in self.layers.values()]
        loss = F.cross_entropy(self.model(x), y)
        grads = torch.autograd.grad(loss, weights)
        return {name: g.detach() for name, g in zip(self.layers, grads, strict=True)}

    @torch.no_grad()
    def _rescale(self, densities: dict[str, float]) -> None:
        """Kept weights x 1/sqrt(layer density): each unit's input variance as in the dense
        network (the sparse initialisation of Evci et al., 2022, "Gradient Flow in Sparse
        Neural Networks"); with the dense init a 10% network barely moves in 100 steps."""
        for name, layer in self.layers.items():
            layer.weight.mul_(densities[name] ** -0.5)

    @torch.no_grad()
    def _apply(self, masks: Masks) -> None:
        """The masks into the layers, and every inactive weight to zero."""
        for name, layer in self.layers.items():
            layer.weight.mul_(masks[name].to(layer.weight.device, layer.weight.dtype))
        set_masks(self.model, masks)
