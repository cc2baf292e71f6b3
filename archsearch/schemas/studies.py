"""Studies: many jobs that compare methods at equal budget, as one resource.

A study is a base spec, a budget, seeds, and arms (partial specs merged over the base), a
grid over dotted spec paths, the `best-small-model` preset, or an adaptive sampler over
declared knob ranges. Its summary gives per-arm mean and std over seeds and the Pareto
front of test accuracy against parameters. A `pruner` (Optuna's MedianPruner or
SuccessiveHalvingPruner, fed each trial's test accuracy after every epoch) stops hopeless
trials early: they end `pruned`, spent, and off the front.
"""

from __future__ import annotations

import enum
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from archsearch.schemas.common import Public, UtcDatetime
from archsearch.schemas.jobs import Priority


class StudyStatus(enum.StrEnum):
    """A study's life: running -> finished (its last job ended) | cancelled."""

    running = "running"
    finished = "finished"
    cancelled = "cancelled"

    @property
    def ended(self) -> bool:
        return self in ENDED_STUDY_STATUSES


ENDED_STUDY_STATUSES = frozenset({StudyStatus.finished, StudyStatus.cancelled})

Sampler = Literal["grid", "random", "tpe", "nsga2"]
Objectives = Literal["accuracy", "accuracy-parameters"]
Label = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.=+-]+$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StudyBudget(Strict):
    """Optimizer steps every arm may spend, or epochs of the dataset (turned into steps
    at the base spec's batch size)."""

    steps: int | None = Field(default=None, ge=1, le=100_000_000)
    epochs: float | None = Field(default=None, gt=0, le=10_000)

    @model_validator(mode="after")
    def _exactly_one(self) -> StudyBudget:
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("give exactly one of 'steps' and 'epochs'")
        return self


class StudyArm(Strict):
    label: str = Label
    spec: dict[str, Any] = Field(
        default_factory=dict, description="partial job spec merged over the study's base"
    )


class KnobRange(Strict):
    """A knob an adaptive study samples: numbers in [low, high] or one of `choices`."""

    low: float | None = Field(default=None, allow_inf_nan=False)
    high: float | None = Field(default=None, allow_inf_nan=False)
    log: bool = False
    integer: bool = Field(default=False, description="whole numbers (low and high too)")
    # Optuna stores choices as they are: plain JSON scalars only.
    choices: list[str | int | float | bool | None] | None = Field(
        default=None, min_length=1, max_length=100
    )

    @model_validator(mode="after")
    def _range_or_choices(self) -> KnobRange:
        numeric = self.low is not None and self.high is not None
        if numeric == (self.choices is not None):
            raise ValueError("give either 'low' and 'high', or 'choices'")
        if numeric and not (
            self.low is not None and self.high is not None and self.low < self.high
        ):
            raise ValueError("'low' must be below 'high'")
        if self.log and numeric and self.low is not None and self.low <= 0:
            raise ValueError("a 'log' range needs 'low' > 0")
        if (
            self.integer
            and numeric
            and not (float(self.low or 0).is_integer() and float(self.high or 0).is_integer())
        ):
            raise ValueError("an 'integer' range needs whole 'low' and 'high'")
        return self


class NoPruner(Strict):
    """Every trial runs its whole budget."""

    name: Literal["none"]


class MedianPrunerSpec(Strict):
    """Optuna's MedianPruner: stop a trial whose accuracy after an epoch is below the median
    of the finished trials' accuracy at that epoch."""

    name: Literal["median"]
    startup_trials: int = Field(
        default=2, ge=0, le=1000, description="trials that finish before any is pruned"
    )
    warmup_epochs: int = Field(
        default=1, ge=0, le=10_000, description="epochs every trial runs before it may be pruned"
    )


class AshaPrunerSpec(Strict):
    """Optuna's SuccessiveHalvingPruner (asynchronous successive halving): at each rung
    (min_epochs x reduction_factor^k epochs) keep the best 1/reduction_factor of the trials
    that reached it."""

    name: Literal["asha"]
    min_epochs: int = Field(default=1, ge=1, le=10_000, description="epochs of the first rung")
    reduction_factor: int = Field(
        default=3, ge=2, le=100, description="a rung keeps the best 1/reduction_factor"
    )


StudyPruner = Annotated[NoPruner | MedianPrunerSpec | AshaPrunerSpec, Field(discriminator="name")]


class StudyCreate(Strict):
    name: str = Field(min_length=1, max_length=200)
    dataset: dict[str, Any] = Field(description="as a job's dataset, e.g. {'name': 'mnist'}")
    base: dict[str, Any] = Field(
        default_factory=dict, description="partial job spec every arm starts from"
    )
    budget: StudyBudget | None = None
    seeds: list[Annotated[int, Field(ge=0, le=2**31 - 1)]] = Field(
        default=[0, 1, 2], min_length=1, max_length=20
    )
    arms: list[StudyArm] = Field(default_factory=list, max_length=1000)
    grid: dict[str, Annotated[list[Any], Field(min_length=1, max_length=1000)]] = Field(
        default_factory=dict, description="dotted spec path -> values; crossed with the arms"
    )
    preset: Literal["best-small-model"] | None = None
    preset_densities: list[Annotated[float, Field(gt=0, le=1)]] | None = Field(
        default=None,
        min_length=1,
        max_length=10,
        description="best-small-model: the densities (and edge fractions) it compares",
    )
    sampler: Sampler | None = Field(default=None, description="adaptive study over 'space'")
    space: dict[str, KnobRange] = Field(default_factory=dict, description="dotted path -> range")
    n_trials: int | None = Field(default=None, ge=1, le=10_000)
    parallel: int = Field(default=2, ge=1, le=64)
    objectives: Objectives = "accuracy-parameters"
    pruner: StudyPruner | None = Field(
        default=None, description="stop hopeless trials early: none, median or asha"
    )
    priority: Priority = "normal"

    @field_validator("pruner", mode="before")
    @classmethod
    def _pruner_by_name(cls, value: Any) -> Any:
        """`"median"` is short for `{"name": "median"}` (the knobs at their defaults)."""
        return {"name": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_kind(self) -> StudyCreate:
        if self.sampler is not None:
            if self.arms or self.grid or self.preset:
                raise ValueError(
                    "an adaptive study ('sampler') takes 'space', not arms/grid/preset"
                )
            if not self.space or self.n_trials is None:
                raise ValueError("an adaptive study needs 'space' and 'n_trials'")
        elif self.space or self.n_trials is not None:
            raise ValueError("'space' and 'n_trials' need a 'sampler'")
        if self.preset and (self.arms or self.grid):
            raise ValueError("a preset builds its own arms; leave out 'arms' and 'grid'")
        if len({arm.label for arm in self.arms}) != len(self.arms):
            raise ValueError("arm labels must be unique")
        return self


class Stat(BaseModel):
    """Mean and (sample) standard deviation over the seeds that have a value."""

    mean: float
    std: float
    n: int


class ArmSummary(BaseModel):
    label: str
    method: str
    jobs: int
    counts: dict[str, int]
    test_accuracy: Stat | None = None
    val_accuracy: Stat | None = Field(
        default=None,
        description="on the training rows each trial held apart: what the front is chosen on",
    )
    parameters: Stat | None = None
    macs: Stat | None = None
    compact_bytes: Stat | None = None
    latency_ms: Stat | None = None
    optimizer_steps: Stat | None = None
    samples_seen: Stat | None = Field(
        default=None, description="training samples + growth statistics samples read"
    )
    wall_clock_s: Stat | None = None
    budget_steps: int | None = None
    budget_samples: int | None = Field(
        default=None, description="the step budget in samples: steps x the arm's batch size"
    )
    over_budget: bool = False
    over_samples: bool = Field(
        default=False, description="a job read more samples than the budget's steps hold"
    )
    on_front: bool = False
    params: dict[str, Any] = Field(default_factory=dict, description="an adaptive trial's knobs")


class ParetoPoint(BaseModel):
    label: str
    test_accuracy: float
    parameters: float
    val_accuracy: float | None = Field(
        default=None, description="what the point was chosen on (none: a study from before)"
    )


class StudyPublic(Public):
    id: uuid.UUID
    name: str
    status: StudyStatus
    dataset: dict[str, Any]
    budget: dict[str, Any] | None
    seeds: list[int]
    sampler: str | None
    n_trials: int | None
    parallel: int | None
    trials_asked: int
    cancel_requested: bool
    owner_id: uuid.UUID | None
    team_id: uuid.UUID | None
    created_at: UtcDatetime
    updated_at: UtcDatetime
    finished_at: UtcDatetime | None
    counts: dict[str, int] = Field(default_factory=dict, description="jobs by status")


class StudyDetail(StudyPublic):
    config: dict[str, Any]
    optimizer_steps_spent: int = Field(
        default=0, description="over every job that ran, pruned and failed ones included"
    )
    device_seconds: float = Field(
        default=0.0, description="summed wall clock of the study's ended jobs"
    )
    arms: list[ArmSummary] = Field(default_factory=list)
    pareto: list[ParetoPoint] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)


class StudiesPublic(BaseModel):
    data: list[StudyPublic]


class WallTime(BaseModel):
    """Minutes of run time, from what this server measured of past succeeded jobs of the same
    method and dataset (seconds per training sample on one device kind); all null, with the
    reason in `basis`, when nothing was measured yet."""

    minutes: float | None = Field(description="typical: the median measured rate")
    minutes_low: float | None = Field(description="at the fastest measured rate")
    minutes_high: float | None = Field(description="at the slowest measured rate")
    device: str | None = Field(description="the device kind the measurements ran on")
    measured_jobs: int = Field(description="past jobs the rates come from")
    basis: str = Field(description="where the numbers come from, in words")


class PlannedArm(BaseModel):
    """One arm of a study as it would be queued: its jobs and what each trains."""

    label: str
    method: str
    jobs: int
    optimizer_steps: int = Field(description="per job, every phase counted")
    training_samples: int = Field(description="per job: optimizer steps x batch size")
    wall_time: WallTime | None = Field(default=None, description="per job")


class StudyPlan(BaseModel):
    """What a study expands into, before anything is queued (`?dry_run=true`)."""

    name: str
    jobs: int = Field(description="jobs the study would queue (adaptive: its trials)")
    budget_steps: int | None = Field(description="the budget in optimizer steps per job")
    optimizer_steps: int = Field(description="over every job: the compute it will take")
    training_samples: int = Field(description="over every job: samples through the model")
    arms: list[PlannedArm]
    wall_time: WallTime | None = Field(
        default=None,
        description="every job one after another (k workers in parallel take about 1/k)",
    )
