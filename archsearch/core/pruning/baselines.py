"""Pruning baselines at the same density as the learned mask.

"Differentiable Architecture Pruning for Transfer Learning", section 3.2 (random pruning,
iterative magnitude pruning (IMP) of Frankle and Carbin, 2019: train, remove 20% of the
remaining weights by magnitude, rewind to the initial weights, repeat) and section 3.3
(layer-wise reshuffle: same density per layer, random positions). One-shot magnitude
pruning (Han et al., 2015) is IMP with a single round.

A mask set is a dict {layer name: bool tensor shaped like the layer's mask logits}: like
its weight, or at unit granularity one entry per unit it reads. There the magnitude is the
L1 norm of each unit's filter or neuron (`pruning.units.unit_l1_scores`, filter pruning of
Li et al., 2017) and random pruning draws units. The random draws walk the layers in name
order, so a seed gives one layout whatever order the masks arrive in: a safetensors file's
tensors come back in a different order on every load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from archsearch.core.context import RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.nn.masked_model import masked_layers, set_masks
from archsearch.core.pruning.units import unit_l1_scores
from archsearch.core.training import fit
from archsearch.specs.budget import imp_schedule
from archsearch.specs.common import TrainingSpec

Masks = dict[str, torch.Tensor]


def _split(flat: torch.Tensor, like: Masks) -> Masks:
    out, start = {}, 0
    for name, mask in like.items():
        out[name] = flat[start : start + mask.numel()].view(mask.shape).clone()
        start += mask.numel()
    assert start == flat.numel(), "flat mask and layer shapes disagree"
    return out


def _in_name_order(masks: Masks) -> Masks:
    return {name: masks[name] for name in sorted(masks)}


def random_masks(like: Masks, density: float, generator: torch.Generator) -> Masks:
    """Uniformly random over all masked weights: round(density * D) of them kept."""
    like = _in_name_order(like)
    total = sum(m.numel() for m in like.values())
    keep = torch.zeros(total, dtype=torch.bool)
    keep[torch.randperm(total, generator=generator)[: round(density * total)]] = True
    return _split(keep, like)


def random_unit_masks(like: Masks, density: float, generator: torch.Generator) -> Masks:
    """Random units, round(density * units) of each layer (as the learned unit masks are
    finalised per layer, `pruning.trainer`): a global draw could leave a layer empty."""
    return {
        name: random_masks({name: mask}, density, generator)[name]
        for name, mask in _in_name_order(like).items()
    }


def reshuffle_masks(masks: Masks, generator: torch.Generator) -> Masks:
    """Section 3.3: each layer keeps its number of connections, at random positions."""
    out = {}
    for name, mask in _in_name_order(masks).items():
        flat = mask.flatten()
        out[name] = flat[torch.randperm(flat.numel(), generator=generator)].view(mask.shape)
    return out


def magnitude_masks(
    weights: dict[str, torch.Tensor],
    density: float,
    allowed: Masks | None = None,
    per_layer: bool = False,
) -> Masks:
    """Global magnitude pruning: keep the round(density * D) largest |w| among `allowed`;
    `per_layer` (units): the same fraction of every layer."""
    if per_layer:
        return {
            name: magnitude_masks({name: w}, density, {name: allowed[name]} if allowed else None)[
                name
            ]
            for name, w in weights.items()
        }
    flat = torch.cat([w.detach().abs().flatten().cpu() for w in weights.values()])  # (D,)
    if allowed is not None:
        flat = torch.where(torch.cat([a.flatten().cpu() for a in allowed.values()]), flat, -1.0)
    k = round(density * flat.numel())
    keep = torch.zeros_like(flat, dtype=torch.bool)
    keep[flat.topk(k).indices] = True
    return _split(keep, {n: w.detach().cpu() for n, w in weights.items()})


def masked_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The magnitudes that magnitude pruning ranks, shaped like the masks (0 where pruned)."""
    units = unit_l1_scores(model)
    out = {}
    for name, layer in masked_layers(model):
        kept = (layer.mask_logits.detach() > 0).to(layer.weight.dtype)
        score = units[name].to(kept.device) if name in units else layer.weight.detach()
        out[name] = score * kept
    return out


def all_kept(model: nn.Module) -> Masks:
    return {
        name: torch.ones_like(layer.mask_logits, dtype=torch.bool, device="cpu")
        for name, layer in masked_layers(model)
    }


@dataclass
class IMPResult:
    """Masks at each requested density, with the training they cost (rounds before them)."""

    masks: dict[float, Masks] = field(default_factory=dict)
    rounds: dict[float, int] = field(default_factory=dict)
    seconds: dict[float, float] = field(default_factory=dict)
    epochs: dict[float, int] = field(default_factory=dict)


def _imp_steps(densities: list[float], prune_fraction: float) -> list[float]:
    """Densities visited: remove `prune_fraction` of what remains, landing on each target.
    (The budget planner counts the same rounds: one definition in `specs.budget`.)"""
    return imp_schedule(densities, prune_fraction)


def iterative_magnitude_pruning(
    model: nn.Module,
    data: Dataset,
    training: TrainingSpec,
    ctx: RunContext,
    densities: list[float],
    *,
    prune_fraction: float = 0.2,
    params: Any = None,
) -> IMPResult:
    """Lottery-ticket IMP with rewinding to the initial weights, on a masked `model`.

    Each round trains the current sub-network, prunes `prune_fraction` of its remaining
    weights by global magnitude and rewinds every weight to its value at initialisation.
    """
    init_state = {k: v.clone() for k, v in model.state_dict().items()}
    units = all(layer.unit_source is not None for _, layer in masked_layers(model))
    result, masks, start, rounds = IMPResult(), all_kept(model), time.perf_counter(), 0
    set_masks(model, masks)
    targets = set(densities)
    for step_density in _imp_steps(densities, prune_fraction):
        fit(model, data, training, ctx, params=params, phase=f"imp-{rounds}")
        rounds += 1
        masks = magnitude_masks(masked_weights(model), step_density, masks, per_layer=units)
        model.load_state_dict(init_state)  # rewind
        set_masks(model, masks)
        if step_density in targets:
            result.masks[step_density] = masks
            result.rounds[step_density] = rounds
            result.epochs[step_density] = rounds * training.epochs
            result.seconds[step_density] = time.perf_counter() - start
    return result
