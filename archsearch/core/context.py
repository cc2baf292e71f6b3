"""The engine's only window on the outside world, and an in-memory implementation.

Methods receive a `RunContext`; the service implements it on top of the database and the
artifact store, tests and notebooks use `InMemoryContext`. Nothing in `core/` reads files,
environment variables or databases on its own.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from archsearch.core.charts import Chart
from archsearch.core.charts import draw as draw_chart


class RunContext(Protocol):
    """What a running method may do besides computing."""

    job_id: str
    device: torch.device

    def report(self, step: int, total: int, **metrics: float) -> None:
        """Progress (`step` of `total`) and, optionally, metric values at that step."""

    def should_stop(self) -> bool:
        """True once the job was cancelled; the method raises `JobCancelled` promptly."""

    def should_prune(self, epoch: int, value: float) -> bool:
        """After `epoch` epochs (of the current phase) whose test accuracy is `value`: True
        when a study's pruner stops this trial here; the method raises `TrialPruned`."""

    def save_artifact(self, name: str, data: bytes, media_type: str) -> None:
        """Store a downloadable result under a standard name (see ARCHITECTURE.md)."""

    def save_chart(self, name: str, chart: Chart) -> None:
        """A PNG result drawn from `chart` (`core.charts`): now, or when first downloaded.
        A chart drawn from another file of the job is saved after that file."""

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Persist resumable state; a redelivered job gets it from `load_checkpoint`."""

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The last saved state of this job, or None on a first attempt."""

    def read_job_artifact(self, job_id: str, name: str) -> bytes:
        """An artifact of another (finished) job, e.g. a mask to transfer or a model to grow."""


@dataclass(frozen=True)
class RunWarning:
    """Something a user must know about a finished run that is not an error: the job
    still succeeded, but not plainly (e.g. its predictions collapsed to one class).
    `code` is stable for programs; `message` says what was seen and what to try."""

    code: str
    message: str


@dataclass
class Result:
    """What a method returns: final scalar metrics, the per-epoch history, and warnings
    the service records on the job (an event each, and the job's `warnings`)."""

    metrics: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)
    warnings: list[RunWarning] = field(default_factory=list)


def checkpoint_to_bytes(state: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def checkpoint_from_bytes(data: bytes) -> dict[str, Any]:
    # weights_only: a checkpoint holds tensors and plain containers, never code.
    loaded = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    assert isinstance(loaded, dict), "a checkpoint is a dict of state"
    return loaded


@dataclass
class InMemoryContext:
    """A RunContext that keeps everything in memory: for tests, benchmarks and notebooks."""

    job_id: str = "local"
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    stop_after_reports: int | None = None
    prune_after_epochs: int | None = None  # should_prune turns true at this epoch
    other_jobs: dict[str, dict[str, bytes]] = field(default_factory=dict)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    media_types: dict[str, str] = field(default_factory=dict)
    reports: list[tuple[int, int, dict[str, float]]] = field(default_factory=list)
    checkpoint: bytes | None = None

    def report(self, step: int, total: int, **metrics: float) -> None:
        self.reports.append((step, total, dict(metrics)))

    def should_stop(self) -> bool:
        return self.stop_after_reports is not None and len(self.reports) >= self.stop_after_reports

    def should_prune(self, epoch: int, value: float) -> bool:
        return self.prune_after_epochs is not None and epoch >= self.prune_after_epochs

    def save_artifact(self, name: str, data: bytes, media_type: str) -> None:
        self.artifacts[name] = data
        self.media_types[name] = media_type

    def save_chart(self, name: str, chart: Chart) -> None:
        self.save_artifact(name, draw_chart(chart, self.artifacts.__getitem__), "image/png")

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        self.checkpoint = checkpoint_to_bytes(state)

    def load_checkpoint(self) -> dict[str, Any] | None:
        return None if self.checkpoint is None else checkpoint_from_bytes(self.checkpoint)

    def read_job_artifact(self, job_id: str, name: str) -> bytes:
        from archsearch.core.errors import ArtifactNotFoundError

        try:
            return self.other_jobs[job_id][name]
        except KeyError:
            raise ArtifactNotFoundError(f"job {job_id} has no artifact {name!r}") from None

    def metric_series(self, name: str) -> list[tuple[int, float]]:
        return [(step, m[name]) for step, _, m in self.reports if name in m]
