"""Per-arm figures of a study: mean and standard deviation over its seeds.

What each job contributes comes from its final metrics (`test_accuracy`, `parameters`,
`macs`, `optimizer_steps`, a latency if the job measured one), its compact model's size in
the artifact store, and its wall clock; an arm is over budget when any of its jobs spent
more optimizer steps than the study allowed. The second axis is `samples_seen` (training
samples plus grow's statistics samples) against the budget in samples (steps x the arm's
batch size): statistics passes take no optimiser step but read data, so they are charged
there.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from archsearch.jobs.domain.studies.pareto import pareto_front
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.studies import ArmSummary, ParetoPoint, Stat

# The compact model's CPU time per call on 1 thread (core/deploy/latency.py: one sample per
# call first).
LATENCY_KEYS = ("latency_batch_1_compact_ms", "compact_latency_ms", "latency_ms")
COMPACT_LATENCY = re.compile(r"latency_batch_(\d+)_compact_ms")
FIGURES = (
    "test_accuracy",
    "val_accuracy",
    "parameters",
    "macs",
    "optimizer_steps",
    "samples_seen",
)


@dataclass(frozen=True)
class JobFacts:
    """What aggregation needs of one job, read from its row (and artifacts)."""

    arm: str
    method: str
    status: str
    metrics: Mapping[str, float]
    wall_clock_s: float | None = None
    compact_bytes: float | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int | None = None


def stat(values: Iterable[float | None]) -> Stat | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    if not kept:
        return None
    std = statistics.stdev(kept) if len(kept) > 1 else 0.0
    return Stat(mean=statistics.fmean(kept), std=std, n=len(kept))


def latency(metrics: Mapping[str, float]) -> float | None:
    for key in LATENCY_KEYS:
        if key in metrics:
            return metrics[key]
    batches = {int(m[1]): k for k in metrics if (m := COMPACT_LATENCY.fullmatch(k))}
    return metrics[batches[min(batches)]] if batches else None


def compact_bytes(metrics: Mapping[str, float], stored: float | None) -> float | None:
    """The compact model's serialised size as the job measured it, else its stored file."""
    return metrics.get("bytes_compact", stored)


def _over(jobs: Sequence[JobFacts], metric: str, limit: int | None) -> bool:
    spent = [j.metrics.get(metric) for j in jobs]
    return limit is not None and any(s is not None and s > limit for s in spent)


def summarise_arm(label: str, jobs: Sequence[JobFacts], budget: int | None) -> ArmSummary:
    # Succeeded jobs only, and none when the pruner stopped the arm: a pruned trial stopped
    # early, so its figures are not a result, and the seeds that ran to the end beside it
    # would give a mean over the survivors, not over the arm's seeds. Such an arm is never on
    # the front.
    stopped = any(j.status == JobStatus.pruned for j in jobs)
    done = [] if stopped else [j for j in jobs if j.status == JobStatus.succeeded]
    figures = {name: stat(j.metrics.get(name) for j in done) for name in FIGURES}
    batch = jobs[0].batch_size
    budget_samples = None if budget is None or batch is None else budget * batch
    return ArmSummary(
        label=label,
        method=jobs[0].method,
        jobs=len(jobs),
        counts=dict(Counter(j.status for j in jobs)),
        **figures,
        compact_bytes=stat(compact_bytes(j.metrics, j.compact_bytes) for j in done),
        latency_ms=stat(latency(j.metrics) for j in done),
        wall_clock_s=stat(j.wall_clock_s for j in done),
        budget_steps=budget,
        budget_samples=budget_samples,
        over_budget=_over(jobs, "optimizer_steps", budget),
        over_samples=_over(jobs, "samples_seen", budget_samples),
        params=dict(jobs[0].params),
    )


def spent(jobs: Sequence[JobFacts]) -> dict[str, float]:
    """What the whole study spent: every job that ran counts, a pruned or failed one too
    (a pruned trial's figures are the steps and seconds it really took)."""
    steps = sum(j.metrics.get("optimizer_steps", 0.0) for j in jobs)
    seconds = sum(j.wall_clock_s or 0.0 for j in jobs)
    return {"optimizer_steps_spent": int(steps), "device_seconds": seconds}


def summarise(
    jobs: Sequence[JobFacts], budget: int | None
) -> tuple[list[ArmSummary], list[ParetoPoint]]:
    """Arms in first-seen order, each flagged when on the front; the front itself."""
    by_arm: dict[str, list[JobFacts]] = {}
    for job in jobs:
        by_arm.setdefault(job.arm, []).append(job)
    arms = [summarise_arm(label, group, budget) for label, group in by_arm.items()]
    scored = [
        (arm, arm.test_accuracy.mean, arm.parameters.mean)
        for arm in arms
        if arm.test_accuracy is not None and arm.parameters is not None
    ]
    # Chosen on the rows each trial held apart, so the test accuracy the study reports did
    # not choose it; on the test accuracy for a study whose jobs held none apart (older).
    on_validation = bool(scored) and all(arm.val_accuracy for arm, _, _ in scored)
    pareto = []
    for i in pareto_front([(_chosen_on(arm, on_validation), size) for arm, _, size in scored]):
        arm, accuracy, size = scored[i]
        arm.on_front = True
        validation = arm.val_accuracy.mean if arm.val_accuracy else None
        pareto.append(
            ParetoPoint(
                label=arm.label, test_accuracy=accuracy, parameters=size, val_accuracy=validation
            )
        )
    return arms, pareto


def _chosen_on(arm: ArmSummary, on_validation: bool) -> float:
    figure = arm.val_accuracy if on_validation else arm.test_accuracy
    assert figure is not None, "every ranked arm has it"
    return figure.mean
