"""The growth defaults (item 5): the amplitude line search finds a local minimum
with no fixed cap, the eigenvalue cut sits at the round-off of S, and every documented
default grow configuration learns on digits, MNIST and Fashion-MNIST (no NaN, no collapse)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.growth import layer_step, solver
from archsearch.core.methods import get_method
from archsearch.specs import GrowJob, parse_job_spec


def test_line_search_doubles_until_the_loss_rises() -> None:
    calls: list[float] = []

    def parabola(gamma: float) -> float:
        calls.append(gamma)
        return (math.log2(gamma) - 7.3) ** 2 if gamma > 0 else 60.0  # minimum near 2^7.3

    found = layer_step.line_search(parabola, base=60.0)
    assert found.gamma == 128.0 and not found.at_bound, "past the old cap of 16"
    assert calls[-1] == 256.0, "stops at the first rise"
    capped = layer_step.line_search(parabola, base=60.0, largest=16.0)
    assert capped.gamma == 16.0 and capped.at_bound


def test_line_search_halves_and_never_accepts_nan_or_a_rise() -> None:
    small = layer_step.line_search(lambda g: 1.0 - g if g <= 2**-5 else 2.0, base=1.0)
    assert small.gamma == 2**-5 and small.loss < 1.0
    assert layer_step.line_search(lambda g: float("nan"), base=1.0).gamma == 0.0
    assert layer_step.line_search(lambda g: 1.0 + g, base=1.0).gamma == 0.0
    signed = layer_step.signed_line_search(lambda g: (g + 4.0) ** 2, base=16.0)
    assert signed.gamma == -4.0 and signed.loss == 0.0


def test_roundoff_cut_keeps_the_resolved_directions() -> None:
    assert solver.roundoff_rtol(1024, torch.float32) == pytest.approx(1.19e-7 * 32, rel=0.01)
    torch.manual_seed(0)
    scales = torch.logspace(0, -2, 40)  # eigenvalues of S from 1 down to 1e-4
    b = torch.randn(4000, 40) * scales
    v = torch.randn(4000, 3) + b[:, -5:] @ torch.randn(5, 3) * 30  # signal in the small ones
    rtol = solver.roundoff_rtol(4000, torch.float32)
    kept = solver.optimal_neurons(b, v, rtol)
    old = solver.optimal_neurons(b, v, 1e-2)
    assert kept.directions == 40 and old.directions < 25
    assert kept.lambdas.square().sum() > 10 * old.lambdas.square().sum()


def grow_job(dataset: dict, family: str) -> GrowJob:
    spec = {"method": "grow", "dataset": dataset, "growth": {"baseline": False}}
    if family == "cnn":
        spec["growth"] = {"family": "cnn", "baseline": False}
    return parse_job_spec(spec)  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("family", "dataset", "least"),
    [
        # digits at the full defaults: test_grow_method (>= 0.95)
        ("mlp", {"name": "mnist", "train_subset": 300}, 0.6),
        ("mlp", {"name": "fashion_mnist", "train_subset": 300}, 0.6),
        ("cnn", {"name": "digits", "train_subset": 300}, 0.8),
    ],
)
def test_documented_defaults_learn(
    data_dirs: tuple[Path, ...], family: str, dataset: dict, least: float
) -> None:
    spec = grow_job(dataset, family)
    data = load_dataset(spec.dataset, data_dirs, 0)
    result = get_method("grow")(spec, data, InMemoryContext())
    assert math.isfinite(result.metrics["test_loss"])
    assert result.metrics["test_accuracy"] >= least, "a collapsed model scores about 0.1"
    assert result.metrics["predicted_classes"] == data.num_classes
    assert result.warnings == []
