"""Every arm of a comparison tuned alike: each run at a few multiples of its method's
documented learning rate, and per seed the run best on validation rows that neither training
nor the reported test accuracy saw (a baseline gets the tuning the method gets)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from functools import cache
from typing import TypeVar

from archsearch.specs import parse_job_spec

LR_FACTORS = (0.3, 1.0, 3.0)
VALIDATION_FRACTION = 0.1
NAN = float("nan")
Run = TypeVar("Run")


@cache
def default_lr(method: str) -> float:
    """The method's documented learning rate (what a job that sets none trains at)."""
    extra = {"source_job": "00000000-0000-0000-0000-000000000000"} if method == "transfer" else {}
    spec = parse_job_spec({"method": method, "dataset": {"name": "digits"}, **extra})
    return float(spec.training.optimizer.lr)


def best_on_validation(
    by_factor: dict[float, Run], validation: Callable[[Run], float]
) -> tuple[float, Run | None]:
    """(factor, run) of the run whose `validation` accuracy is best; the only run when there
    is one factor (nothing to choose). A diverged run (validation NaN) is never chosen; when
    every run diverged, the smallest factor and None."""
    if len(by_factor) == 1:
        return next(iter(by_factor.items()))
    measured = {f: run for f, run in by_factor.items() if validation(run) == validation(run)}
    if not measured:
        return min(by_factor), None
    best = max(measured, key=lambda f: validation(measured[f]))
    return best, measured[best]


def choose(by_factor: dict[float, tuple[float, float]]) -> tuple[float, float]:
    """`best_on_validation` over factor -> (test accuracy, validation accuracy): the chosen
    factor and its test accuracy (NaN when every run diverged)."""
    factor, run = best_on_validation(by_factor, lambda r: r[1])
    return factor, NAN if run is None else run[0]


def mean_sd(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample sd of the values that are numbers (NaN: a diverged run)."""
    kept = [v for v in values if v == v]
    if not kept:
        return NAN, NAN
    return statistics.fmean(kept), statistics.stdev(kept) if len(kept) > 1 else 0.0


def factors_text(factors: Iterable[float]) -> str:
    return " ".join(f"{f:g}x" for f in factors)
