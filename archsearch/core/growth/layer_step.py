"""One growth step at one hidden layer of an MLP (sections 3.1 to 3.3 of "Spotting
expressivity bottlenecks and fixing them optimally").

On a statistics batch: V_goal = -dl_i/da_{l+1} by backprop, B_{l-1} and B_l; dW* (Prop. 3.1);
V_goal_proj = V_goal - B_l dW*^T; the neurons of Prop. 3.2; gamma_0 then gamma by line
search on the loss (eqs. 6-7); finally the layers are widened in place.

The line search (section 3.3: "a local minimum of the loss" over a positive neighbourhood of
0) brackets that minimum by doubling from gamma = 1 until the loss rises, with no fixed cap:
a grid capped at 16 stopped at its cap in 17 of 24 MNIST layer steps, i.e. it cut the step
short rather than finding the minimum. `max_amplitude` restores a cap when wanted.

The model is the registry `MLP`: `model.layers` is a ModuleList of nn.Linear (classifier
last) and `model.act` the activation. Hidden layer `h` is the output of `model.layers[h]`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.growth import solver
from archsearch.core.nn.growable import (
    activation_of,
    linears,
    nudge_linear,
    replace_linear,
    widen_pair,
    with_bias_column,
)

# The line search starts at gamma = 1 (the projected functional gradient step with eta = 1)
# and halves down to SMALLEST_AMPLITUDE or doubles up to LARGEST_AMPLITUDE, a safety net
# that a finite loss curve never reaches in practice (reaching it is reported as a bound).
SMALLEST_AMPLITUDE = 2.0**-20
LARGEST_AMPLITUDE = 2.0**40


@dataclass(frozen=True)
class LayerStats:
    """Everything the closed forms need, for hidden layer h on one batch."""

    b_in: torch.Tensor  # (n, p) input activities of layers[h], with the ones column
    b_mid: torch.Tensor  # (n, w + 1) activities of the hidden layer itself, with ones
    v_goal: torch.Tensor  # (n, d) -dl_i/da_{h+1}, per sample
    loss: float  # mean loss on the batch
    a_next: torch.Tensor  # (n, d) pre-activation of layers[h + 1], for the line search


@dataclass
class LayerGrowth:
    """The record of one layer's growth step (one entry of growth.json)."""

    layer: int
    width_before: int
    added: int
    lambdas: list[float]
    lambda2_sum: float  # sum of lambda_k^2 over the neurons added
    gamma0: float
    gamma: float
    loss_before: float
    loss_after: float
    predicted_decrease: float  # first order in (gamma0, gamma) at the chosen amplitudes
    kept_directions: int = 0  # eigen-directions of S kept by the eigenvalue cut
    eig_rtol: float = 0.0  # the cut used, relative to the largest eigenvalue
    gamma0_at_bound: bool = False  # the line search stopped at a limit, not at a minimum
    gamma_at_bound: bool = False

    @property
    def measured_decrease(self) -> float:
        return self.loss_before - self.loss_after


def _tail(model: nn.Module, a_next: torch.Tensor, h: int) -> torch.Tensor:
    """Logits from the pre-activation of layers[h + 1]."""
    out = a_next
    act = activation_of(model)
    for layer in linears(model)[h + 2 :]:
        out = layer(act(out))
    return out  # (n, classes)


@torch.no_grad()
def layer_input(model: nn.Module, x: torch.Tensor, h: int) -> torch.Tensor:
    """Activities entering layers[h] (no bias column)."""
    out = x.flatten(1)
    act = activation_of(model)
    for layer in linears(model)[:h]:
        out = act(layer(out))
    return out  # (n, in_features of layers[h])


def layer_stats(model: nn.Module, x: torch.Tensor, y: torch.Tensor, h: int) -> LayerStats:
    """B_{l-1}, B_l and V_goal at layers[h + 1] on (x, y) (section 2.3, eta = 1)."""
    layers, act = linears(model), activation_of(model)
    assert h + 1 < len(layers), f"layer {h} is the classifier, it cannot grow"
    b_in = layer_input(model, x, h)  # (n, p)
    with torch.no_grad():
        mid = act(layers[h](b_in))  # (n, w)
    a_next = layers[h + 1](mid).detach().requires_grad_(True)  # (n, d)
    loss = F.cross_entropy(_tail(model, a_next, h), y)
    (grad,) = torch.autograd.grad(loss, a_next)
    v_goal = -grad * x.shape[0]  # per-sample gradients of the per-sample losses
    return LayerStats(
        with_bias_column(b_in), with_bias_column(mid), v_goal.detach(), loss.item(), a_next.detach()
    )


def one_sided_slopes(act: nn.Module) -> tuple[float, float]:
    """sigma'(0+) and sigma'(0-): equal for tanh, 1.05 and 1.76 for SELU."""
    eps = 1e-6
    probe = torch.tensor([eps, -eps], dtype=torch.float64)
    values = act(probe) - act(torch.zeros(2, dtype=torch.float64))
    return float(values[0] / eps), float(values[1] / -eps)


def candidate(
    model: nn.Module,
    stats: LayerStats,
    y: torch.Tensor,
    h: int,
    dw: torch.Tensor,
    neurons: solver.Neurons,
) -> Callable[[float, float], float]:
    """`loss(gamma0, gamma)`: the loss with W_{h+1} + gamma0 dW* and the neurons scaled by
    sqrt(|gamma|) on each side (a negative gamma flips the output weights; random neurons only).

    The products with B_{l-1} are computed once (a_{h+1} comes with the statistics), so each
    line-search point costs only the new neurons' activation and the layers after h + 1.
    """
    act = activation_of(model)
    a_next = stats.a_next  # (n, d)
    with torch.no_grad():
        delta = stats.b_mid @ dw.T  # (n, d)
        pre_new = stats.b_in @ neurons.in_weights.T  # (n, K)

    @torch.no_grad()
    def loss(gamma0: float, gamma: float) -> float:
        root, sign = abs(gamma) ** 0.5, (1.0 if gamma >= 0 else -1.0)
        moved = a_next + gamma0 * delta + sign * root * act(root * pre_new) @ neurons.out_weights.T
        return F.cross_entropy(_tail(model, moved, h), y).item()

    return loss


def candidate_loss(
    model: nn.Module,
    stats: LayerStats,
    y: torch.Tensor,
    h: int,
    dw: torch.Tensor,
    neurons: solver.Neurons,
    gamma0: float,
    gamma: float,
) -> float:
    """One evaluation of `candidate(...)` (see there)."""
    return candidate(model, stats, y, h, dw, neurons)(gamma0, gamma)


@dataclass(frozen=True)
class Amplitude:
    """A line-search result: the amplitude, the loss there, and whether the search stopped at
    a limit (the cap, or the smallest amplitude) rather than at a local minimum."""

    gamma: float
    loss: float
    at_bound: bool = False


def line_search(
    loss_at: Callable[[float], float], base: float, largest: float | None = None
) -> Amplitude:
    """A local minimum of `loss_at` over gamma > 0 (eqs. 6-7), or gamma 0 when none is below
    `base`: double from 1 while the loss falls, else halve until it falls below `base`."""
    limit = LARGEST_AMPLITUDE if largest is None else min(largest, LARGEST_AMPLITUDE)
    gamma = min(1.0, limit)
    value = loss_at(gamma)
    if not value < base:  # NaN compares False: a diverging amplitude is never chosen
        while gamma > SMALLEST_AMPLITUDE:
            gamma /= 2
            value = loss_at(gamma)
            if value < base:
                return Amplitude(gamma, value, at_bound=gamma <= SMALLEST_AMPLITUDE)
        return Amplitude(0.0, base)
    while 2 * gamma <= limit:
        doubled = loss_at(2 * gamma)
        if not doubled < value:
            return Amplitude(gamma, value)
        gamma, value = 2 * gamma, doubled
    return Amplitude(gamma, value, at_bound=True)


def signed_line_search(
    loss_at: Callable[[float], float], base: float, largest: float | None = None
) -> Amplitude:
    """Both signs (random neurons have no preferred orientation); the lower loss wins."""
    positive = line_search(loss_at, base, largest)
    negative = line_search(lambda g: loss_at(-g), base, largest)
    if negative.loss < positive.loss:
        return Amplitude(-negative.gamma, negative.loss, negative.at_bound)
    return positive


def amplitudes(
    loss_at: Callable[[float, float], float], base: float, policy: LayerPolicy
) -> tuple[Amplitude, Amplitude]:
    """gamma_0 for dW* (eq. 6), then gamma for the new neurons at that gamma_0 (eq. 7)."""
    first = line_search(lambda g: loss_at(g, 0.0), base, policy.max_amplitude)
    search = signed_line_search if policy.random else line_search
    second = search(lambda g: loss_at(first.gamma, g), first.loss, policy.max_amplitude)
    return first, second


def first_order_rate(act: nn.Module, stats: LayerStats, neurons: solver.Neurons) -> float:
    """d loss / d gamma at gamma = 0+ for the neurons alone (exact one-sided slopes)."""
    if neurons.count == 0:
        return 0.0
    slope_pos, slope_neg = one_sided_slopes(act)
    pre = stats.b_in @ neurons.in_weights.T  # (n, K)
    slopes = torch.where(pre > 0, slope_pos, slope_neg)
    moved = (slopes * pre) @ neurons.out_weights.T  # (n, d) first-order move of a_{h+1}
    return -float((stats.v_goal * moved).sum() / stats.v_goal.shape[0])


@dataclass(frozen=True)
class LayerPolicy:
    """How many neurons to keep and where they come from (a slice of GrowSpec)."""

    max_neurons: int = 16
    rel_threshold: float = 0.02
    abs_threshold: float = 0.0
    rtol: float | None = None  # None: the round-off level of S (`solver.roundoff_rtol`)
    random: bool = False
    max_amplitude: float | None = None  # None: the line search expands until the loss rises

    def rtol_for(self, rows: int, dtype: torch.dtype) -> float:
        return self.rtol if self.rtol is not None else solver.roundoff_rtol(rows, dtype)


def solve_layer(stats: LayerStats, policy: LayerPolicy) -> tuple[torch.Tensor, solver.Neurons]:
    """dW* (Prop. 3.1) and the selected neurons of Prop. 3.2 on V_goal_proj."""
    rtol = policy.rtol_for(stats.b_in.shape[0], stats.b_in.dtype)
    dw = solver.best_update(stats.v_goal, stats.b_mid, rtol)  # (d, w + 1)
    v_proj = stats.v_goal - stats.b_mid @ dw.T  # (n, d)
    neurons = solver.optimal_neurons(stats.b_in, v_proj, rtol)
    chosen = solver.select(neurons, policy.max_neurons, policy.rel_threshold, policy.abs_threshold)
    return dw, chosen


def grow_layer(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    h: int,
    policy: LayerPolicy,
    generator: torch.Generator | None = None,
) -> LayerGrowth:
    """Compute, line-search and apply one growth step of hidden layer h, in place."""
    stats = layer_stats(model, x, y, h)
    dw, neurons = solve_layer(stats, policy)
    if policy.random:
        assert generator is not None, "random neurons need a seeded generator"
        neurons = solver.random_like(neurons, generator)
    first, second = amplitudes(candidate(model, stats, y, h, dw, neurons), stats.loss, policy)
    gamma0, gamma = first.gamma, second.gamma
    if gamma == 0.0:
        neurons = _none(neurons)  # zero-amplitude neurons would be dead forever: add none
    lam2 = neurons.lambdas[: neurons.count].square().sum().item() if not policy.random else 0.0
    predicted = gamma0 * float((stats.v_goal * (stats.b_mid @ dw.T)).sum()) / x.shape[0]
    predicted -= abs(gamma) * first_order_rate(activation_of(model), stats, _signed(neurons, gamma))
    record = LayerGrowth(
        layer=h,
        width_before=linears(model)[h].out_features,
        added=neurons.count,
        lambdas=[float(v) for v in neurons.lambdas],
        lambda2_sum=lam2,
        gamma0=gamma0,
        gamma=gamma,
        loss_before=stats.loss,
        loss_after=second.loss,
        predicted_decrease=predicted,
        kept_directions=neurons.directions,
        eig_rtol=policy.rtol_for(x.shape[0], stats.b_in.dtype),
        gamma0_at_bound=first.at_bound,
        gamma_at_bound=second.at_bound,
    )
    _apply(model, h, dw, neurons, gamma0, gamma)
    return record


def _none(neurons: solver.Neurons) -> solver.Neurons:
    return solver.Neurons(
        neurons.in_weights[:0], neurons.out_weights[:, :0], neurons.lambdas, neurons.directions
    )


def _signed(neurons: solver.Neurons, gamma: float) -> solver.Neurons:
    sign = 1.0 if gamma >= 0 else -1.0
    return solver.Neurons(
        neurons.in_weights, sign * neurons.out_weights, neurons.lambdas, neurons.directions
    )


@torch.no_grad()
def _apply(
    model: nn.Module, h: int, dw: torch.Tensor, neurons: solver.Neurons, gamma0: float, gamma: float
) -> None:
    if gamma0 != 0.0:
        nudge_linear(linears(model)[h + 1], gamma0 * dw)
    if neurons.count == 0:
        return
    root = abs(gamma) ** 0.5
    signed = _signed(neurons, gamma)
    layers = linears(model)
    first, second = widen_pair(
        layers[h], layers[h + 1], root * signed.in_weights, root * signed.out_weights
    )
    replace_linear(model, h, first)
    replace_linear(model, h + 1, second)
