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

# Above this, sigmoid(x) rounds to exactly 1 in float32 and float64 (1 - e^-40 is within half
# an ulp of 1), and exp(x) still has no overflow in float32 (above 88.7).
SIGMOID_ONE_ABOVE = 40.0


def times_sigmoid(values: torch.Tensor, logits: torch.Tensor, scale: float) -> torch.Tensor:
    """values * sigmoid(scale * logits) in one pass, without the sigmoid as a tensor.

    torch's `softplus_backward(g, x, beta, threshold)` is g * d/dx softplus_beta(x) =
    g * sigmoid(beta x): the scaling, the sigmoid and the product in one fused kernel, where
    `torch.mul(logits, scale).sigmoid_() * values` makes three passes over weight-sized
    tensors and keeps a fourth. Above the threshold the kernel returns g itself, which is
    g * sigmoid to the bit there. The kernel writes the sigmoid as e^x / (e^x + 1): the same
    value up to float rounding (about 1 ulp), not always the same bits as `torch.sigmoid`.
    """
    product: torch.Tensor = torch.ops.aten.softplus_backward(
        values, logits, scale, SIGMOID_ONE_ABOVE
    )
    return product


def scaled_sigmoid(logits: torch.Tensor, scale: float) -> torch.Tensor:
    """sigmoid(scale * logits) in one pass (`times_sigmoid` of a broadcast one)."""
    return times_sigmoid(logits.new_ones(()).expand_as(logits), logits, scale)


def soft_sigmoid_grad(grad_mask: torch.Tensor, logits: torch.Tensor, t_soft: float) -> torch.Tensor:
    """grad_mask * t_soft * s * (1 - s) with s = sigmoid(t_soft * logits), in 3 passes.

    s in one pass (`scaled_sigmoid`), then torch's fused `sigmoid_backward` (g * (1 - s) * s)
    written over s, then the factor t_soft: no temporary beyond the result. The factors are
    multiplied in another order than the formula, so the last bit may differ.
    """
    soft = scaled_sigmoid(logits, t_soft)
    torch.ops.aten.sigmoid_backward.grad_input(grad_mask, soft, grad_input=soft)
    return soft.mul_(t_soft)


def surrogate_logits_grad(
    grad: torch.Tensor,
    weight: torch.Tensor,
    logits: torch.Tensor,
    t_soft: float,
    penalty_grad: torch.Tensor | None,
) -> torch.Tensor:
    """dL/dw of L(weight * mask): penalty_grad + t_soft * grad * weight * s (1 - s), with
    s = sigmoid(t_soft w), in 3 passes over weight-sized tensors, all into one new tensor.

    `penalty_grad` (the density penalty's gradient, optional) is read by the last pass
    instead of being added to the gradient afterwards. In the order s, g s (1 - s), then
    one `addcmul` (penalty + t_soft * that * weight): the float rounding of the products
    differs from the formula's order.
    """
    soft = scaled_sigmoid(logits, t_soft)
    torch.ops.aten.sigmoid_backward.grad_input(grad, soft, grad_input=soft)
    base = soft.new_zeros(()) if penalty_grad is None else penalty_grad
    return torch.addcmul(base, soft, weight, value=t_soft, out=soft)


def positive_indicator(logits: torch.Tensor) -> torch.Tensor:
    """1[w > 0] in the logits' dtype (NaN -> 0, as the comparison), in one pass.

    A comparison written straight into a float tensor is one vectorised kernel (1.0 where
    true); into a bool tensor and converted back it is two passes and ~5x slower on a CPU.
    """
    return torch.gt(logits, 0.0, out=torch.empty_like(logits))


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
    (`positive`); backward dL/dweight = g * mask and dL/dw through sigmoid(t_soft w), plus
    the density penalty's gradient when one is given (`penalty_grad`, shaped like w).

    The relaxed mask is never a tensor: the forward forms weight * sigmoid(t_hard w) and the
    backward g * sigmoid(t_hard w) each in one pass (`times_sigmoid`), where forming the
    mask, keeping it and multiplying by it took three passes and a saved tensor. The same
    formula as `weight * two_temperature_sigmoid(...)` to float rounding (about 1 ulp); a
    cached `positive` indicator (the one the density count made from the same logits) is
    not formed again.
    """

    @staticmethod
    def forward(
        ctx: Any,
        weight: torch.Tensor,
        logits: torch.Tensor,
        t_hard: float,
        t_soft: float,
        positive: torch.Tensor | None,
        penalty_grad: torch.Tensor | None,
    ) -> torch.Tensor:
        ctx.save_for_backward(weight, logits)
        ctx.positive, ctx.penalty_grad = positive, penalty_grad
        ctx.t_hard, ctx.t_soft = t_hard, t_soft
        if positive is None:
            return times_sigmoid(weight, logits, t_hard)
        return weight * positive

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        weight, logits = ctx.saved_tensors
        needs_weight, needs_logits = ctx.needs_input_grad[:2]
        grad_weight = grad_logits = None
        if needs_weight:
            positive = ctx.positive
            grad_weight = (
                times_sigmoid(grad, logits, ctx.t_hard) if positive is None else grad * positive
            )
        if needs_logits:
            grad_logits = surrogate_logits_grad(grad, weight, logits, ctx.t_soft, ctx.penalty_grad)
        return grad_weight, grad_logits, None, None, None, None


def masked_weight_product(
    weight: torch.Tensor,
    logits: torch.Tensor,
    t_hard: float,
    t_soft: float,
    positive: torch.Tensor | None = None,
    penalty_grad: torch.Tensor | None = None,
) -> torch.Tensor:
    """weight * sigmoid(t_hard w) (or weight * `positive`, the exact 1[w > 0] of the binary
    forward) with the soft surrogate gradient of eq. (7) to the logits, and `penalty_grad`
    (a constant of this step, shaped like w) added to the logits' gradient."""
    assert t_hard > 0 and t_soft > 0, "temperatures are positive inverse temperatures"
    product: torch.Tensor = MaskedWeight.apply(  # type: ignore[no-untyped-call]
        weight, logits, t_hard, t_soft, positive, penalty_grad
    )
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
            soft = scaled_sigmoid(logits, ctx.t_soft)
            grad_logits = torch.ops.aten.sigmoid_backward.grad_input(
                grad_mask, soft, grad_input=soft
            )
        return grad_x, grad_logits, None, None, None


def weight_free_linear(
    x: torch.Tensor, logits: torch.Tensor, positive: torch.Tensor, scale: float, t_soft: float
) -> torch.Tensor:
    """b * (x @ 1[w > 0]^T) with the soft surrogate gradient of eq. (7) to the logits w."""
    assert t_soft > 0, "t_soft is a positive inverse temperature"
    out: torch.Tensor = WeightFreeLinear.apply(x, logits, positive, scale, t_soft)  # type: ignore[no-untyped-call]
    return out
