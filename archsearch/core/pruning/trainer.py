"""Training the mask logits: penalty toward -1, stop at the target density.

"Differentiable Architecture Pruning for Transfer Learning", Algorithm A.1 (separate step
sizes alpha for the mask logits w and beta for the weights theta, eq. 15-16) and appendix
A.3 (the penalty gamma * 1^T (1 + w)^2 of eq. 18 pulls the logits toward -1; once the
density 1^T 1[w > 0] / D reaches the target, alpha = 0).

The weights are trained by `core.training.fit`; the logits by a second optimiser stepped in
`after_step`. Once the target is reached the masks freeze: the forward pass then uses the
exact binary mask, so the remaining epochs train the weights of the final architecture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import increment_version

from archsearch.core import runlog
from archsearch.core.nn.masked import MaskedConv2d, MaskedLinear
from archsearch.core.nn.masked_model import (
    density,
    exact_count_limit,
    freeze_masks,
    mask_logits,
    masked_layers,
    positive_count,
)
from archsearch.core.optimizers import FunctionalOptimizer, clear_grads
from archsearch.core.training import TrainHooks, cross_entropy, fusable

HIST_BINS = 80
MaskedLayer = MaskedLinear | MaskedConv2d


@dataclass
class MaskSchedule:
    """What the mask trainer needs beyond the model: target, penalty, mask optimiser."""

    target: float | None
    total_steps: int
    adaptive: bool = True
    penalised: bool = True
    gamma: float = 1e-3
    reach_fraction: float = 0.6
    adapt_rate: float = 1.25
    mask_lr: float = 0.01
    mask_optimizer: str = "adam"
    logit_cap: float | None = None
    # The loop clips the gradient norm over every parameter, logits included: the penalty's
    # gradient must then be in the graph, where the clipping sees it.
    clipped: bool = False


def make_mask_optimizer(params: list[nn.Parameter], name: str, lr: float) -> FunctionalOptimizer:
    # The fused kernel where torch has one, as for the weights (`core.training.fusable`): one
    # call per step instead of a loop of small ops per logit tensor. The same
    # update; only float rounding may differ.
    fused = fusable(params)
    return FunctionalOptimizer("sgd" if name == "sgd" else "adam", params, lr=lr, fused=fused)


def quantile_by_selection(values: torch.Tensor, q: float) -> torch.Tensor:
    """`values.quantile(q)` (linear interpolation) of a 1-D tensor, to the bit, from the two
    order statistics it interpolates: two selections instead of a full sort (4 ms against
    75 ms for the default MLP's 235k logits, once per prune job)."""
    # torch's own steps: the rank q * (n - 1) in the values' dtype, floor and ceil, lerp.
    ranks = torch.tensor(q, dtype=values.dtype) * (values.numel() - 1)
    below, above = int(ranks), int(torch.ceil(ranks))
    low = values.kthvalue(below + 1).values
    high = low if above == below else values.kthvalue(above + 1).values
    return torch.lerp(low, high, ranks - below)


def _top_k(score: torch.Tensor, k: int) -> torch.Tensor:
    keep = torch.zeros_like(score, dtype=torch.bool)
    # Unsorted: the same k indices (selection comes before the sort), only not in order.
    keep[score.topk(k, sorted=False).indices] = True
    return keep


def _keep_at_density(scores: list[torch.Tensor], target: float, per_layer: bool) -> torch.Tensor:
    """Which of the concatenated scores to keep: the round(target * D) largest overall, or
    per layer (each keeps round(target * its size), at least one)."""
    if not per_layer:
        flat = torch.cat(scores)
        return _top_k(flat, max(1, round(target * flat.numel())))
    return torch.cat([_top_k(s, max(1, round(target * s.numel()))) for s in scores])


def finalize_to_density(model: nn.Module, target: float) -> None:
    """Make exactly round(target * D) logits positive (the largest ones) and freeze.

    The step that crosses the target can overshoot by a few logits; moving the threshold
    to the k-th largest logit makes the final density exact. Unit masks are finalised per
    layer: a global threshold over units can leave a layer with none (measured: 1 of 24
    hidden units at a global unit density of 0.25), and a layer without units is a network
    without output; every layer keeps its share of units, the logits pick which.
    """
    layers = [layer for _, layer in masked_layers(model)]
    # Many logits sit exactly at the cap; among equal logits the larger |weight| wins.
    magnitudes = [layer.unit_magnitude().flatten() for layer in layers]
    largest = torch.cat(magnitudes).max().clamp(min=1e-12)
    scores = [
        layer.mask_logits.detach().flatten() + 1e-7 * magnitude / largest
        for layer, magnitude in zip(layers, magnitudes, strict=True)
    ]
    per_layer = all(layer.unit_source is not None for layer in layers)
    keep = _keep_at_density(scores, target, per_layer)
    with torch.no_grad():
        start = 0
        for layer in layers:
            p = layer.mask_logits
            part = keep[start : start + p.numel()].view_as(p)
            p.copy_(torch.where(part, p.clamp(min=1e-4), p.clamp(max=-1e-4)))
            start += p.numel()
    freeze_masks(model)


class PositiveCount:
    """How many entries of `tensors` are above 0, exactly, in one reduction: each tensor's
    1[w > 0] is written into its own part of one flat buffer (a vectorised comparison
    into floats), then the buffer is summed once, where a count per tensor took three ops
    and a fresh weight-sized tensor each (the density count runs after every logit step).
    """

    def __init__(self, tensors: list[nn.Parameter]) -> None:
        self.tensors = tensors
        self.flat: torch.Tensor | None = None
        self.parts: list[torch.Tensor] = []

    def __call__(self) -> int:
        if not self.tensors:
            return 0
        first = self.tensors[0]
        if self.flat is None or (self.flat.device, self.flat.dtype) != (first.device, first.dtype):
            if not self._allocate():
                return sum(positive_count(t) for t in self.tensors)
        for tensor, part in zip(self.tensors, self.parts, strict=True):
            torch.gt(tensor, 0.0, out=part)
        assert self.flat is not None, "allocated above"
        return int(self.flat.sum())

    def _allocate(self) -> bool:
        """One buffer for all tensors, if they share a device and dtype and its sum is exact."""
        first = self.tensors[0]
        total = sum(t.numel() for t in self.tensors)
        same = all((t.device, t.dtype) == (first.device, first.dtype) for t in self.tensors)
        if not same or total > exact_count_limit(first.dtype):
            return False
        self.flat = torch.empty(total, dtype=first.dtype, device=first.device)
        sizes = [t.numel() for t in self.tensors]
        self.parts = [
            part.view_as(t)
            for part, t in zip(torch.split(self.flat, sizes), self.tensors, strict=True)
        ]
        return True


@dataclass
class MaskTrainer:
    """TrainHooks for `fit` that learn the masks alongside (or instead of) the weights."""

    model: nn.Module
    schedule: MaskSchedule
    gamma: float | None = None
    histograms: list[list[float]] = field(default_factory=list)
    frozen_at_step: int = -1
    relaxed_accuracy: float = float("nan")  # test accuracy just before the final binarisation
    frozen_density: float | None = None  # set once the masks froze: they change no more

    def __post_init__(self) -> None:
        s = self.schedule
        self.logits = mask_logits(self.model)
        self.layers = [layer for _, layer in masked_layers(self.model)]
        self.logit_count = sum(p.numel() for p in self.logits)
        self._cached_layers, self._count = self._density_counters()
        self.optimizer = make_mask_optimizer(self.logits, s.mask_optimizer, s.mask_lr)
        # The last loss handed the penalty's gradient to the layers (`_add_penalty_grad`).
        self._handed = False
        # Frozen: the layers whose trained weights keep their pruned entries at zero.
        self._premasked: list[MaskedLayer] | None = None
        # The penalty's fixed point is -1; with a cap, no logit rises above it.
        self.hist_range = (-1.1, 1.1 * s.logit_cap) if s.logit_cap is not None else (-1.5, 1.5)
        self.reach_step = max(1, math.ceil(s.reach_fraction * s.total_steps))
        self.force_step = min(s.total_steps, math.ceil(1.25 * self.reach_step))
        if s.penalised and not s.adaptive:
            self.gamma = s.gamma

    def penalty(self) -> torch.Tensor:
        """gamma * sum (1 + w)^2 over every logit (eq. 18); zero once the masks are frozen.

        Its value, without a graph: the loss adds its gradient by hand (`_add_penalty_grad`).
        """
        if self.gamma is None or self.frozen():
            return torch.zeros(())
        with torch.no_grad():
            return self._penalty([1.0 + p for p in self.logits])

    def _penalty(self, shifted: list[torch.Tensor]) -> torch.Tensor:
        assert self.gamma is not None, "calibrated on the first step"
        return self.gamma * torch.stack([(s**2).sum() for s in shifted]).sum()

    def loss(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        value, frozen = None, self.frozen()
        if frozen and not self.schedule.clipped:
            self._hand_premasked()
        if self.gamma is not None and not frozen:
            if self.schedule.clipped:
                return cross_entropy(model, x, y) + self._penalty([1.0 + p for p in self.logits])
            # Before the forward: the masked layers add the penalty's gradient to the
            # logits' gradient in their own backward (`hand_penalty_grad`), and its value
            # joins the loss (it is reported); a graph of five nodes per layer cost more.
            value = self._hand_penalty_grads(self.gamma)
        loss = cross_entropy(model, x, y)
        if value is not None:
            loss = loss + value
        if not loss.requires_grad:
            # Weight-free and frozen: nothing left to train, but `fit` still calls backward.
            loss = loss + 0.0 * self.logits[0].sum()
        return loss

    @torch.no_grad()
    def _hand_penalty_grads(self, gamma: float) -> float:
        """Give each layer d/dw gamma (1 + w)^2 = 2 gamma + 2 gamma w (one pass a tensor) for
        its backward; return the penalty gamma * sum (1 + w)^2 = sum t^2 / (4 gamma), read
        from the same terms t (their norms: one call, and no squared copy).
        """
        slope = 2.0 * gamma
        offset = self.logits[0].new_full((), slope)
        terms = [torch.add(offset, p, alpha=slope) for p in self.logits]
        for layer, term in zip(self.layers, terms, strict=True):
            layer.hand_penalty_grad(term)
        self._handed = True
        return sum(float(norm) ** 2 for norm in torch._foreach_norm(terms)) / (2.0 * slope)

    @torch.no_grad()
    def _add_penalty_grad(self) -> None:
        """Add the penalty's gradient a layer's backward did not (`hand_penalty_grad`: unit
        masks and weight-free layers cannot fold it) or that never reached its logits."""
        if not self._handed:
            return
        self._handed = False
        for layer, p in zip(self.layers, self.logits, strict=True):
            term = layer.take_penalty_grad()
            if p.grad is None:
                # Not reached by the loss (the term either): its gradient is the term.
                p.grad = term if term is not None else self._lost_term(p)
            elif term is not None:
                p.grad.add_(term)

    def _lost_term(self, p: torch.Tensor) -> torch.Tensor:
        assert self.gamma is not None, "a term was handed"
        return torch.add(p.detach(), 1.0).mul_(2.0 * self.gamma)

    @torch.no_grad()
    def _hand_premasked(self) -> None:
        """Frozen: the trained weights' pruned entries are zeroed (once here, then after each
        weight step in `after_step`), and each layer's forward uses its weight as the
        masked weight (`hand_premasked`): no weight * mask forward and no grad * mask
        backward, one in-place product a step instead of two.

        The same forward values, so the same gradients and updates of every kept weight,
        to the bit. The pruned ones receive their dense gradient and their optimiser state
        moves, but they are zero in every forward and in every file (`plain_state_dict`).
        Not with gradient clipping: those gradients would count in its norm.
        """
        if self._premasked is None:
            self._premasked = [layer for layer in self.layers if layer.weight.requires_grad]
            self._zero_pruned()
        for layer in self._premasked:
            layer.hand_premasked()

    def _zero_pruned(self) -> None:
        if self._premasked:
            weights = [layer.weight for layer in self._premasked]
            with torch.no_grad():
                torch._foreach_mul_(weights, [layer.frozen_mask() for layer in self._premasked])

    def planned_density(self, step: int) -> float:
        assert self.schedule.target is not None, "a plan needs a target density"
        return float(self.schedule.target ** min(1.0, (step + 1) / self.reach_step))

    def _calibrate(self) -> float:
        # First step: the grads hold the loss alone. Start where the pull toward -1 equals
        # the median loss gradient, so the adaptive gamma starts on the right scale.
        grads = torch.cat([p.grad.abs().flatten() for p in self.logits if p.grad is not None])
        scale = float(quantile_by_selection(grads, 0.1)) if grads.numel() else 0.0
        return max(scale, 1e-12) / (2.0 * (1.0 + self.schedule_init()))

    def schedule_init(self) -> float:
        return float(torch.cat([p.detach().flatten() for p in self.logits]).mean())

    @torch.no_grad()
    def _cap_logits(self) -> None:
        # Logits never rise above their initial value: otherwise the ones the loss likes
        # drift far up while the target is still far, and later need many steps to be
        # switched off. With the cap, any logit whose loss gradient the penalty outweighs
        # crosses zero within about logit_init / mask_lr steps.
        if self.schedule.logit_cap is not None:
            torch._foreach_clamp_max_(tuple(self.logits), self.schedule.logit_cap)

    def after_step(self, step: int) -> dict[str, float]:
        self._zero_pruned()  # the weight step just wrote them (`_hand_premasked`)
        if self.frozen_density is not None:
            # Frozen masks never change: no logit step, no density pass (that
            # pass over every logit cost 14% of the loop after the freeze).
            return {"density": self.frozen_density, "gamma": float(self.gamma or 0.0)}
        s = self.schedule
        frozen = self.frozen()
        if not frozen:
            self._add_penalty_grad()
            if self.gamma is None and self.schedule.penalised:
                self.gamma = self._calibrate()
            self.optimizer.step()
            # torch's fused kernels write the logits without bumping their version counter,
            # which keys the layers' cached masks (`positive_mask`, `frozen_mask`).
            increment_version(self.logits)
            self._cap_logits()
        clear_grads(self.logits)
        current = self.density()
        if frozen:
            self.frozen_density = current
        elif s.target is not None:
            if current <= s.target or step + 1 >= self.force_step:
                finalize_to_density(self.model, s.target)
                self.frozen_at_step, current = step, density(self.model)
                runlog.phase_line("masks frozen at step %d: density %.4g", step + 1, current)
            elif s.adaptive:
                # Multiplicative control: gamma grows while the density lags behind the plan
                # (by at most x adapt_rate a step) and holds when ahead. Never lowering it
                # keeps the pressure on, so no logit drifts far up while it waits.
                assert self.gamma is not None, "calibrated on the first step"
                ratio = (current / self.planned_density(step)) ** 2
                self.gamma = float(self.gamma) * min(s.adapt_rate, max(1.0, ratio))
        return {"density": current, "gamma": float(self.gamma or 0.0)}

    def frozen(self) -> bool:
        # The layers listed once: walking the module tree every step showed in the profile.
        return all(layer.is_frozen() for layer in self.layers)

    def density(self) -> float:
        """`nn.masked_model.density`: the fraction of logits above 0, over the logits listed once.

        A binary-forward layer counts its cached 1[w > 0] (`positive_mask`), which the next
        forward pass then multiplies with instead of forming it again; the other layers'
        logits are counted together (`PositiveCount`).
        """
        kept = sum(int(layer.positive_mask().sum()) for layer in self._cached_layers)
        return (kept + self._count()) / max(1, self.logit_count)

    def _density_counters(self) -> tuple[list[MaskedLayer], PositiveCount]:
        """The layers whose count is their cached indicator (binary-forward weight masks:
        the next forward reuses it), and one counter for every other layer's logits."""
        cached = [
            layer
            for layer in self.layers
            if layer.binary_forward
            and layer.unit_source is None
            and layer.mask_logits.numel() <= exact_count_limit(layer.mask_logits.dtype)
        ]
        others = [layer.mask_logits for layer in self.layers if layer not in cached]
        return cached, PositiveCount(others)

    def after_epoch(self, epoch: int) -> dict[str, float]:
        flat = torch.cat([p.detach().flatten().cpu() for p in self.logits])
        lo, hi = self.hist_range
        counts = torch.histc(flat.clamp(lo, hi), bins=HIST_BINS, min=lo, max=hi)
        self.histograms.append(counts.tolist())
        frozen = sum(bool(layer.mask_frozen) for layer in self.layers)
        return {"density": density(self.model), "frozen_layers": float(frozen)}

    def extra_state(self) -> dict[str, Any]:
        return {
            "gamma": self.gamma,
            "histograms": self.histograms,
            "frozen_at_step": self.frozen_at_step,
            "mask_optimizer": self.optimizer.state_dict(),
        }

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.gamma = state["gamma"]
        self.histograms = [list(h) for h in state["histograms"]]
        self.frozen_at_step = int(state["frozen_at_step"])
        self.optimizer.load_state_dict(state["mask_optimizer"])

    def hooks(self) -> TrainHooks:
        return TrainHooks(
            loss=self.loss,
            after_step=self.after_step,
            after_epoch=self.after_epoch,
            after_epoch_reads_only=True,  # histograms and density: the masks stay as they are
            extra_state=self.extra_state,
            load_extra_state=self.load_extra_state,
        )
