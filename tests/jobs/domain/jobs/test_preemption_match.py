"""The preemption pass's matching (`preemption_match.choose_victims`) against the rule as
plainly written: for each waiting job in order, a worker on its way (stopping for it, else
free, else stopping for another job, the first by name that can run it), else the running
job of the lowest lower priority, the youngest first; each worker handed out once.

The plain version walks every worker for every job (what one pass did before, seconds at
10,000 workers); the grouped one must choose exactly the same victims on random fleets
with several device kinds, GPU memory asks beyond every offer, stopping workers, free
workers and waiting jobs whose victim is still on its way.
"""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs.preemption_match import Slot, Waiting, can_run, choose_victims

OFFERS = [("cpu", None), ("cuda", 80.0), ("cuda", 40.0), ("cuda", None)]
DEVICES = ["cpu", "cuda", "auto"]
PRIORITIES = [-10, 0, 10, 20]


def plainly(
    waiting: list[Waiting], slots: list[Slot], awaited: set[uuid.UUID]
) -> list[tuple[Waiting, uuid.UUID | None]]:
    free_to_take, chosen = list(slots), []
    for job in waiting:
        fits = [s for s in free_to_take if can_run(s.offer, job)]
        wanted = (
            [s for s in fits if s.job_id is not None and s.stop_requested_for == job.id]
            or [s for s in fits if s.job_id is None]
            or [s for s in fits if s.job_id is not None and s.stop_requested_for is not None]
        )
        slot = wanted[0] if wanted else None
        asked_until = job.victim_asked_until
        if slot is None and (job.id in awaited or (asked_until and asked_until > utcnow())):
            continue
        if slot is None:
            lower = [
                s
                for s in fits
                if s.job_id is not None
                and s.stop_requested_for is None
                and s.priority < job.priority
            ]
            if lower:
                slot = min(lower, key=lambda s: (s.priority, -created(s)))
                chosen.append((job, slot.job_id))
        if slot is not None:
            free_to_take.remove(slot)
    return chosen


def created(slot: Slot) -> float:
    assert slot.created_at is not None, "a running job has its creation time"
    return slot.created_at.timestamp()


def random_state(rng: random.Random) -> tuple[list[Waiting], list[Slot], set[uuid.UUID]]:
    now = utcnow()
    waiting = [
        Waiting(
            id=uuid.uuid4(),
            priority=rng.choice([10, 20, 30]),
            device=rng.choice(DEVICES),
            min_gpu_memory_gb=rng.choice([None, None, 30.0, 60.0, 100.0]),
            victim_asked_until=rng.choice([None, None, None, now + timedelta(seconds=60)]),
        )
        for _ in range(rng.randint(0, 12))
    ]
    waiting.sort(key=lambda job: -job.priority)
    slots = [random_slot(rng, index, waiting) for index in range(rng.randint(0, 25))]
    awaited = {job.id for job in waiting if rng.random() < 0.2}
    return waiting, slots, awaited


def random_slot(rng: random.Random, index: int, waiting: list[Waiting]) -> Slot:
    device, memory = rng.choice(OFFERS)
    if rng.random() < 0.2:
        return Slot(index, device, memory)
    stopping = None
    if waiting and rng.random() < 0.25:
        stopping = rng.choice(waiting).id if rng.random() < 0.7 else uuid.uuid4()
    age = timedelta(seconds=rng.choice([0, 10, 20, 30]))  # equal ages: name order decides
    return Slot(
        index, device, memory, uuid.uuid4(), rng.choice(PRIORITIES), utcnow() - age, stopping
    )


def test_the_grouped_matching_chooses_what_the_plain_rule_chooses() -> None:
    rng, victims_seen = random.Random(20261129), 0
    for _ in range(400):
        waiting, slots, awaited = random_state(rng)
        expected = plainly(waiting, slots, awaited)
        assert choose_victims(waiting, slots, awaited) == expected
        victims_seen += len(expected)
    assert victims_seen > 200  # the states exercise the victim choice, not only free workers


def test_a_job_asking_more_gpu_memory_than_any_worker_has_takes_no_victim() -> None:
    busy = Slot(0, "cuda", 40.0, uuid.uuid4(), priority=-10, created_at=utcnow())
    big = Waiting(uuid.uuid4(), 20, "cuda", 80.0, None)
    assert choose_victims([big], [busy], set()) == []
    fits = Waiting(uuid.uuid4(), 20, "cuda", 40.0, None)
    assert choose_victims([big, fits], [busy], set()) == [(fits, busy.job_id)]
