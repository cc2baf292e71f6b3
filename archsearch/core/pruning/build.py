"""Building masked models from a prune spec, and the artifacts every pruned model yields.

Shared by the `prune` and `transfer` methods ("Differentiable Architecture Pruning",
Algorithms A.1 and A.2).
"""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core import charts
from archsearch.core.context import RunContext
from archsearch.core.export import (
    count_macs,
    count_parameters,
    json_bytes,
    save_model,
    tensors_to_bytes,
)
from archsearch.core.models import Architecture, create_model
from archsearch.core.nn.masked_model import (
    hard_masks,
    layer_densities,
    make_weight_free,
    mask_model,
    masked_layers,
    plain_state_dict,
    train_masks_only,
    weight_masks,
)
from archsearch.core.pruning.compact import compact_model
from archsearch.core.pruning.spectrum import mlp_weights, normalized_laplacian_spectrum
from archsearch.core.pruning.units import unit_plan
from archsearch.specs.model_configs import MLPConfig
from archsearch.specs.prune import PruneJob


def build_masked_model(
    spec: PruneJob, architecture: Architecture, weights: str | None = None
) -> nn.Module:
    """A fresh parent network (seed torch first) with mask logits on its prunable layers
    (per weight, or per unit at `granularity: unit`)."""
    model = create_model(architecture)
    temps = spec.temperatures
    units = unit_plan(architecture) if spec.granularity == "unit" else None
    mask_model(
        model,
        keep_dense=spec.keep_dense,
        logit_init=spec.logit_init,
        t_hard=temps.t_hard,
        t_soft=temps.soft,
        init=spec.mask_init,
        binary_forward=spec.forward == "binary",
        units=units,
    )
    if (weights or spec.weights) == "free":
        # Units of one layer share nothing to tell them apart when every weight is one
        # constant: at unit granularity the random initial weights stay, fixed.
        if units is not None:
            train_masks_only(model)
        else:
            make_weight_free(model)
    return model


def weight_params(model: nn.Module) -> list[nn.Parameter]:
    """Parameters trained by `fit` (everything but the mask logits, which have their own
    optimiser). `fit` needs at least one: a weight-free model gets an empty placeholder."""
    params = [
        p for n, p in model.named_parameters() if p.requires_grad and not n.endswith("mask_logits")
    ]
    return params or [nn.Parameter(torch.zeros(0))]


def plain_model(model: nn.Module, architecture: Architecture) -> nn.Module:
    """The registry model with the masked weights (no mask code needed to load it)."""
    plain = create_model(architecture)
    plain.load_state_dict(plain_state_dict(model))
    return plain.to(next(model.parameters()).device).eval()


def mask_bytes(masks: dict[str, torch.Tensor], model: nn.Module | None = None) -> bytes:
    """Boolean masks as safetensors; with `model`, unit masks are written as weight masks
    (each shaped like its layer's weight), the form `transfer` and users read."""
    if model is not None:
        masks = weight_masks(model, masks)
    return tensors_to_bytes({name: m.to(torch.bool) for name, m in masks.items()})


def save_pruned(
    ctx: RunContext, model: nn.Module, architecture: Architecture, suffix: str = ""
) -> dict[str, float]:
    """Save masked + compact models; return parameter and multiply-add counts."""
    plain = plain_model(model, architecture)
    save_model(ctx, plain, architecture, suffix=suffix)
    shape = architecture.input_shape
    metrics = {
        "parameters_dense": float(count_parameters(plain)),
        "parameters": float(count_parameters(plain, nonzero_only=True)),
        "macs_dense": float(count_macs(plain, shape, nonzero_only=False)),
        "macs": float(count_macs(plain, shape, nonzero_only=True)),
    }
    compact = compact_model({k: v.cpu() for k, v in plain.state_dict().items()}, architecture)
    if compact is not None:
        compact_net, compact_arch = compact
        save_model(ctx, compact_net, compact_arch, suffix=f"{suffix}-compact")
        metrics["parameters_compact"] = float(count_parameters(compact_net))
        metrics["macs_compact_dense"] = float(count_macs(compact_net, shape, nonzero_only=False))
        if any(layer.unit_source for _, layer in masked_layers(model)):
            # A cut unit is masked where it is read: its own neuron or filter still holds
            # nonzero weights in the masked model (8x the compact count on the default MLP
            # at unit density 0.12). The compact model is what remains: studies compare it.
            metrics["parameters"] = metrics["parameters_compact"]
            metrics["macs"] = metrics["macs_compact_dense"]
    return metrics


def density_report(model: nn.Module) -> dict[str, float]:
    """Density over the masks (units at unit granularity); at unit granularity also the
    fraction of the masked layers' weights that stays (`weight_density`)."""
    layers = layer_densities(model)
    masks = hard_masks(model)
    kept = sum(int(m.sum()) for m in masks.values())
    total = sum(m.numel() for m in masks.values())
    report = {"density": kept / max(1, total), **{f"density/{n}": d for n, d in layers.items()}}
    if any(layer.unit_source is not None for _, layer in masked_layers(model)):
        weights = weight_masks(model, masks).values()
        kept_w = sum(int(m.sum()) for m in weights)
        report["weight_density"] = kept_w / max(1, sum(m.numel() for m in weights))
    return report


def save_spectrum(ctx: RunContext, model: nn.Module, architecture: Architecture) -> None:
    """spectrum.json + spectrum.png for MLP parents (footnote 14 of the weight-free paper)."""
    if not isinstance(architecture.config, MLPConfig):
        return
    state = {k: v.cpu() for k, v in plain_state_dict(model).items()}
    weights = mlp_weights(state)
    binary = [(w != 0).to(torch.float64) for w in weights]
    spectra = {
        "mask": normalized_laplacian_spectrum(binary).tolist(),
        "weighted": normalized_laplacian_spectrum(weights).tolist(),
    }
    ctx.save_artifact("spectrum.json", json_bytes(spectra), "application/json")
    ctx.save_chart("spectrum.png", charts.spectrum("spectrum.json"))
