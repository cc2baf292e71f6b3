"""The `train` job: the dense baseline every search, prune and grow result is compared to."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, model_validator

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
    """Fields every job has. Only `method` and `dataset` are required."""

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


class TrainJob(JobBase):
    method: Literal["train"] = "train"
    model: ModelConfig = MLPConfig()
