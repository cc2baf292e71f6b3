"""The plain-PyTorch loops `bench/engine.py` measures the jobs against (issue 16).

Two kinds, both written with nothing but torch, on the job's own model widths, data
tensors, batch size, epochs and optimisers:
- the plain dense loop of each case: what training that network costs with no method at all;
- the floor of a method: the same minimal loop plus only the extra work the method really
  has to do, written the plain way. A job's ratio to its floor is its engine overhead; the
  floor's ratio to the dense loop is the price of the method itself.

Floors:
- prune (learned, "Differentiable Architecture Pruning", section 2.2): a logit per weight,
  mask = sigmoid(t_hard w) forward with the gradient of sigmoid(t_soft w), the density
  penalty gamma * sum (1 + w)^2, a second Adam on the logits with the logit cap, a density
  count after each step (what decides the freeze), and the job's own freeze step (read from
  its metrics): from then on the fixed mask 1[w > 0], no penalty, no second optimiser.
- prune (weight-free, "Disentangling Neural Architectures and Weights", eq. 5): the
  weights fixed to 1 / sqrt(fan_in), biases zero, only the logits trained, mask 1[w > 0]
  forward with the gradient of sigmoid(t_soft w), Adam on the logits at every step.
- dnw ("Discovering Neural Wirings", Algorithm 1): the search job's own graph model with the
  straight-through gradient to every admissible edge, and after each step the real edges
  re-chosen as the top-k of |w| with a plain `torch.topk`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.data.loaders import Dataset
from archsearch.core.models import Architecture, create_model
from archsearch.core.search.strategies import searchable_edges
from archsearch.core.spec import JobBase


def plain_fit(
    model: nn.Module,
    data: Dataset,
    epochs: int,
    batch_size: int,
    opt: torch.optim.Optimizer,
    after_step: Callable[[], None] | None = None,
) -> float:
    """The minimal loop: shuffle, step, and measure the test split after every epoch."""
    accuracy = 0.0
    for _ in range(epochs):
        model.train()
        for index in torch.randperm(len(data.x_train)).split(batch_size):
            loss = F.cross_entropy(model(data.x_train[index]), data.y_train[index])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if after_step is not None:
                after_step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(data.x_test).argmax(1) == data.y_test).float().mean().item()
    return accuracy


def mlp_layers(data: Dataset, widths: tuple[int, ...]) -> list[nn.Linear]:
    sizes = (data.x_train[0].numel(), *widths, data.num_classes)
    return [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:], strict=False)]


def plain_mlp(data: Dataset, spec: JobBase, widths: tuple[int, ...], act: type[nn.Module]) -> None:
    layers: list[nn.Module] = [nn.Flatten()]
    for layer in mlp_layers(data, widths)[:-1]:
        layers += [layer, act()]
    model = nn.Sequential(*layers, mlp_layers(data, widths)[-1])
    opt = torch.optim.Adam(model.parameters(), lr=spec.training.optimizer.lr)
    plain_fit(model, data, spec.training.epochs, spec.training.batch_size, opt)


def graph_model(data: Dataset, spec: Any, gradient_to: str) -> tuple[nn.Module, Any]:
    model = create_model(Architecture(spec.model, data.input_shape, data.num_classes))
    for layer in searchable_edges(model):
        layer.gradient_to = gradient_to
    o = spec.training.optimizer
    opt = torch.optim.SGD(
        model.parameters(), lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay
    )
    return model, opt


def plain_graph(data: Dataset, spec: JobBase) -> None:
    """The search job's neural graph trained on its initial (random) wiring, fixed."""
    model, opt = graph_model(data, spec, "real")
    plain_fit(model, data, spec.training.epochs, spec.training.batch_size, opt)


def dnw_floor(data: Dataset, spec: JobBase) -> None:
    """The graph with gradients to every admissible edge and a top-k of |w| after each step."""
    model, opt = graph_model(data, spec, "admissible")
    layers = searchable_edges(model)

    @torch.no_grad()
    def select() -> None:
        for layer in layers:
            scores = layer.weight.abs().masked_fill(~layer.admissible, -1.0).flatten()
            mask = torch.zeros_like(scores)
            mask[scores.topk(layer.k).indices] = 1.0
            layer.mask.copy_(mask.view_as(layer.mask))

    plain_fit(model, data, spec.training.epochs, spec.training.batch_size, opt, select)


def masked_forward(
    layers: list[nn.Linear], masks: list[torch.Tensor], x: torch.Tensor
) -> torch.Tensor:
    x = x.flatten(1)
    for i, (layer, mask) in enumerate(zip(layers, masks, strict=True)):
        x = F.linear(x, layer.weight * mask, layer.bias)
        x = F.relu(x) if i + 1 < len(layers) else x
    return x


def initial_logits(layers: list[nn.Linear], spec: Any) -> list[nn.Parameter]:
    s = spec.logit_init
    if spec.mask_init == "normal":
        return [nn.Parameter(s * torch.randn_like(layer.weight)) for layer in layers]
    return [nn.Parameter(s * (0.5 + 0.5 * torch.rand_like(layer.weight))) for layer in layers]


def prune_floor(data: Dataset, spec: Any, frozen_at: int) -> None:
    """The two-temperature mask loop (learned) or the weight-free one; see the module doc."""
    layers = mlp_layers(data, spec.model.hidden)
    logits = initial_logits(layers, spec)
    free = spec.weights == "free"
    if free:
        with torch.no_grad():
            for layer in layers:
                layer.weight.fill_(1.0 / math.sqrt(layer.in_features))
                layer.bias.zero_()
                layer.requires_grad_(False)
    weights = (
        None
        if free
        else torch.optim.Adam(
            [p for layer in layers for p in layer.parameters()], lr=spec.training.optimizer.lr
        )
    )
    mask_opt = torch.optim.Adam(logits, lr=spec.mask_lr)
    t_hard, t_soft = spec.temperatures.t_hard, spec.temperatures.soft
    penalised = spec.penalty.schedule != "none"
    cap = spec.logit_init if spec.density is not None and spec.cap_logits else None
    frozen: list[torch.Tensor] | None = None
    step = 0
    for _ in range(spec.training.epochs):
        for index in torch.randperm(len(data.x_train)).split(spec.training.batch_size):
            masks = frozen or [two_temperature(w, t_hard, t_soft, binary=free) for w in logits]
            loss = F.cross_entropy(
                masked_forward(layers, masks, data.x_train[index]), data.y_train[index]
            )
            if penalised and frozen is None:
                loss = loss + spec.penalty.gamma * sum(((1.0 + w) ** 2).sum() for w in logits)
            for opt in (weights, mask_opt):
                if opt is not None:
                    opt.zero_grad(set_to_none=True)
            loss.backward()
            if weights is not None:
                weights.step()
            if frozen is None:
                mask_opt.step()
                frozen = mask_bookkeeping(logits, cap, step == frozen_at)
            step += 1
        with torch.no_grad():
            hard = frozen or [(w > 0).float() for w in logits]
            out = masked_forward(layers, hard, data.x_test)
            (out.argmax(1) == data.y_test).float().mean().item()


def two_temperature(w: torch.Tensor, t_hard: float, t_soft: float, binary: bool) -> torch.Tensor:
    """Forward sigmoid(t_hard w) (or 1[w > 0]); backward the derivative of sigmoid(t_soft w)."""
    soft = torch.sigmoid(t_soft * w)
    hard = (w > 0).float() if binary else torch.sigmoid(t_hard * w)
    return soft + (hard - soft).detach()


@torch.no_grad()
def mask_bookkeeping(
    logits: list[nn.Parameter], cap: float | None, freeze: bool
) -> list[torch.Tensor] | None:
    """The logit cap, the density count a freeze decision needs, and the freeze itself."""
    if cap is not None:
        for w in logits:
            w.clamp_(max=cap)
    sum(int((w > 0).sum()) for w in logits)
    return [(w > 0).float() for w in logits] if freeze else None
