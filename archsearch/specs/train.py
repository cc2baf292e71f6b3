"""The `train` job: the dense baseline every search, prune and grow result is compared to."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import Field, model_validator

from archsearch.specs.budget import budget_too_small, steps_per_epoch, updated_spec
from archsearch.specs.common import (
    DatasetRef,
    Frozen,
    ResourceSpec,
    TrainingSpec,
    merge_over_defaults,
)
from archsearch.specs.families import ModelConfig
from archsearch.specs.model_configs import MLPConfig


class JobBase(Frozen):
    """Fields every job has. Only `method` and `dataset` are required.

    Each method's facts live on its class: the paper it implements (`paper`, shown in the
    model card), the epochs its phases take (`planned_epochs`), how it is fitted to a step
    budget (`epochs_fitted`, `budget_knobs`).
    """

    paper: ClassVar[str] = ""
    # The fields a step budget sets, named when a budget cannot hold the mandatory phases.
    budget_knobs: ClassVar[str] = "training.epochs"

    method: str  # each job type narrows it to its name, the union's discriminator
    dataset: DatasetRef
    training: TrainingSpec = TrainingSpec()
    resources: ResourceSpec = ResourceSpec()
    label: str | None = Field(default=None, max_length=200, description="free text for humans")

    @model_validator(mode="before")
    @classmethod
    def _training_over_method_defaults(cls, data: Any) -> Any:
        # Each method declares its own default `training` (search: SGD 0.1 for 8 epochs).
        # A partial object keeps those defaults for every field it leaves out, instead of
        # silently falling back to TrainingSpec's generic ones; `spec.json` shows the result.
        if isinstance(data, dict) and isinstance(data.get("training"), dict):
            default = cls.model_fields["training"].default
            assert isinstance(default, TrainingSpec), "every job has a default training"
            data = {**data, "training": merge_over_defaults(default.model_dump(), data["training"])}
        return data

    def referenced_jobs(self) -> list[str]:
        """Ids of other jobs whose artifacts this job reads (they must have succeeded)."""
        return list(self.job_references().values())

    def job_references(self) -> dict[str, str]:
        """The other jobs this job reads, by the field that names each as the user wrote it
        (`source_job`, `jobs[1]`): a full id or a unique prefix until submit resolves it."""
        return {}

    def with_job_ids(self, full_ids: dict[str, str]) -> Self:
        """This spec with each field of `job_references` set to its resolved full id."""
        return self

    def missing_inputs(self) -> dict[str, str]:
        """Inputs a runnable job still lacks, as {field: what to give}; checked at submit.

        A spec parses without them (so every method's minimal spec is valid JSON to build
        on), but the server refuses to queue a job that could only fail.
        """
        return {}

    def schedule_problems(self, n: int) -> dict[str, str]:
        """Fields whose values make a schedule that does nothing on `n` training samples, as
        {field: what is wrong and what to set}; checked at submit, once the dataset is known."""
        return {}

    def planned_epochs(self) -> int:
        """Epochs over the training set in all of this job's phases."""
        return int(self.training.epochs)

    def steps_on(self, n: int) -> int:
        """Optimiser steps this job takes on `n` training samples, every phase counted."""
        return self.planned_epochs() * steps_per_epoch(n, self.training.batch_size)

    def epochs_fitted(self, epochs: int) -> dict[str, Any]:
        """The knob changes ({"a.b": value}) that make every phase fit in `epochs` epochs."""
        return {"training.epochs": epochs}

    def fitted_to_steps(self, budget: int, n: int) -> Self:
        """A copy spending at most `budget` steps on `n` samples, as close to it as whole
        epochs allow; raises ValueError naming `budget_knobs` when one epoch does not fit."""
        per_epoch = steps_per_epoch(n, self.training.batch_size)
        changes = self.epochs_fitted(budget // per_epoch)
        if changes["training.epochs"] < 1:
            raise budget_too_small(budget, per_epoch, self.budget_knobs)
        return updated_spec(self, changes)


class TrainJob(JobBase):
    paper: ClassVar[str] = "dense baseline (no architecture learning)"
    method: Literal["train"] = "train"
    model: ModelConfig = MLPConfig()
