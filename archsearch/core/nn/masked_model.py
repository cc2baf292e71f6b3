"""Masked models: a model's layers swapped for masked twins; its masks read, set, counted.

"Differentiable Architecture Pruning for Transfer Learning", sections 2.1-2.2: the parent
network F(m * theta) is any model of the registry with its Linear / Conv2d layers swapped
for the masked layers of `nn.masked` (`mask_model`; the ones named in `keep_dense` stay
dense), their weights shared, not copied. The architecture is m = 1[w > 0] per layer
(`hard_masks`, the output of Algorithm A.1), fixed by `set_masks` or `freeze_masks`; its
density 1^T 1[w > 0] / D (appendix A.3) is counted exactly (`density`, `positive_count`).

The weight-free network ("Disentangling Neural Architectures and Weights", section 3:
weights in {a, b}^d with a = 0, b = 1): `make_weight_free` fixes every masked weight to one
value b per layer and leaves only the mask logits trained. A pruned model is saved as
`plain_state_dict` (the weights times the binary mask, loadable with no mask code) and
`weight_masks` (its masks shaped like the weights).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch import nn

from archsearch.core.errors import UserError
from archsearch.core.nn.masked import MaskedConv2d, MaskedLinear, MaskInit
from archsearch.core.nn.two_temperature import positive_indicator
from archsearch.core.nn.unit_columns import UnitRead


def _masked_copy(module: nn.Module) -> MaskedLinear | MaskedConv2d:
    """A masked layer that shares the parameters of `module` (no copy of the weights)."""
    new: MaskedLinear | MaskedConv2d
    if isinstance(module, nn.Linear):
        new = MaskedLinear(
            module.in_features, module.out_features, bias=module.bias is not None, device="meta"
        )
    else:
        assert isinstance(module, nn.Conv2d), f"cannot mask {type(module).__name__}"
        new = MaskedConv2d(
            module.in_channels,
            module.out_channels,
            module.kernel_size,  # type: ignore[arg-type]
            stride=module.stride,  # type: ignore[arg-type]
            padding=module.padding,  # type: ignore[arg-type]
            dilation=module.dilation,  # type: ignore[arg-type]
            groups=module.groups,
            bias=module.bias is not None,
            padding_mode=module.padding_mode,
            device="meta",
        )
    new.weight = module.weight  # the same Parameter object
    new.bias = module.bias
    new.train(module.training)
    return new


def prunable_layer_names(model: nn.Module) -> list[str]:
    """Names of the Linear / Conv2d layers in registration (= forward) order."""
    return [n for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))]


def _resolve_dense(names: list[str], keep_dense: tuple[str, ...]) -> set[str]:
    aliases = {"first": names[0], "last": names[-1]} if names else {}
    dense = set()
    for entry in keep_dense:
        resolved = aliases.get(entry, entry)
        if resolved not in names:
            raise UserError(
                f"keep_dense: no layer {entry!r}; use 'first', 'last' or one of: {', '.join(names)}"
            )
        dense.add(resolved)
    return dense


def mask_model(
    model: nn.Module,
    *,
    keep_dense: tuple[str, ...] = (),
    logit_init: float = 0.05,
    t_hard: float = 100.0,
    t_soft: float = 10.0,
    init: MaskInit = "uniform",
    binary_forward: bool = False,
    units: dict[str, UnitRead] | None = None,
) -> list[str]:
    """Swap every prunable layer of `model` (in place) for its masked twin; return their names.

    With `units` (layer name -> the units it reads), only those layers are masked, one logit
    per unit read; `keep_dense` then names layers whose own units stay unmasked.
    """
    names = prunable_layer_names(model)
    dense = _resolve_dense(names, keep_dense)
    if units is None:
        masked = [n for n in names if n not in dense]
    else:
        masked = [n for n, read in units.items() if read.source not in dense]
    if not masked:
        raise UserError("keep_dense leaves no layer to prune; keep fewer layers dense")
    for name in masked:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        layer = _masked_copy(parent.get_submodule(child))
        read = units[name] if units is not None else UnitRead("", 0)
        layer.init_mask(
            logit_init,
            t_hard,
            t_soft,
            init=init,
            binary_forward=binary_forward,
            unit_source=read.source or None,
            unit_count=read.width,
        )
        setattr(parent, child, layer)
    return masked


def masked_layers(model: nn.Module) -> Iterator[tuple[str, MaskedLinear | MaskedConv2d]]:
    for name, module in model.named_modules():
        if isinstance(module, (MaskedLinear, MaskedConv2d)):
            yield name, module


def mask_logits(model: nn.Module) -> list[nn.Parameter]:
    return [layer.mask_logits for _, layer in masked_layers(model)]


def hard_masks(model: nn.Module) -> dict[str, torch.Tensor]:
    """The architecture: a boolean mask 1[w > 0] per masked layer, keyed by layer name."""
    return {name: layer.mask_logits.detach() > 0 for name, layer in masked_layers(model)}


def set_masks(model: nn.Module, masks: dict[str, torch.Tensor]) -> None:
    """Fix the architecture to `masks` (boolean); the layers become frozen."""
    layers = dict(masked_layers(model))
    assert set(masks) == set(layers), f"mask layers {sorted(masks)} != model's {sorted(layers)}"
    with torch.no_grad():
        for name, keep in masks.items():
            layer = layers[name]
            assert keep.shape == layer.mask_logits.shape, f"mask of {name}: {tuple(keep.shape)}"
            layer.mask_logits.copy_(torch.where(keep.to(layer.weight.device), 1.0, -1.0))
            layer.mask_frozen.fill_(True)


def freeze_masks(model: nn.Module) -> None:
    for _, layer in masked_layers(model):
        layer.mask_frozen.fill_(True)


def masks_frozen(model: nn.Module) -> bool:
    return all(bool(layer.mask_frozen) for _, layer in masked_layers(model))


def exact_count_limit(dtype: torch.dtype) -> int:
    """How many 0s and 1s a float sum in `dtype` adds exactly: every partial sum is then an
    integer the dtype holds (2^24 in float32)."""
    return {torch.float32: 2**24, torch.float64: 2**53}.get(dtype, 0)


def positive_count(logits: torch.Tensor) -> int:
    """How many logits are above 0 (the connections kept), exactly.

    Summed as floats (a vectorised pass, ~3x faster than summing a bool tensor), exact
    within `exact_count_limit`.
    """
    if logits.numel() <= exact_count_limit(logits.dtype):
        return int(positive_indicator(logits.detach()).sum())
    return int((logits > 0).sum())


def density(model: nn.Module) -> float:
    """Fraction of masked weights whose logit is positive (the architecture's density)."""
    kept = sum(positive_count(p) for p in mask_logits(model))
    total = sum(p.numel() for p in mask_logits(model))
    return kept / max(1, total)


def layer_densities(model: nn.Module) -> dict[str, float]:
    return {name: float(m.float().mean()) for name, m in hard_masks(model).items()}


def fan_in(layer: MaskedLinear | MaskedConv2d) -> int:
    """Inputs summed by one output unit: in_features, or in_channels / groups * kernel area."""
    return math.prod(layer.weight.shape[1:])


def make_weight_free(model: nn.Module, *, scaled: bool = True) -> None:
    """The weight-free network of the second paper: every masked weight is one value b per
    layer, biases zero, and nothing but the mask logits is trained.

    The paper's binary networks take weights in {a, b}^d with fixed a, b (section 3, a = 0,
    b = 1) on unit-norm 64-dim inputs, where unit sums stay small. On standardised inputs
    and wider layers a sum of hundreds of unit links saturates tanh and blows ReLU up (logits
    of ~5e4 were measured); `scaled` takes b = 1 / sqrt(fan_in), one constant per layer (not
    per link, not trained), so a unit's sum stays on the scale of its inputs. The saved
    plain model holds b * mask, so it computes exactly the trained function.
    """
    with torch.no_grad():
        for _, layer in masked_layers(model):
            layer.weight.fill_(1.0 / math.sqrt(fan_in(layer)) if scaled else 1.0)
            if layer.bias is not None:
                layer.bias.zero_()
    train_masks_only(model)
    for _, layer in masked_layers(model):
        if layer.unit_source is None:  # a unit mask is not weight-shaped: no matrix of m
            layer.mark_weight_free()


def train_masks_only(model: nn.Module) -> None:
    """Every parameter but the mask logits fixed (weight-free training)."""
    for name, param in model.named_parameters():
        param.requires_grad_(name.endswith("mask_logits"))


def weight_masks(model: nn.Module, masks: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Masks of `hard_masks`' shapes as masks shaped like each layer's weight (unit masks
    broadcast over the columns they cut): the files users and `transfer` read."""
    layers = dict(masked_layers(model))
    return {
        name: layers[name].expand(mask.to(layers[name].weight.device)).to(torch.bool).cpu()
        for name, mask in masks.items()
    }


def plain_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state of the unmasked registry model: weights times the binary mask, no mask keys.

    Loadable into `create_model(architecture)`, so `model.safetensors` needs no mask code.
    """
    state = {
        k: v
        for k, v in model.state_dict().items()
        if not k.endswith(("mask_logits", "mask_frozen"))
    }
    for name, layer in masked_layers(model):
        key = f"{name}.weight" if name else "weight"
        state[key] = (layer.weight * layer.hard_mask()).detach()
    return state
