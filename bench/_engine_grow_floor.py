"""The floor of the `grow` job for `bench/engine.py`: the growth schedule written
the plain way, with torch only (no `archsearch.core.growth` code).

"Spotting expressivity bottlenecks and fixing them optimally", sections 3.1 to 3.4: the MLP
starts at `growth.initial_hidden` and is trained with the job's optimiser, batches and
epochs; every `growth.steps_between_growth` optimiser steps, for as many growth steps as the
job made (its `growth_steps` metric), every hidden layer in turn gets
- the statistics on the same number of samples as the job (n = base * ceil(sqrt(max(fan-in,
  next width))), capped): B_{l-1}, B_l and V_goal = -dl_i/da_{l+1} by one backward pass;
- the same solve: dW* = (V^T B_l / n) S_l^+ (Prop. 3.1), the neurons of Prop. 3.2 from the
  SVD of E^{-1/2} Q^T N on the eigen-directions of S above `eig_rtol * max` (float64
  decompositions, as the job), the top K with lambda_k^2 above the thresholds;
- the amplitudes of section 3.3: the same doubling / halving line search on the batch loss,
  for gamma_0 (dW*) then gamma (the neurons);
- the new neurons: W_{l+1} += gamma_0 dW*, both layers widened, Adam's moments carried over
  (zeros for the new entries).
The test split is measured after every epoch, as `plain_fit` does. Left out, as the job's
reporting rather than the method: the test evaluation after each growth step, the predicted
first-order decrease, the growth log and the cosine schedule after growth (a rate setting).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from _engine_plain import mlp_layers
from torch import nn

from archsearch.core.data.loaders import Dataset

Act = Callable[[torch.Tensor], torch.Tensor]
ACTIVATIONS: dict[str, Act] = {
    "selu": F.selu,
    "tanh": torch.tanh,
    "elu": F.elu,
    "gelu": F.gelu,
    "identity": lambda x: x,
}
SMALLEST, LARGEST = 2.0**-20, 2.0**40  # the job's line-search limits


def grow_floor(
    data: Dataset, spec: Any, metrics: dict[str, float], fused: bool = False
) -> tuple[int, ...]:
    """Train and grow like the job, `metrics["growth_steps"]` times; returns the widths.
    `fused`: Adam's fused kernel (the engine's choice) instead of torch's default."""
    g, t = spec.growth, spec.training
    act = ACTIVATIONS[g.activation]
    layers = mlp_layers(data, tuple(g.initial_hidden))
    params = [p for layer in layers for p in layer.parameters()]
    opt = torch.optim.Adam(params, lr=t.optimizer.lr, fused=fused or None)
    growths, done, step = int(metrics["growth_steps"]), 0, 0
    for _ in range(t.epochs):
        for index in torch.randperm(len(data.x_train)).split(t.batch_size):
            if done < growths and step == (done + 1) * g.steps_between_growth:
                layers, opt = grow_all(layers, opt, data, g, act)
                done += 1
            loss = F.cross_entropy(forward(layers, act, data.x_train[index]), data.y_train[index])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
        with torch.no_grad():
            out = forward(layers, act, data.x_test)
            (out.argmax(1) == data.y_test).float().mean().item()
    return tuple(layer.out_features for layer in layers[:-1])


def forward(layers: list[nn.Linear], act: Act, x: torch.Tensor) -> torch.Tensor:
    x = x.flatten(1)
    for layer in layers[:-1]:
        x = act(layer(x))
    return layers[-1](x)


def tail(layers: list[nn.Linear], act: Act, a_next: torch.Tensor, h: int) -> torch.Tensor:
    """Logits from the pre-activation of layers[h + 1]."""
    for layer in layers[h + 2 :]:
        a_next = layer(act(a_next))
    return a_next


def grow_all(
    layers: list[nn.Linear], opt: torch.optim.Optimizer, data: Dataset, g: Any, act: Act
) -> tuple[list[nn.Linear], torch.optim.Optimizer]:
    """One growth step: each hidden layer on its own statistics batch, then a new Adam of the
    same settings with the old moments carried over."""
    old = [p for layer in layers for p in layer.parameters()]
    for h in range(len(layers) - 1):
        fan = max(layers[h].in_features, layers[h + 1].out_features)
        n = max(1, min(g.stat_batch_base * math.ceil(math.sqrt(fan)), g.stat_batch_max))
        index = torch.randperm(len(data.x_train))[: min(n, len(data.x_train))]
        layers = grow_layer(layers, act, data.x_train[index], data.y_train[index], h, g)
    new = [p for layer in layers for p in layer.parameters()]
    fresh = torch.optim.Adam(new, **opt.defaults)
    for before, after in zip(old, new, strict=True):
        fresh.state[after] = {
            k: padded(v, after.shape) if v.shape == before.shape else v
            for k, v in opt.state.get(before, {}).items()
        }
    return layers, fresh


def padded(old: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    new = old.new_zeros(shape)
    new[tuple(slice(0, n) for n in old.shape)] = old
    return new


def grow_layer(
    layers: list[nn.Linear], act: Act, x: torch.Tensor, y: torch.Tensor, h: int, g: Any
) -> list[nn.Linear]:
    """Statistics, dW*, the neurons and their amplitudes at hidden layer h; layers widened."""
    n = x.shape[0]
    with torch.no_grad():
        b_in = x.flatten(1)
        for layer in layers[:h]:
            b_in = act(layer(b_in))  # (n, p - 1)
        mid = act(layers[h](b_in))  # (n, w)
    a_next = layers[h + 1](mid).detach().requires_grad_(True)  # (n, d)
    loss = F.cross_entropy(tail(layers, act, a_next, h), y)
    (grad,) = torch.autograd.grad(loss, a_next)
    ones = torch.ones(n, 1)
    b_in, b_mid, v = torch.cat([b_in, ones], 1), torch.cat([mid, ones], 1), -grad * n
    rtol = g.eig_rtol if g.eig_rtol is not None else torch.finfo(x.dtype).eps * math.sqrt(n)
    b64 = b_mid.double()
    values, q = eigh_cut(b64.T @ b64 / n, rtol)
    dw = ((v.double().T @ b64 / n) @ (q / values) @ q.T).float()  # (d, w + 1), Prop. 3.1
    v_proj = v - b_mid @ dw.T  # (n, d)
    values, q = eigh_cut((b_in.T @ b_in / n).double(), rtol)
    scaled = q / values.sqrt()  # (p, r) = Q E^{-1/2}
    u, lam, vh = torch.linalg.svd(scaled.T @ (b_in.T @ v_proj / n).double(), full_matrices=False)
    lam2 = lam.square()
    ok = (lam2 >= g.lambda_rel_threshold * lam2[0]) & (lam2 >= g.lambda_stop)
    k = min(g.max_neurons_per_step, int(ok.sum()))
    alpha = ((scaled @ u[:, :k]) * lam[:k].sqrt()).T.float()  # (k, p), Prop. 3.2
    omega = (vh[:k].T * lam[:k].sqrt()).float()  # (d, k)
    with torch.no_grad():
        a_now, delta, pre = a_next.detach(), b_mid @ dw.T, b_in @ alpha.T

        def loss_at(gamma0: float, gamma: float) -> float:
            moved = a_now + gamma0 * delta + gamma**0.5 * act(gamma**0.5 * pre) @ omega.T
            return F.cross_entropy(tail(layers, act, moved, h), y).item()

        gamma0, base = line_search(lambda s: loss_at(s, 0.0), loss.item(), g.max_amplitude)
        gamma, _ = line_search(lambda s: loss_at(gamma0, s), base, g.max_amplitude)
        return widened(layers, h, gamma0 * dw, gamma**0.5 * alpha, gamma**0.5 * omega, gamma)


def eigh_cut(s: torch.Tensor, rtol: float) -> tuple[torch.Tensor, torch.Tensor]:
    values, vectors = torch.linalg.eigh(0.5 * (s + s.T))
    keep = values > rtol * values.max()
    return values[keep], vectors[:, keep]


def line_search(
    loss_at: Callable[[float], float], base: float, cap: float | None
) -> tuple[float, float]:
    """Double from 1 while the loss falls, else halve until it is below `base` (section 3.3)."""
    limit = LARGEST if cap is None else min(cap, LARGEST)
    gamma = min(1.0, limit)
    value = loss_at(gamma)
    if not value < base:
        while gamma > SMALLEST:
            gamma /= 2
            value = loss_at(gamma)
            if value < base:
                return gamma, value
        return 0.0, base
    while 2 * gamma <= limit and (doubled := loss_at(2 * gamma)) < value:
        gamma, value = 2 * gamma, doubled
    return gamma, value


def widened(
    layers: list[nn.Linear],
    h: int,
    nudge: torch.Tensor,
    alpha: torch.Tensor,
    omega: torch.Tensor,
    gamma: float,
) -> list[nn.Linear]:
    first, second = layers[h], layers[h + 1]
    second.weight += nudge[:, :-1]
    second.bias += nudge[:, -1]
    if gamma == 0.0 or alpha.shape[0] == 0:
        return layers
    wider = nn.Linear(first.in_features, first.out_features + alpha.shape[0])
    wider.weight.copy_(torch.cat([first.weight, alpha[:, :-1]]))
    wider.bias.copy_(torch.cat([first.bias, alpha[:, -1]]))
    reader = nn.Linear(wider.out_features, second.out_features)
    reader.weight.copy_(torch.cat([second.weight, omega], 1))
    reader.bias.copy_(second.bias)
    return [*layers[:h], wider, reader, *layers[h + 2 :]]
