"""The two-temperature sigmoid: a sharp mask forward, a soft surrogate gradient backward.

"Differentiable Architecture Pruning for Transfer Learning", section 2.2, eq. (6)-(7) and
Algorithm A.1 eq. (15); "Disentangling Neural Architectures and Weights", eq. (5):

    forward:   v = sigmoid(t_hard * w)
    backward:  dL/dw = dL/dv * t_soft * sigmoid(t_soft * w) * (1 - sigmoid(t_soft * w))

The exact derivative t_hard * v * (1 - v) vanishes almost everywhere when t_hard is large;
the soft temperature keeps the gradient alive while the forward pass stays nearly binary.

`binary_mask_straight_through` is the same scheme at t_hard = infinity, the limit the
weight-free paper takes to extract its network (Algorithm 1, last line: psi_bin =
lim_{M -> inf} psi(B_M(w))): the forward pass is the exact {0,1} mask 1[w > 0] and the
backward pass keeps the soft derivative, as in BinaryConnect (its reference [3]). The network
trained is then the network returned: nothing changes when the mask is binarised.
"""

from __future__ import annotations

from typing import Any

import torch


class TwoTemperatureSigmoid(torch.autograd.Function):
    """sigmoid(t_hard w) forward; the derivative of sigmoid(t_soft w) backward."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, t_hard: float, t_soft: float) -> torch.Tensor:
        ctx.save_for_backward(logits)
        ctx.t_soft = t_soft
        return torch.sigmoid(t_hard * logits)

    @staticmethod
    def backward(ctx: Any, grad_mask: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (logits,) = ctx.saved_tensors
        soft = torch.sigmoid(ctx.t_soft * logits)
        return grad_mask * ctx.t_soft * soft * (1.0 - soft), None, None


def two_temperature_sigmoid(logits: torch.Tensor, t_hard: float, t_soft: float) -> torch.Tensor:
    """The relaxed mask v = sigmoid(t_hard w) with the soft surrogate gradient of eq. (7)."""
    assert t_hard > 0 and t_soft > 0, "temperatures are positive inverse temperatures"
    mask: torch.Tensor = TwoTemperatureSigmoid.apply(logits, t_hard, t_soft)  # type: ignore[no-untyped-call]
    return mask


class StraightThroughMask(torch.autograd.Function):
    """1[w > 0] forward; the derivative of sigmoid(t_soft w) backward."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, t_soft: float) -> torch.Tensor:
        ctx.save_for_backward(logits)
        ctx.t_soft = t_soft
        return (logits > 0).to(logits.dtype)

    @staticmethod
    def backward(ctx: Any, grad_mask: torch.Tensor) -> tuple[torch.Tensor, None]:
        (logits,) = ctx.saved_tensors
        soft = torch.sigmoid(ctx.t_soft * logits)
        return grad_mask * ctx.t_soft * soft * (1.0 - soft), None


def binary_mask_straight_through(logits: torch.Tensor, t_soft: float) -> torch.Tensor:
    """The exact mask 1[w > 0] with the soft surrogate gradient of eq. (7) (t_hard = inf)."""
    assert t_soft > 0, "t_soft is a positive inverse temperature"
    mask: torch.Tensor = StraightThroughMask.apply(logits, t_soft)  # type: ignore[no-untyped-call]
    return mask
