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


def soft_sigmoid_grad(grad_mask: torch.Tensor, logits: torch.Tensor, t_soft: float) -> torch.Tensor:
    """grad_mask * t_soft * s * (1 - s) with s = sigmoid(t_soft * logits), in 4 passes.

    torch's fused `sigmoid_backward` (g * (1 - s) * s) replaces three separate products and
    the `1 - s` temporary (the surrogate gradient was the mask's costliest step);
    the factors are multiplied in another order, so the result may differ in the last bit.
    """
    soft = torch.mul(logits, t_soft).sigmoid_()
    grad: torch.Tensor = torch.ops.aten.sigmoid_backward(grad_mask, soft)
    return grad.mul_(t_soft)


def positive_indicator(logits: torch.Tensor) -> torch.Tensor:
    """1[w > 0] in the logits' dtype (NaN -> 0, as the comparison).

    sign(w) clamped at 0 is the same tensor, but float-to-float kernels are vectorised where
    a comparison to a bool tensor and its conversion back are not: ~5x faster on a CPU.
    """
    return torch.sign(logits).clamp_(min=0.0)


class TwoTemperatureSigmoid(torch.autograd.Function):
    """sigmoid(t_hard w) forward; the derivative of sigmoid(t_soft w) backward."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, t_hard: float, t_soft: float) -> torch.Tensor:
        ctx.save_for_backward(logits)
        ctx.t_soft = t_soft
        return torch.mul(logits, t_hard).sigmoid_()  # in place: one buffer, not two

    @staticmethod
    def backward(ctx: Any, grad_mask: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (logits,) = ctx.saved_tensors
        return soft_sigmoid_grad(grad_mask, logits, ctx.t_soft), None, None


def two_temperature_sigmoid(logits: torch.Tensor, t_hard: float, t_soft: float) -> torch.Tensor:
    """The relaxed mask v = sigmoid(t_hard w) with the soft surrogate gradient of eq. (7)."""
    assert t_hard > 0 and t_soft > 0, "temperatures are positive inverse temperatures"
    mask: torch.Tensor = TwoTemperatureSigmoid.apply(logits, t_hard, t_soft)  # type: ignore[no-untyped-call]
    return mask


class StraightThroughMask(torch.autograd.Function):
    """1[w > 0] forward (or the given `positive`, that same indicator formed before);
    the derivative of sigmoid(t_soft w) backward."""

    @staticmethod
    def forward(
        ctx: Any, logits: torch.Tensor, t_soft: float, positive: torch.Tensor | None
    ) -> torch.Tensor:
        ctx.save_for_backward(logits)
        ctx.t_soft = t_soft
        # A new tensor object over the cached indicator's storage: autograd marks the
        # output it returns, and the cache must stay a plain tensor with no history.
        return positive_indicator(logits) if positive is None else positive.detach()

    @staticmethod
    def backward(ctx: Any, grad_mask: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (logits,) = ctx.saved_tensors
        return soft_sigmoid_grad(grad_mask, logits, ctx.t_soft), None, None


def binary_mask_straight_through(
    logits: torch.Tensor, t_soft: float, positive: torch.Tensor | None = None
) -> torch.Tensor:
    """The exact mask 1[w > 0] with the soft surrogate gradient of eq. (7) (t_hard = inf);
    `positive`, when given, is that indicator already formed from the same logits."""
    assert t_soft > 0, "t_soft is a positive inverse temperature"
    mask: torch.Tensor = StraightThroughMask.apply(logits, t_soft, positive)  # type: ignore[no-untyped-call]
    return mask


class MaskedWeight(torch.autograd.Function):
    """weight * mask in one node: mask = sigmoid(t_hard w), or the given exact 1[w > 0]
    (`positive`); backward dL/dweight = g * mask and dL/dw through sigmoid(t_soft w).

    The same products as `weight * two_temperature_sigmoid(...)` (to the bit), without the
    mask as a separate graph output or a second node; a cached `positive` indicator (the
    one the density count already made from the same logits) is not formed again.
    """

    @staticmethod
    def forward(
        ctx: Any,
        weight: torch.Tensor,
        logits: torch.Tensor,
        t_hard: float,
        t_soft: float,
        positive: torch.Tensor | None,
    ) -> torch.Tensor:
        mask = torch.mul(logits, t_hard).sigmoid_() if positive is None else positive
        ctx.save_for_backward(weight, logits)
        ctx.mask, ctx.t_soft = mask, t_soft
        return weight * mask

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        weight, logits = ctx.saved_tensors
        needs_weight, needs_logits = ctx.needs_input_grad[:2]
        grad_weight = grad * ctx.mask if needs_weight else None
        grad_logits = soft_sigmoid_grad(grad * weight, logits, ctx.t_soft) if needs_logits else None
        return grad_weight, grad_logits, None, None, None


def masked_weight_product(
    weight: torch.Tensor,
    logits: torch.Tensor,
    t_hard: float,
    t_soft: float,
    positive: torch.Tensor | None = None,
) -> torch.Tensor:
    """weight * sigmoid(t_hard w) (or weight * `positive`, the exact 1[w > 0] of the binary
    forward) with the soft surrogate gradient of eq. (7) to the logits."""
    assert t_hard > 0 and t_soft > 0, "temperatures are positive inverse temperatures"
    product: torch.Tensor = MaskedWeight.apply(weight, logits, t_hard, t_soft, positive)  # type: ignore[no-untyped-call]
    return product


class WeightFreeLinear(torch.autograd.Function):
    """b * (x @ m^T) for 2-D x, with m = 1[w > 0] given (`positive`) and the surrogate
    gradient of sigmoid(t_soft w) to the logits, in one node.

    The weight-free layer of "Disentangling Neural Architectures and Weights" (links in
    {0, b}). As `linear(x, binary_mask_straight_through(w)) * b`, but b * t_soft multiplies
    the (batch, out) output gradient once, where the general path scales it by b and then
    the weight-sized mask gradient by t_soft: one weight-sized pass and two autograd nodes
    fewer a step. The same formula; the float rounding of the products differs.
    """

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,  # (B, in)
        logits: torch.Tensor,  # (out, in)
        positive: torch.Tensor,  # (out, in): 1[logits > 0]
        scale: float,
        t_soft: float,
    ) -> torch.Tensor:
        ctx.save_for_backward(x, logits, positive)
        ctx.scale, ctx.t_soft = scale, t_soft
        return torch.mm(x, positive.t()).mul_(scale)  # (B, out)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, logits, positive = ctx.saved_tensors
        needs_x, needs_logits = ctx.needs_input_grad[:2]
        grad_x = torch.mm(grad * ctx.scale, positive) if needs_x else None
        grad_logits = None
        if needs_logits:
            grad_mask = torch.mm((grad * (ctx.scale * ctx.t_soft)).t(), x)  # (out, in)
            soft = torch.mul(logits, ctx.t_soft).sigmoid_()
            grad_logits = torch.ops.aten.sigmoid_backward(grad_mask, soft)
        return grad_x, grad_logits, None, None, None


def weight_free_linear(
    x: torch.Tensor, logits: torch.Tensor, positive: torch.Tensor, scale: float, t_soft: float
) -> torch.Tensor:
    """b * (x @ 1[w > 0]^T) with the soft surrogate gradient of eq. (7) to the logits w."""
    assert t_soft > 0, "t_soft is a positive inverse temperature"
    out: torch.Tensor = WeightFreeLinear.apply(x, logits, positive, scale, t_soft)  # type: ignore[no-untyped-call]
    return out
