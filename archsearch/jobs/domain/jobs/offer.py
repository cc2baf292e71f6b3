"""What a worker process offers the scheduler: a device, and how much GPU memory."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Offer:
    """What a worker process can run."""

    device: str  # cpu | cuda | any (the embedded runner takes every job)
    gpu_memory_gb: float | None = None

    @property
    def accepts(self) -> tuple[str, ...]:
        """The jobs' `device` values this offer serves."""
        return {"cuda": ("cuda", "auto"), "cpu": ("cpu", "auto")}.get(
            self.device, ("cpu", "cuda", "auto")
        )
