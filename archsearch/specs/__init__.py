"""Job specs: a discriminated union on `method`, frozen, `extra="forbid"`, torch-free.

`{"method": "train", "dataset": {"name": "digits"}}` alone is a valid job; every other
field has a default. The API validates requests with these models without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field, TypeAdapter

from archsearch.specs.common import (
    DatasetRef,
    Frozen,
    OptimizerSpec,
    ResourceSpec,
    ScheduleSpec,
    TrainingSpec,
)
from archsearch.specs.families import MODEL_NAMES, ModelConfig
from archsearch.specs.grow import GrowJob
from archsearch.specs.model_configs import CNNConfig, MLPConfig, ModelConfigBase
from archsearch.specs.prune import PruneJob
from archsearch.specs.search import SearchJob
from archsearch.specs.train import JobBase, TrainJob
from archsearch.specs.transfer import CompareSpectraJob, TransferJob

JOB_TYPES: tuple[type[JobBase], ...] = (
    TrainJob,
    SearchJob,
    GrowJob,
    PruneJob,
    TransferJob,
    CompareSpectraJob,
)
if TYPE_CHECKING:  # a union built at run time; type checkers see the common base
    JobSpec = JobBase
else:
    JobSpec = Annotated[Union[JOB_TYPES], Field(discriminator="method")]  # noqa: UP007 (a union built at run time needs Union[...])
METHOD_NAMES = tuple(t.model_fields["method"].default for t in JOB_TYPES)

job_spec_adapter: TypeAdapter[JobBase] = TypeAdapter(JobSpec)


def parse_job_spec(data: object) -> JobBase:
    """Validate a JSON-like object as a job spec (raises pydantic.ValidationError)."""
    return job_spec_adapter.validate_python(data)


__all__ = [
    "CNNConfig",
    "DatasetRef",
    "Frozen",
    "GrowJob",
    "JOB_TYPES",
    "JobBase",
    "JobSpec",
    "METHOD_NAMES",
    "MLPConfig",
    "MODEL_NAMES",
    "ModelConfig",
    "ModelConfigBase",
    "OptimizerSpec",
    "ResourceSpec",
    "ScheduleSpec",
    "SearchJob",
    "TrainJob",
    "TrainingSpec",
    "parse_job_spec",
]
