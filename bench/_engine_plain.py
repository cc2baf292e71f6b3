"""The plain-PyTorch loops `bench/engine.py` measures the jobs against.

Two kinds, both written with nothing but torch, on the job's own model widths and activation,
data tensors, batch size, epochs and optimisers:
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
from archsearch.core.models.layers import ACTIVATIONS
from archsearch.core.search.strategies import searchable_edges
from archsearch.specs import JobBase


def plain_fit(
    model: nn.Module,
    data: Dataset,
    training: Any,
    opt: torch.optim.Optimizer,
    after_step: Callable[[], None] | None = None,
) -> float:
    """The minimal loop: shuffle, step (with the spec's learning-rate schedule, as a user
    writes it with torch's own scheduler), and measure the test split after every epoch in
    batches of 512, as the job does (`core.evaluation.EVAL_BATCH`; one 10,000-sample batch
    through a graph model costs more than the job's whole test pass: large activations)."""
    epochs, batch_size = training.epochs, training.batch_size
    flush_subnormals()
    scheduler = plain_schedule(opt, training, -(-len(data.x_train) // batch_size))
    accuracy = 0.0
    for _ in range(epochs):
        model.train()
        for index in torch.randperm(len(data.x_train)).split(batch_size):
            loss = F.cross_entropy(model(data.x_train[index]), data.y_train[index])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if scheduler is not None:
                scheduler.step()
            if after_step is not None:
                after_step()
        model.eval()
        with torch.no_grad():
            correct = sum(
                int((model(x).argmax(1) == y).sum())
                for x, y in zip(data.x_test.split(512), data.y_test.split(512), strict=True)
            )
            accuracy = correct / len(data.y_test)
    return accuracy


def flush_subnormals() -> None:
    """Subnormal floats flushed to zero in this thread, as every process that trains sets
    it (`core.float_mode.flush_denormals`), set again before each loop: the first job run in
    this thread (its onnxruntime check) cleared the per-thread flag, and the soft-mask floor
    then ran 3.77x the fused dense loop, against 1.62x with the flag."""
    torch.set_flush_denormal(True)


def plain_schedule(
    opt: torch.optim.Optimizer, training: Any, per_epoch: int
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """torch's scheduler for the spec's schedule, stepped per batch (warm-up: none here)."""
    schedule = training.schedule
    assert schedule.warmup_epochs == 0, "the bench's specs have no warm-up"
    if schedule.name == "constant":
        return None
    if schedule.name == "cosine":
        total = training.epochs * per_epoch
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
    return torch.optim.lr_scheduler.StepLR(
        opt, step_size=schedule.step_epochs * per_epoch, gamma=schedule.gamma
    )


def plain_adam(params: Any, lr: float, fused: bool) -> torch.optim.Optimizer:
    """Adam as a user writes it (torch's default kernel on a CPU: the per-tensor loop), or
    with `fused=True`, the kernel the engine picks (`core.training.fusable`)."""
    return torch.optim.Adam(params, lr=lr, fused=fused or None)


def mlp_layers(data: Dataset, widths: tuple[int, ...]) -> list[nn.Linear]:
    sizes = (data.x_train[0].numel(), *widths, data.num_classes)
    return [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:], strict=False)]


def plain_mlp(
    data: Dataset,
    spec: JobBase,
    widths: tuple[int, ...],
    act: type[nn.Module],
    fused: bool = False,
) -> None:
    layers: list[nn.Module] = [nn.Flatten()]
    for layer in mlp_layers(data, widths)[:-1]:
        layers += [layer, act()]
    model = nn.Sequential(*layers, mlp_layers(data, widths)[-1])
    opt = plain_adam(model.parameters(), spec.training.optimizer.lr, fused)
    plain_fit(model, data, spec.training, opt)


def graph_model(
    data: Dataset, spec: Any, gradient_to: str, fused: bool = False
) -> tuple[nn.Module, Any]:
    model = create_model(Architecture(spec.model, data.input_shape, data.num_classes))
    for layer in searchable_edges(model):
        layer.gradient_to = gradient_to
    o = spec.training.optimizer
    opt = torch.optim.SGD(
        model.parameters(),
        lr=o.lr,
        momentum=o.momentum,
        weight_decay=o.weight_decay,
        fused=fused or None,
    )
    return model, opt


def plain_graph(data: Dataset, spec: JobBase, fused: bool = False) -> None:
    """The search job's neural graph trained on its initial (random) wiring, fixed."""
    model, opt = graph_model(data, spec, "real", fused)
    plain_fit(model, data, spec.training, opt)


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

    plain_fit(model, data, spec.training, opt, select)


def masked_forward(
    layers: list[nn.Linear], masks: list[torch.Tensor], x: torch.Tensor, act: nn.Module
) -> torch.Tensor:
    x = x.flatten(1)
    for i, (layer, mask) in enumerate(zip(layers, masks, strict=True)):
        x = F.linear(x, layer.weight * mask, layer.bias)
        x = act(x) if i + 1 < len(layers) else x
    return x


def initial_logits(layers: list[nn.Linear], spec: Any) -> list[nn.Parameter]:
    s = spec.logit_init
    if spec.mask_init == "normal":
        return [nn.Parameter(s * torch.randn_like(layer.weight)) for layer in layers]
    return [nn.Parameter(s * (0.5 + 0.5 * torch.rand_like(layer.weight))) for layer in layers]


def prune_floor(data: Dataset, spec: Any, frozen_at: int) -> None:
    """The two-temperature mask loop (learned) or the weight-free one; see the module doc.

    With the kernels the job uses, so job / floor is the engine's own overhead: fused Adam
    for the weights (with the spec's schedule) and for the logits, the penalty's gradient
    2 gamma (1 + w) added to the logits' gradient, 1[w > 0] as float passes.
    """
    flush_subnormals()
    layers = mlp_layers(data, spec.model.hidden)
    act = ACTIVATIONS[spec.model.activation]()  # the job's own (ELU for weight-free)
    logits = initial_logits(layers, spec)
    free = spec.weights == "free"
    if free:
        with torch.no_grad():
            for layer in layers:
                layer.weight.fill_(1.0 / math.sqrt(layer.in_features))
                layer.bias.zero_()
                layer.requires_grad_(False)
    training = spec.training
    weights = None
    if not free:
        params = [p for layer in layers for p in layer.parameters()]
        weights = plain_adam(params, training.optimizer.lr, fused=True)
    per_epoch = -(-len(data.x_train) // training.batch_size)
    scheduler = None if weights is None else plain_schedule(weights, training, per_epoch)
    mask_opt = plain_adam(logits, spec.mask_lr, fused=True)
    t_hard, t_soft = spec.temperatures.t_hard, spec.temperatures.soft
    gamma = spec.penalty.gamma if spec.penalty.schedule != "none" else None
    cap = spec.logit_init if spec.density is not None and spec.cap_logits else None
    frozen: list[torch.Tensor] | None = None
    step = 0
    for _ in range(training.epochs):
        for index in torch.randperm(len(data.x_train)).split(training.batch_size):
            masks = frozen or [two_temperature(w, t_hard, t_soft, binary=free) for w in logits]
            loss = F.cross_entropy(
                masked_forward(layers, masks, data.x_train[index], act), data.y_train[index]
            )
            for opt in (weights, mask_opt):
                if opt is not None:
                    opt.zero_grad(set_to_none=True)
            loss.backward()
            if weights is not None:
                weights.step()
            if scheduler is not None:
                scheduler.step()
            if frozen is None:
                frozen = mask_bookkeeping(logits, mask_opt, gamma, cap, step == frozen_at)
            step += 1
        with torch.no_grad():
            hard = frozen or [torch.sign(w).clamp_(min=0.0) for w in logits]
            for x, y in zip(data.x_test.split(512), data.y_test.split(512), strict=True):
                int((masked_forward(layers, hard, x, act).argmax(1) == y).sum())


class TwoTemperature(torch.autograd.Function):
    """Forward sigmoid(t_hard w), or 1[w > 0] when t_hard is None; backward the derivative
    of sigmoid(t_soft w) (torch's fused sigmoid_backward)."""

    @staticmethod
    def forward(ctx: Any, w: torch.Tensor, t_hard: float | None, t_soft: float) -> torch.Tensor:
        ctx.save_for_backward(w)
        ctx.t_soft = t_soft
        if t_hard is None:
            return torch.sign(w).clamp_(min=0.0)  # 1[w > 0], as float passes
        return torch.mul(w, t_hard).sigmoid_()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (w,) = ctx.saved_tensors
        soft = torch.mul(w, ctx.t_soft).sigmoid_()
        return torch.ops.aten.sigmoid_backward(grad, soft).mul_(ctx.t_soft), None, None


def two_temperature(w: torch.Tensor, t_hard: float, t_soft: float, binary: bool) -> torch.Tensor:
    """Forward sigmoid(t_hard w) (or 1[w > 0]); backward the derivative of sigmoid(t_soft w)."""
    mask: torch.Tensor = TwoTemperature.apply(w, None if binary else t_hard, t_soft)  # type: ignore[no-untyped-call]
    return mask


@torch.no_grad()
def mask_bookkeeping(
    logits: list[nn.Parameter],
    opt: torch.optim.Optimizer,
    gamma: float | None,
    cap: float | None,
    freeze: bool,
) -> list[torch.Tensor] | None:
    """The penalty's gradient, the logits' step and cap, the density count a freeze decision
    needs, and the freeze itself."""
    if gamma is not None:
        for w in logits:
            assert w.grad is not None
            w.grad.add_((1.0 + w).mul_(2.0 * gamma))
    opt.step()
    if cap is not None:
        for w in logits:
            w.clamp_(max=cap)
    sum(int(torch.sign(w).clamp_(min=0.0).sum()) for w in logits)
    return [torch.sign(w).clamp_(min=0.0) for w in logits] if freeze else None
