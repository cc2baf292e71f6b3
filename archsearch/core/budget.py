"""Counting what a job actually trains.

Every optimiser the engine trains weights with comes from `training.make_optimizer`, which
passes it through `counted`: a step post-hook adds one to the running job's `Spend`. So
prune's fine-tuning, IMP's rounds, search's dense phase, grow's re-made optimisers after
each growth and its timed baseline are all counted without a counter in any method. Prune's
mask-logit optimiser steps on the same batches as the weights' and is not counted twice.
Grow's statistics batches take no optimiser step: `count_statistics` reports them apart
(`statistics_batches`, `statistics_samples`). The second budget axis is the samples a run
reads: `samples_seen` = the training batches' samples (`count_training_samples`, called by
every loop that steps a counted optimiser) + the statistics samples; a study shows it beside
the steps, so grow's statistics passes are charged, not free.

`measured(run)` (applied by `core.methods.get_method`) opens a `Spend` for one method run
and adds its counts to `Result.metrics`. The count travels in the job's checkpoints, so a
redelivered job reports the steps of the run that produced its model, not only those after
the restart (steps redone after a crash are not charged).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import torch

from archsearch.core.charts import Chart
from archsearch.core.context import Result, RunContext
from archsearch.core.errors import TrialPruned
from archsearch.core.optimizers import FunctionalOptimizer

CHECKPOINT_KEY = "budget_spent"
Spec = TypeVar("Spec")
Data = TypeVar("Data")


@dataclass
class Spend:
    """What one method run trained so far."""

    optimizer_steps: int = 0
    statistics_batches: int = 0
    statistics_samples: int = 0
    training_samples: int = 0

    def restore(self, saved: dict[str, int]) -> None:
        # A checkpoint holds the count at its save; later loads return older or equal counts.
        for name, value in saved.items():
            setattr(self, name, max(getattr(self, name), int(value)))

    def metrics(self) -> dict[str, float]:
        counts = {name: float(value) for name, value in asdict(self).items()}
        return {**counts, "samples_seen": float(self.training_samples + self.statistics_samples)}


# The running method's spend; a ContextVar so that concurrent runs in threads stay apart.
_current: ContextVar[Spend | None] = ContextVar("archsearch_budget_spend", default=None)


def _after_step(optimizer: FunctionalOptimizer, args: Any, kwargs: Any) -> None:
    spend = _current.get()
    if spend is not None:
        spend.optimizer_steps += 1


def counted(optimizer: FunctionalOptimizer) -> FunctionalOptimizer:
    """`optimizer`, its every step charged to the running method (if any)."""
    optimizer.register_step_post_hook(_after_step)
    return optimizer


def count_optimizer_step() -> None:
    """One optimiser step taken without calling a counted optimiser (one with nothing to
    update: the weight-free prune's placeholder), charged as its hook would have."""
    _after_step(None, None, None)  # type: ignore[arg-type]


def count_training_samples(samples: int) -> None:
    """The samples of one training batch (the optimiser step itself is counted by its hook)."""
    spend = _current.get()
    if spend is not None:
        spend.training_samples += samples


def count_statistics(samples: int) -> None:
    """One statistics batch of `samples` samples (forward/backward, no optimiser step)."""
    spend = _current.get()
    if spend is not None:
        spend.statistics_batches += 1
        spend.statistics_samples += samples


@dataclass
class _CountingContext:
    """The method's RunContext, with the spend saved in and restored from its checkpoints."""

    inner: RunContext
    spend: Spend
    job_id: str = field(init=False)
    device: torch.device = field(init=False)

    def __post_init__(self) -> None:
        self.job_id, self.device = self.inner.job_id, self.inner.device

    def report(self, step: int, total: int, **metrics: float) -> None:
        self.inner.report(step, total, **metrics)

    def should_stop(self) -> bool:
        return self.inner.should_stop()

    def should_prune(self, epoch: int, value: float) -> bool:
        return self.inner.should_prune(epoch, value)

    def save_artifact(self, name: str, data: bytes, media_type: str) -> None:
        self.inner.save_artifact(name, data, media_type)

    def save_chart(self, name: str, chart: Chart) -> None:
        self.inner.save_chart(name, chart)

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        self.inner.save_checkpoint({**state, CHECKPOINT_KEY: asdict(self.spend)})

    def load_checkpoint(self) -> dict[str, Any] | None:
        state = self.inner.load_checkpoint()
        if state is not None and CHECKPOINT_KEY in state:
            self.spend.restore(state[CHECKPOINT_KEY])
        return state

    def read_job_artifact(self, job_id: str, name: str) -> bytes:
        return self.inner.read_job_artifact(job_id, name)

    def __getattr__(self, name: str) -> Any:
        # Anything a particular context adds beyond the protocol stays reachable.
        if name == "inner":  # not yet set (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


def measured(
    run: Callable[[Spec, Data, RunContext], Result],
) -> Callable[[Spec, Data, RunContext], Result]:
    """`run`, with what it trained added to its metrics (`optimizer_steps`, ...)."""

    def measured_run(spec: Spec, data: Data, ctx: RunContext) -> Result:
        spend = Spend()
        token = _current.set(spend)
        try:
            result = run(spec, data, _CountingContext(ctx, spend))
        except TrialPruned as pruned:  # a pruned trial's spend counts against its budget too
            pruned.metrics.update(spend.metrics())
            raise
        finally:
            _current.reset(token)
        result.metrics.update(spend.metrics())
        return result

    return measured_run
