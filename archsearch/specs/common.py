"""Building blocks shared by every job spec: datasets, optimisation, schedules.

Pure pydantic (no torch), so the API validates jobs without importing the engine.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Frozen(BaseModel):
    """Immutable, strict base: unknown fields are an error, not silently ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class DatasetRef(Frozen):
    """A dataset by built-in registry name or by the id of an uploaded dataset."""

    name: str | None = Field(default=None, description="built-in dataset, e.g. 'digits'")
    id: str | None = Field(default=None, description="id of an uploaded dataset")
    train_subset: int | None = Field(
        default=None, ge=1, description="use only this many training samples (seeded)"
    )
    samples_per_class: int | None = Field(
        default=None, ge=1, description="few-shot: this many training samples per class"
    )

    @model_validator(mode="after")
    def _exactly_one_source(self) -> DatasetRef:
        if (self.name is None) == (self.id is None):
            raise ValueError("give exactly one of 'name' (built-in dataset) or 'id' (upload)")
        return self


class OptimizerSpec(Frozen):
    name: Literal["sgd", "adam", "adamw"] = "adam"
    lr: float = Field(default=1e-3, gt=0, le=10)
    momentum: float = Field(default=0.9, ge=0, lt=1, description="sgd only")
    weight_decay: float = Field(default=0.0, ge=0)
    nesterov: bool = False


class ScheduleSpec(Frozen):
    name: Literal["constant", "cosine", "step"] = "cosine"
    warmup_epochs: int = Field(default=0, ge=0)
    step_epochs: int = Field(default=10, ge=1, description="step schedule: epochs per decay")
    gamma: float = Field(default=0.1, gt=0, le=1, description="step schedule: decay factor")


class TrainingSpec(Frozen):
    epochs: int = Field(default=10, ge=1, le=10_000)
    batch_size: int = Field(default=128, ge=1, le=65_536)
    optimizer: OptimizerSpec = OptimizerSpec()
    schedule: ScheduleSpec = ScheduleSpec()
    seed: int = 0
    max_grad_norm: float | None = Field(default=None, gt=0)
    precision: Literal["auto", "fp32", "bf16"] = Field(
        default="auto",
        description="forward passes in bf16 autocast or fp32; auto: bf16 on a CUDA device "
        "that supports it, fp32 on CPU (where bf16 measured no consistent speed-up)",
    )


def merge_over_defaults(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """`given` with every field it leaves out taken from `defaults`, recursively.

    A nested object that names a different kind (another optimiser or schedule `name`)
    replaces the default whole: the default's settings (SGD's lr 0.1 and momentum) belong to
    the default's kind and would be wrong for the one asked for, which keeps its own defaults.
    """
    merged = dict(defaults)
    for key, value in given.items():
        default = defaults.get(key)
        same_kind = isinstance(value, dict) and value.get("name", None) in (
            None,
            isinstance(default, dict) and default.get("name"),
        )
        if isinstance(value, dict) and isinstance(default, dict) and same_kind:
            merged[key] = merge_over_defaults(default, value)
        else:
            merged[key] = value
    return merged


class ResourceSpec(Frozen):
    """Where the job may run. The engine uses CUDA when the worker offers it."""

    device: Literal["cpu", "cuda", "auto"] = "auto"
    min_gpu_memory_gb: float | None = Field(default=None, gt=0)
