"""What a worker process offers the scheduler: a device, how much GPU memory, and its slot.

A worker with several slots (`Settings.worker_slots`) registers each slot (each pool process)
as a worker of its own: a slot offers the device's memory divided by the slots, so the
claim's GPU-memory filter keeps a big job off a small slot, and its jobs are charged the
share of the device the slot holds (`device_share`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Offer:
    """What a worker process can run."""

    device: str  # cpu | cuda | any (the embedded runner takes every job)
    gpu_memory_gb: float | None = None  # this slot's share of the GPU's memory
    slots: int = 1  # the jobs its worker runs at once on the device, this one among them

    @property
    def accepts(self) -> tuple[str, ...]:
        """The jobs' `device` values this offer serves."""
        return {"cuda": ("cuda", "auto"), "cpu": ("cpu", "auto")}.get(
            self.device, ("cpu", "cuda", "auto")
        )

    @property
    def device_share(self) -> float:
        """The share of the device one job here holds: what its device time is charged."""
        return 1.0 / self.slots
