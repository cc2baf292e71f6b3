"""Masked linear and conv layers: a mask logit per weight, held as module state.

"Differentiable Architecture Pruning for Transfer Learning", section 2.1-2.2: the parent
network F(m * theta) with a mask m = sigmoid(t_hard w) trained through the two-temperature
surrogate gradient; the final architecture is m = 1[w > 0].

Any model of the registry is masked generically: every nn.Linear / nn.Conv2d (except the
ones kept dense) is swapped for a subclass that owns `mask_logits` (a Parameter) and
`mask_frozen` (a buffer), so masks move with `.to()` and live in the `state_dict`; the
subclasses are still nn.Linear / nn.Conv2d, so FLOP counters and init code keep working.
A frozen layer uses the exact binary mask 1[w > 0] and its logits receive no gradient.

Unit granularity (`units`, one logit per unit read): `nn.unit_columns`. Weight-free layers
("Disentangling Neural Architectures and Weights", section 5: links in {0, b}) compute
b * (x @ m^T) with the {0, 1} mask m itself as the matrix (`nn.weight_free`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.errors import UserError
from archsearch.core.nn.two_temperature import (
    binary_mask_straight_through,
    masked_weight_product,
    positive_indicator,
    two_temperature_sigmoid,
    weight_free_linear,
)
from archsearch.core.nn.unit_columns import UnitColumns, UnitRead
from archsearch.core.nn.weight_free import WeightFreeScale

MaskInit = Literal["uniform", "half_normal", "normal"]


def initial_logits(weight: torch.Tensor, scale: float, init: str) -> torch.Tensor:
    """Initial mask logits shaped like `weight`.

    uniform: in [scale / 2, scale], every connection on, with a spread that breaks the
    symmetry of equal weights. half_normal: |N(0, scale)|, Algorithm A.1 step 3 of the
    pruning paper. normal: N(0, scale), the "randomly initialized real-valued weights" of
    the weight-free paper's Algorithm 1: half the connections on, at random, which breaks
    the symmetry of a {0,1} network whose hidden units would otherwise all be identical.
    """
    shape, device = weight.shape, weight.device
    if init == "half_normal":
        return scale * torch.randn(shape, device=device).abs()
    if init == "normal":
        return scale * torch.randn(shape, device=device)
    assert init == "uniform", f"unknown mask init {init!r}"
    return scale * (0.5 + 0.5 * torch.rand(shape, device=device))


class MaskedMixin(UnitColumns, WeightFreeScale):
    """Shared mask state of MaskedLinear and MaskedConv2d."""

    mask_logits: nn.Parameter
    mask_frozen: torch.Tensor
    t_hard: float
    t_soft: float
    binary_forward: bool
    # The per-forward checks read tensors from the module's own dicts: `self.weight` goes
    # through `nn.Module.__getattr__`, ~0.6 us a read, and these run per layer every step.
    _parameters: dict[str, nn.Parameter | None]
    _buffers: dict[str, torch.Tensor | None]

    def init_mask(
        self,
        logit_init: float,
        t_hard: float,
        t_soft: float,
        *,
        init: str = "uniform",
        binary_forward: bool = False,
        unit_source: str | None = None,
        unit_count: int = 0,
    ) -> None:
        module = self  # an nn.Module at run time
        assert isinstance(module, nn.Module), "MaskedMixin is mixed into nn.Module subclasses"
        self.unit_source, self.unit_count = unit_source, unit_count
        # Unit granularity: one logit per input unit (dim 1 of the weight, or of a conv).
        like = self.weight if unit_source is None else self.weight.new_empty(self._units())
        module.register_parameter(
            "mask_logits", nn.Parameter(initial_logits(like, logit_init, init))
        )
        module.register_buffer("mask_frozen", torch.zeros((), dtype=torch.bool))
        self.t_hard, self.t_soft = t_hard, t_soft
        self.binary_forward = binary_forward

    def hard_mask(self) -> torch.Tensor:
        """1[w > 0] shaped like the weight (unit masks broadcast over their columns)."""
        return self.expand((self.mask_logits.detach() > 0).to(self.weight.dtype))

    def frozen_mask(self) -> torch.Tensor:
        """`hard_mask()`, computed once while the logits stay unchanged.

        Keyed by the logits' version counter (bumped by every in-place write: `set_masks`,
        `load_state_dict`, an optimiser step), their storage (`.to()`, a copy) and the
        weight's dtype, so no write can leave a stale mask behind. Not cached under
        inference mode: such a tensor could not be saved for a later backward.
        """
        logits, weight = self._logits(), self._weight()
        key = (logits._version, logits.data_ptr(), weight.dtype)
        cached: tuple[tuple[int, int, torch.dtype], torch.Tensor] | None = self.__dict__.get(
            "_frozen_cache"
        )
        if cached is not None and cached[0] == key:
            return cached[1]
        mask = self.hard_mask()
        if not torch.is_inference_mode_enabled():
            self._frozen_cache = (key, mask)
        return mask

    def _logits(self) -> torch.Tensor:
        return self._parameters["mask_logits"]  # type: ignore[return-value]

    def is_frozen(self) -> bool:
        """`bool(mask_frozen)`, read again only after a write to the flag (its version
        counter or storage changed): a tensor's truth value costs ~1 us, and every forward
        and every step of the trainer asks it per layer."""
        flag: torch.Tensor = self._buffers["mask_frozen"]  # type: ignore[assignment]
        key = (flag._version, flag.data_ptr())
        held: tuple[tuple[int, int], bool] | None = self.__dict__.get("_frozen_flag")
        if held is None or held[0] != key:
            held = self._frozen_flag = (key, bool(flag))
        return held[1]

    def mask(self) -> torch.Tensor:
        # Frozen: the exact architecture 1[w > 0]; no gradient reaches the logits, so the
        # optimiser skips them (their .grad stays None) and the mask is computed once.
        if self.is_frozen():
            return self.frozen_mask()
        logits = self._logits()
        if self.binary_forward:
            # The indicator the density count after the last step already formed.
            return binary_mask_straight_through(logits, self.t_soft, self.positive_mask())
        return two_temperature_sigmoid(logits, self.t_hard, self.t_soft)

    def positive_mask(self) -> torch.Tensor:
        """1[w > 0] of weight-shaped logits as floats, formed once per logit update.

        The binary forward multiplies the weights by it, and the density count after each
        step sums it: the trainer's count makes it, the next forward reuses it. Keyed like
        `frozen_mask`; detached, so the graph never holds the cached tensor's history.
        """
        logits = self._logits()
        key = (logits._version, logits.data_ptr(), logits.dtype)
        cached: tuple[tuple[int, int, torch.dtype], torch.Tensor] | None = self.__dict__.get(
            "_positive_cache"
        )
        if cached is not None and cached[0] == key:
            return cached[1]
        positive = positive_indicator(logits.detach())
        if not torch.is_inference_mode_enabled():
            self._positive_cache = (key, positive)
        return positive

    def hand_penalty_grad(self, term: torch.Tensor) -> None:
        """Add `term` (the density penalty's gradient of this step, shaped like the logits)
        to the logits' gradient in the next forward's backward, in the pass that forms that
        gradient; a forward that cannot leaves it for `take_penalty_grad`."""
        self._penalty_grad = term

    def take_penalty_grad(self) -> torch.Tensor | None:
        """The term `hand_penalty_grad` left, if no forward took it (then None after)."""
        term: torch.Tensor | None = self.__dict__.pop("_penalty_grad", None)
        return term

    def hand_premasked(self) -> None:
        """Let the next forward of this frozen layer use its weight as the masked weight: the
        caller keeps every pruned weight at zero (`pruning.trainer` zeroes them after each
        weight step), so weight * mask would hold the same values."""
        self._premasked = True

    def masked_weight(self) -> torch.Tensor:
        if self.is_frozen():
            if self.__dict__.pop("_premasked", False):
                return self._weight()
            return self._weight() * self.frozen_mask()  # a frozen mask is weight-shaped
        if self.unit_source is None:
            # One autograd node for mask, product and penalty (`two_temperature.MaskedWeight`).
            positive = self.positive_mask() if self.binary_forward else None
            weight, logits, penalty = self._weight(), self._logits(), self.take_penalty_grad()
            return masked_weight_product(
                weight, logits, self.t_hard, self.t_soft, positive, penalty
            )
        return self.unit_product(self.mask())


class MaskedLinear(MaskedMixin, nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.weight_free_scale()
        if scale is None:
            return F.linear(x, self.masked_weight(), self.bias)
        if self.binary_forward and x.dim() == 2 and not self.is_frozen():
            # One node for mask, product and scale (`two_temperature.WeightFreeLinear`).
            positive = self.positive_mask()
            return weight_free_linear(x, self._logits(), positive, scale, self.t_soft)
        return F.linear(x, self.mask()).mul_(scale)  # the product's output is not saved


class MaskedConv2d(MaskedMixin, nn.Conv2d):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.weight_free_scale()
        if scale is not None:
            folded: torch.Tensor = self._conv_forward(x, self.mask(), None)
            return folded.mul_(scale)
        out: torch.Tensor = self._conv_forward(x, self.masked_weight(), self.bias)
        return out


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
