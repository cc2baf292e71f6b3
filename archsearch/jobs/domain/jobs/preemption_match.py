"""Matching waiting jobs to live workers for priority preemption (`preemption.py` reads the
rows and asks the stops): the worker a waiting job will get without a new stop, or else the
running job that makes way for it.

One pass matches W waiting jobs to S live workers in O((W + S) log S) and reads each row
once: workers are grouped by what they offer (device and GPU memory: a fleet has a handful
of kinds), each group keeps its workers in the order the rule prefers them (by name; its
possible victims in a heap, the lowest priority and the youngest job first), and a job looks
only at the heads of the groups able to run it. Pure Python, no I/O.
"""

from __future__ import annotations

import heapq
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

from archsearch.jobs.domain.base import as_utc, utcnow
from archsearch.jobs.domain.jobs.offer import Offer

OfferKey = tuple[str, float | None]  # a worker's device and GPU memory


@dataclass(frozen=True)
class Waiting:
    """A queued job that may preempt: what choosing its worker needs."""

    id: uuid.UUID
    priority: int
    device: str
    min_gpu_memory_gb: float | None
    victim_asked_until: datetime | None


@dataclass(frozen=True)
class Slot:
    """A live worker (`index`: its place in name order) and the job it runs, if any."""

    index: int
    device: str
    gpu_memory_gb: float | None
    job_id: uuid.UUID | None = None
    priority: int = 0
    created_at: datetime | None = None
    stop_requested_for: uuid.UUID | None = None

    @property
    def offer(self) -> OfferKey:
        return self.device, self.gpu_memory_gb

    @property
    def victim_rank(self) -> tuple[int, float, int]:
        """Victims first: the lowest priority, then the youngest job, then name order."""
        created = as_utc(self.created_at).timestamp() if self.created_at else 0.0
        return self.priority, -created, self.index


def can_run(offer: OfferKey, job: Waiting) -> bool:
    """Whether the scheduler would give `job` to a worker offering `offer` (its device and
    GPU memory)."""
    device, memory = offer
    if job.device not in Offer(device, memory).accepts:
        return False
    if job.min_gpu_memory_gb is None:
        return True
    if device == "cpu":
        return False
    return memory is None or job.min_gpu_memory_gb <= memory


class Line:
    """Slots in name order; a slot taken through another line is skipped when reached."""

    def __init__(self) -> None:
        self._slots: deque[Slot] = deque()

    def append(self, slot: Slot) -> None:
        self._slots.append(slot)

    def first(self, taken: set[int]) -> Slot | None:
        while self._slots and self._slots[0].index in taken:
            self._slots.popleft()
        return self._slots[0] if self._slots else None


@dataclass
class Group:
    """The live workers of one offer, sorted by what the rule wants of them."""

    stopping_for: dict[uuid.UUID, Line] = field(default_factory=dict)
    free: Line = field(default_factory=Line)
    stopping: Line = field(default_factory=Line)  # for any job
    victims: list[tuple[tuple[int, float, int], Slot]] = field(default_factory=list)

    def add(self, slot: Slot) -> None:
        if slot.job_id is None:
            self.free.append(slot)
        elif slot.stop_requested_for is None:
            heapq.heappush(self.victims, (slot.victim_rank, slot))
        else:
            self.stopping_for.setdefault(slot.stop_requested_for, Line()).append(slot)
            self.stopping.append(slot)

    def line(self, wanted: str, job_id: uuid.UUID) -> Line | None:
        if wanted == "its own":  # stopping for this very job
            return self.stopping_for.get(job_id)
        return self.free if wanted == "free" else self.stopping


class Fleet:
    """The live workers one pass hands out: each at most once."""

    def __init__(self, slots: list[Slot]) -> None:
        self._groups: dict[OfferKey, Group] = {}
        self._fitting: dict[tuple[str, float | None], list[Group]] = {}
        self._taken: set[int] = set()
        for slot in sorted(slots, key=lambda s: s.index):
            self._groups.setdefault(slot.offer, Group()).add(slot)

    def on_its_way(self, job: Waiting) -> Slot | None:
        """A worker `job` will get without a new stop: one stopping its job for `job`, else a
        free one, else one stopping for another job (that job no longer needs it, or will
        find another): the first by name among the groups able to run it."""
        groups = self._groups_for(job)
        for wanted in ("its own", "free", "stopping"):
            heads = [line.first(self._taken) for g in groups if (line := g.line(wanted, job.id))]
            if found := [slot for slot in heads if slot is not None]:
                return min(found, key=lambda slot: slot.index)
        return None

    def victim_for(self, job: Waiting) -> Slot | None:
        """The running job of the lowest priority below `job`'s, the youngest first, among
        the workers able to run `job` that are not stopping already."""
        tops = [g.victims[0][1] for g in self._groups_for(job) if g.victims]
        lower = [slot for slot in tops if slot.priority < job.priority]
        return min(lower, key=lambda slot: slot.victim_rank, default=None)

    def take(self, slot: Slot) -> None:
        self._taken.add(slot.index)
        victims = self._groups[slot.offer].victims
        if victims and victims[0][1] is slot:
            heapq.heappop(victims)

    def _groups_for(self, job: Waiting) -> list[Group]:
        needs = (job.device, job.min_gpu_memory_gb)
        if needs not in self._fitting:
            fits = [group for offer, group in self._groups.items() if can_run(offer, job)]
            self._fitting[needs] = fits
        return self._fitting[needs]


def choose_victims(
    waiting: list[Waiting], slots: list[Slot], awaited: set[uuid.UUID]
) -> list[tuple[Waiting, uuid.UUID]]:
    """For each waiting job in scheduler order, a worker on its way or else a victim (the
    jobs asked to stop now, with the job each makes way for). `awaited`: the waiting jobs a
    running job is already stopping for, its lease alive."""
    fleet, chosen = Fleet(slots), []
    for job in waiting:
        slot = fleet.on_its_way(job)
        if slot is None and _still_awaits_its_victim(job, awaited):
            continue  # its victim's worker went silent mid-hand-back: no second victim yet
        if slot is None and (slot := fleet.victim_for(job)) is not None:
            assert slot.job_id is not None, "a victim runs a job"
            chosen.append((job, slot.job_id))
        if slot is not None:
            fleet.take(slot)
    return chosen


def _still_awaits_its_victim(job: Waiting, awaited: set[uuid.UUID]) -> bool:
    asked_until = job.victim_asked_until
    return job.id in awaited or (asked_until is not None and as_utc(asked_until) > utcnow())
