"""A dry run's wall-time estimate from what this server measured.

Each past succeeded job of the same method on the same dataset gives one rate: the seconds
its runs held a device divided by the training samples its spec planned (optimizer steps
x batch size, every phase, on this dataset). A planned job's minutes are its samples times
the median rate; the range is the fastest and the slowest rate seen, so it shows how much
the measurements disagree (another model size, a busier machine). Rates of one device
kind only: the kind with the most measurements, named in the answer.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from pydantic import ValidationError

from archsearch.jobs.domain.datasets.catalog import DatasetFacts
from archsearch.jobs.domain.studies.run_times import MeasuredRun
from archsearch.schemas.studies import PlannedArm, WallTime
from archsearch.specs import DatasetRef, parse_job_spec
from archsearch.specs.budget import planned_steps


def same_dataset(spec: dict[str, object], dataset: DatasetRef) -> bool:
    ref = spec.get("dataset")
    if not isinstance(ref, dict):
        return False
    return (ref.get("name"), ref.get("id")) == (dataset.name, dataset.id)


def seconds_per_sample(run: MeasuredRun, facts: DatasetFacts) -> float | None:
    """The run's measured rate, or None when its spec no longer parses or trained nothing."""
    try:
        spec = parse_job_spec(run.spec)
    except (ValidationError, ValueError):
        return None
    samples = planned_steps(spec, facts.train_size, facts.num_classes) * spec.training.batch_size
    return run.seconds / samples if samples > 0 else None


def measured_rates(
    runs: Sequence[MeasuredRun], dataset: DatasetRef, facts: DatasetFacts
) -> tuple[str, list[float]] | None:
    """(device kind, its rates) from the runs on `dataset`; None when there are none."""
    by_device: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        if same_dataset(run.spec, dataset) and (rate := seconds_per_sample(run, facts)):
            by_device[run.device].append(rate)
    if not by_device:
        return None
    return max(by_device.items(), key=lambda item: len(item[1]))


def arm_wall_time(arm: PlannedArm, rates: tuple[str, list[float]] | None, dataset: str) -> WallTime:
    """Minutes one job of `arm` takes, at the measured rates."""
    if rates is None:
        basis = f"no measurement yet: no succeeded {arm.method} job on {dataset} here"
        return WallTime(
            minutes=None,
            minutes_low=None,
            minutes_high=None,
            device=None,
            measured_jobs=0,
            basis=basis,
        )
    device, found = rates
    minutes = [arm.training_samples * rate / 60 for rate in found]
    spread = "one measurement, no spread yet" if len(found) == 1 else "fastest to slowest"
    return WallTime(
        minutes=statistics.median(minutes),
        minutes_low=min(minutes),
        minutes_high=max(minutes),
        device=device,
        measured_jobs=len(found),
        basis=f"{len(found)} past {arm.method} job(s) on {dataset} ({device}); range: {spread}",
    )


def study_wall_time(arms: Sequence[PlannedArm]) -> WallTime:
    """Every job of every arm one after another."""
    unmeasured = [
        arm.label for arm in arms if arm.wall_time is None or arm.wall_time.minutes is None
    ]
    if unmeasured or not arms:
        return WallTime(
            minutes=None,
            minutes_low=None,
            minutes_high=None,
            device=None,
            measured_jobs=0,
            basis=f"no measurement yet for arm(s) {', '.join(unmeasured) or 'none'}",
        )
    times = [(arm.jobs, arm.wall_time) for arm in arms if arm.wall_time is not None]
    devices = ", ".join(sorted({t.device for _, t in times if t.device}))
    measured = sum(t.measured_jobs for _, t in times)
    return WallTime(
        minutes=sum(n * (t.minutes or 0) for n, t in times),
        minutes_low=sum(n * (t.minutes_low or 0) for n, t in times),
        minutes_high=sum(n * (t.minutes_high or 0) for n, t in times),
        device=devices,
        measured_jobs=measured,
        basis=f"every job one after another, at the rates of {measured} past job(s) on {devices}",
    )
