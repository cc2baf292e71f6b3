"""Masked linear and conv layers: a mask logit per weight, held as module state.

"Differentiable Architecture Pruning for Transfer Learning", section 2.1-2.2: the parent
network F(m * theta) with a mask m = sigmoid(t_hard w) trained through the two-temperature
surrogate gradient; the final architecture is m = 1[w > 0].

Any model of the registry is masked generically (`nn.masked_model.mask_model`): every
nn.Linear / nn.Conv2d (except the ones kept dense) is swapped for a subclass that owns
`mask_logits` (a Parameter) and `mask_frozen` (a buffer), so masks move with `.to()` and
live in the `state_dict`; the subclasses are still nn.Linear / nn.Conv2d, so FLOP counters
and init code keep working. A frozen layer uses the exact binary mask 1[w > 0] and its
logits receive no gradient.

Unit granularity (`units`, one logit per unit read): `nn.unit_columns`. Weight-free layers
("Disentangling Neural Architectures and Weights", section 5: links in {0, b}) compute
b * (x @ m^T) with the {0, 1} mask m itself as the matrix (`nn.weight_free`). A model's
masks are read, set, frozen and counted, and made weight-free, by `nn.masked_model`.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.nn.two_temperature import (
    binary_mask_straight_through,
    masked_weight_product,
    positive_indicator,
    two_temperature_sigmoid,
    weight_free_linear,
)
from archsearch.core.nn.unit_columns import UnitColumns
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
