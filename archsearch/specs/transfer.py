"""The `transfer` and `compare_spectra` jobs: what a prune job's masks are then used for.

Papers: "Differentiable Architecture Pruning for Transfer Learning" (Algorithm A.2, the
retraining of a found architecture on a new task) and "Disentangling Neural Architectures and
Weights" (the Laplacian spectra of section 5). Torch-free: the API validates these without
the engine.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from archsearch.specs.budget import steps_per_epoch, transfer_schedule, updated_spec
from archsearch.specs.prune import PruneJob
from archsearch.specs.train import JobBase

TRANSFER_STEPS = 1000


class TransferJob(JobBase):
    """Train a freshly initialised network with a prune job's architecture (Appendix A.2)."""

    paper: ClassVar[str] = PruneJob.paper

    method: Literal["transfer"] = "transfer"
    # Optional only so that {"method": "transfer", "dataset": ...} parses like every job;
    # running without it fails at once with a message that says what to set.
    source_job: str | None = Field(
        default=None, min_length=1, description="id of a finished prune job"
    )
    mask: Literal["learned", "random", "magnitude", "imp", "reshuffle"] = Field(
        default="learned",
        description="learned: the job's mask; random / reshuffle: drawn here at the same "
        "(global / per-layer) density; magnitude / imp: the job's saved baseline masks",
    )
    # `mask: learned` is the learned mask, first layer included. Reshuffling the first layer
    # (an explicit option) replaces most of an MLP's masked weights (200,704 of 233,472 for
    # the default MLP on MNIST) by a random layer, which is then no longer the found
    # architecture; it helps only when the target's informative inputs differ from the
    # source's (MNIST -> Fashion-MNIST, docs/jobs.md).
    first_layer: Literal["masked", "reshuffled", "dense"] = Field(
        default="masked",
        description="the mask's first layer: masked (as learned, the default); reshuffled at "
        "its own density (inputs the source task never used are connected again); dense "
        "(not masked; needed when the input size differs)",
    )
    # Appendix A.2 retrains for T gradient steps. Few-shot sets are a handful of batches,
    # so epochs of them are far too few steps (10 epochs of 50 per class: 40 steps).
    steps: int | None = Field(
        default=TRANSFER_STEPS,
        ge=1,
        le=1_000_000,
        description="optimiser steps of retraining, whatever the training-set size; "
        "null: training.epochs passes (also when training.epochs is given and steps is not)",
    )

    @model_validator(mode="before")
    @classmethod
    def _explicit_epochs_win(cls, data: object) -> object:
        # A user who sets training.epochs (and no step budget) asked for epochs.
        training = data.get("training") if isinstance(data, dict) else None
        if isinstance(data, dict) and isinstance(training, dict) and "steps" not in data:
            if "epochs" in training:
                return {**data, "steps": None}
        return data

    def job_references(self) -> dict[str, str]:
        return {"source_job": self.source_job} if self.source_job else {}

    def with_job_ids(self, full_ids: dict[str, str]) -> Self:
        return self.model_copy(update={"source_job": full_ids.get("source_job", self.source_job)})

    def steps_on(self, n: int) -> int:
        if self.steps is None:
            return super().steps_on(n)
        repeat, epochs = transfer_schedule(n, self.training.batch_size, self.steps)
        return epochs * steps_per_epoch(n * repeat, self.training.batch_size)

    def fitted_to_steps(self, budget: int, n: int) -> Self:
        if self.steps is None:
            return super().fitted_to_steps(budget, n)
        # Rounding to whole epochs can overshoot `steps`: take the largest that does not.
        for steps in range(min(budget, 1_000_000), 0, -1):
            repeat, epochs = transfer_schedule(n, self.training.batch_size, steps)
            if epochs * steps_per_epoch(n * repeat, self.training.batch_size) <= budget:
                return updated_spec(self, {"steps": steps})
        raise ValueError(f"steps: a budget of {budget} steps is too small to plan a transfer run")

    def missing_inputs(self) -> dict[str, str]:
        return (
            {}
            if self.source_job
            else {"source_job": "the id of a succeeded prune job whose mask to transfer"}
        )


class CompareSpectraJob(JobBase):
    """Compare the Laplacian spectra of several jobs in 2-D (PCA, as in Figure 5)."""

    paper: ClassVar[str] = "Disentangling Neural Architectures and Weights (Laplacian spectra)"

    method: Literal["compare_spectra"] = "compare_spectra"
    jobs: tuple[str, ...] = Field(default=(), description="ids of finished prune jobs (2 or more)")
    spectrum: Literal["mask", "weighted"] = Field(
        default="mask", description="the binary architecture's spectrum or the weighted one"
    )

    def job_references(self) -> dict[str, str]:
        return {f"jobs[{i}]": job for i, job in enumerate(self.jobs)}

    def with_job_ids(self, full_ids: dict[str, str]) -> Self:
        jobs = tuple(full_ids.get(f"jobs[{i}]", job) for i, job in enumerate(self.jobs))
        return self.model_copy(update={"jobs": jobs})

    def missing_inputs(self) -> dict[str, str]:
        return {} if len(self.jobs) >= 2 else {"jobs": "the ids of 2 or more succeeded prune jobs"}

    def planned_epochs(self) -> int:
        return 0  # it trains nothing

    def fitted_to_steps(self, budget: int, n: int) -> Self:
        return self
