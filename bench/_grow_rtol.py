"""The `growth.eig_rtol` default chosen on held-out data (`python bench/grow.py --part rtol`).

S = B^T B / n is cut at rtol * its largest eigenvalue before S^{-1/2} (section 3.4,
appendix B.3). A small cut keeps more directions and a larger first-order decrease on the
statistics batch; whether that decrease is real shows on samples the statistics never saw.
At every layer step of a grow job this records, for the neurons the job adds (and dW*):
- predicted: their first-order decrease <V_goal_proj, Omega A^T B> / n on the statistics batch;
- held out: the same quantity with B, B_mid and V_goal of a fixed held-out batch (test
  images; the test accuracy uses them too, but nothing is fitted on them);
then the job's final test accuracy. Same data, batches and seeds for every cut.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.growth import layer_step
from archsearch.core.methods import get_method
from archsearch.specs import GrowJob

HELD_OUT = 1024


def first_order_decrease(stats: layer_step.LayerStats, dw: torch.Tensor, neurons: Any) -> float:
    """<V_goal - B_mid dW^T, Omega A^T b> averaged over the batch (the new neurons' term)."""
    v_proj = stats.v_goal - stats.b_mid @ dw.T  # (n, d)
    m = v_proj.T.double() @ stats.b_in.double() / stats.b_in.shape[0]  # (d, p)
    product = neurons.out_weights.double() @ neurons.in_weights.double()  # (d, p)
    return float((m * product).sum())


@dataclass
class RtolProbe:
    """Patches layer_step for one job: held-out statistics beside every layer step's own."""

    x: torch.Tensor
    y: torch.Tensor
    predicted: list[float] = field(default_factory=list)
    held_out: list[float] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)

    def __enter__(self) -> RtolProbe:
        self._stats, self._solve = layer_step.layer_stats, layer_step.solve_layer
        fresh: dict[str, layer_step.LayerStats] = {}

        def stats(model, x, y, h):  # type: ignore[no-untyped-def]
            fresh["now"] = self._stats(model, self.x, self.y, h)
            return self._stats(model, x, y, h)

        def solve(s, policy):  # type: ignore[no-untyped-def]
            dw, chosen = self._solve(s, policy)
            if chosen.count:
                self.predicted.append(first_order_decrease(s, dw, chosen))
                self.held_out.append(first_order_decrease(fresh["now"], dw, chosen))
                self.kept.append(int(chosen.directions))
            return dw, chosen

        layer_step.layer_stats, layer_step.solve_layer = stats, solve
        return self

    def __exit__(self, *exc: object) -> None:
        layer_step.layer_stats, layer_step.solve_layer = self._stats, self._solve


@dataclass
class RtolRun:
    accuracy: float
    parameters: float
    predicted: float
    held_out: float
    kept: float


def run_rtol(data: Dataset, spec: GrowJob) -> RtolRun:
    probe = RtolProbe(data.x_test[-HELD_OUT:], data.y_test[-HELD_OUT:])
    with probe:
        result = get_method("grow")(spec, data, InMemoryContext())
    return RtolRun(
        accuracy=result.metrics["test_accuracy"],
        parameters=result.metrics["parameters"],
        predicted=sum(probe.predicted),
        held_out=sum(probe.held_out),
        kept=statistics.fmean(probe.kept) if probe.kept else 0.0,
    )


def rtol_row(name: str, runs: list[RtolRun]) -> str:
    def ms(values: list[float], digits: int = 4) -> str:
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{statistics.fmean(values):.{digits}f} +- {sd:.{digits}f}"

    ratio = [r.held_out / r.predicted for r in runs if r.predicted]
    return (
        f"{name:<10} {statistics.fmean(r.kept for r in runs):>9.0f} "
        f"{ms([r.predicted for r in runs]):>18} {ms([r.held_out for r in runs]):>18} "
        f"{ms(ratio, 2):>14} {ms([r.accuracy for r in runs]):>18} "
        f"{statistics.fmean(r.parameters for r in runs):>9.0f}"
    )


RTOL_HEADER = (
    f"{'eig_rtol':<10} {'kept dirs':>9} {'predicted (sum)':>18} {'held out (sum)':>18} "
    f"{'held/pred':>14} {'test accuracy':>18} {'params':>9}"
)
