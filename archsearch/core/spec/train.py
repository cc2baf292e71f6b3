"""The `train` job: the dense baseline every search, prune and grow result is compared to."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from archsearch.core.spec.common import DatasetRef, Frozen, ResourceSpec, TrainingSpec
from archsearch.core.spec.families import ModelConfig
from archsearch.core.spec.model_configs import MLPConfig


class JobBase(Frozen):
    """Fields every job has. Only `method` and `dataset` are required."""

    dataset: DatasetRef
    training: TrainingSpec = TrainingSpec()
    resources: ResourceSpec = ResourceSpec()
    label: str | None = Field(default=None, max_length=200, description="free text for humans")

    def referenced_jobs(self) -> list[str]:
        """Ids of other jobs whose artifacts this job reads (they must have succeeded)."""
        return []

    def missing_inputs(self) -> dict[str, str]:
        """Inputs a runnable job still lacks, as {field: what to give}; checked at submit.

        A spec parses without them (so every method's minimal spec is valid JSON to build
        on), but the server refuses to queue a job that could only fail.
        """
        return {}


class TrainJob(JobBase):
    method: Literal["train"] = "train"
    model: ModelConfig = MLPConfig()
