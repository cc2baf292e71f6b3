"""One scheduling rule: on random states, the autoscaler's count per device kind
(`archsearch_claimable`, the function each KEDA query calls) is what `claim_next` hands an
unbounded fleet of every kind, and the kinds together never ask for more pods than there
are jobs that can run at once.

A state: teams and users with quotas (0 pauses; None: the server default, itself drawn),
held teams, priorities, devices, GPU memory requests beyond every offer, running jobs on
live and on lost workers, jobs a claim would cancel or fail instead of starting. Every
user's jobs carry the user's team, as a submit records them. Each state is seeded inside a
savepoint of one transaction and rolled back.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random

from sqlalchemy import text
from sqlalchemy.orm import Session

from archsearch.jobs.domain.jobs import claimable
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus
from tests.k8s.test_keda_query import KINDS, LOW, NORMAL, URGENT, Seed, claimed_by, fleet_counts

MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class JobDraw:
    user: int | None  # index into the users; None: no owner (auth off)
    device: str
    priority: int
    gpu_memory: float | None
    state: str  # queued | running | running_lost | cancel_asked | exhausted
    worker_device: str


@dataclass(frozen=True)
class State:
    teams: list[tuple[int | None, bool]]  # (max_running, held)
    users: list[tuple[int, int | None]]  # (team index, max_running)
    per_user: int | None
    per_team: int | None
    fleet_gpu_memory_gb: float | None
    jobs: list[JobDraw]


STATES = 200
QUOTAS = (None, None, 0, 1, 2, 3)  # a user's own; None: the server default
TEAM_QUOTAS = (None, 0, 1, 2, 2, 3, 4)
JOB_STATES = ("queued",) * 5 + ("running", "running", "running_lost", "cancel_asked", "exhausted")


def draw_job(rng: Random) -> JobDraw:
    return JobDraw(
        user=rng.choice((None, 0, 1, 2, 3, 0, 1, 2, 3)),
        device=rng.choice(("cpu", "cuda", "auto", "auto")),
        priority=rng.choice((LOW, NORMAL, NORMAL, NORMAL, URGENT)),
        gpu_memory=rng.choice((None, None, None, 8.0, 24.0, 80.0)),
        state=rng.choice(JOB_STATES),
        worker_device=rng.choice(KINDS),
    )


def draw_state(rng: Random) -> State:
    teams = [(rng.choice(TEAM_QUOTAS), rng.random() < 0.25) for _ in range(rng.randint(1, 2))]
    users = [(rng.randint(0, 1), rng.choice(QUOTAS)) for _ in range(rng.randint(2, 4))]
    return State(
        teams=teams,
        users=users,
        per_user=rng.choice((None, None, 1, 2)),
        per_team=rng.choice((None, None, 2, 3)),
        fleet_gpu_memory_gb=rng.choice((None, 16.0, 40.0)),
        jobs=[draw_job(rng) for _ in range(rng.randint(2, 14))],
    )


def seed_state(session: Session, state: State) -> None:
    seed = Seed(session)
    for t, (max_running, held) in enumerate(state.teams):
        seed.team(f"t{t}", max_running)
        if held:
            seed.teams[f"t{t}"].usage_held_reason = "over its weekly device-hours"
    for u, (team, max_running) in enumerate(state.users):
        seed.user(f"u{u}", f"t{team % len(state.teams)}", max_running)
    for n, draw in enumerate(state.jobs):
        _seed_job(seed, n, draw, len(state.users))


def _seed_job(seed: Seed, n: int, draw: JobDraw, users: int) -> None:
    user = None if draw.user is None else f"u{draw.user % users}"
    running_on = None
    if draw.state == "running":
        running_on = f"w{n}"
        seed.worker(running_on, draw.worker_device)
    elif draw.state == "running_lost":
        running_on = f"gone:{n}"  # its worker's row was pruned
    seed.job(user, draw.device, draw.priority, running_on=running_on, gpu_memory=draw.gpu_memory)
    if draw.state in ("cancel_asked", "exhausted"):
        job = seed.session.query(Job).order_by(Job.created_at.desc()).first()
        assert job is not None and job.status is JobStatus.queued
        job.cancel_requested = draw.state == "cancel_asked"
        job.attempts = MAX_ATTEMPTS if draw.state == "exhausted" else 1
        seed.session.flush()


def settings_of(state: State) -> Settings:
    return Settings(
        max_running_per_user=state.per_user,
        max_running_per_team=state.per_team,
        fleet_gpu_memory_gb=state.fleet_gpu_memory_gb,
        max_attempts=MAX_ATTEMPTS,
    )


def counted(session: Session, kind: str, config: Settings) -> int:
    defaults = (config.max_running_per_user, config.max_running_per_team)
    query = claimable.count_query(kind, defaults, config.fleet_gpu_memory_gb, config.max_attempts)
    return int(session.execute(text(query)).scalar_one())


def check_state(session: Session, state: State) -> None:
    seed_state(session, state)
    config = settings_of(state)
    scheduled = fleet_counts(session, config)
    counts = {kind: counted(session, kind, config) for kind in KINDS}
    assert counts == {kind: scheduled[kind] for kind in KINDS}
    running = session.query(Job).filter(Job.status == JobStatus.running).count()
    can_run = running + claimed_by(session, config, ("any",))["any"]
    assert sum(counts.values()) <= can_run


def test_the_count_is_what_the_claim_hands_out(session: Session) -> None:
    for seed in range(STATES):
        state = draw_state(Random(seed))
        savepoint = session.begin_nested()
        try:
            check_state(session, state)
        except AssertionError as failed:
            raise AssertionError(f"state {seed}: {state}") from failed
        finally:
            savepoint.rollback()
