"""Priority preemption: an urgent job that finds every worker busy takes the worker of the
running job of the lowest priority, which stops at its next checkpoint, goes back to the
queue without spending an attempt, and resumes later; never a job of equal or higher
priority, never more jobs than needed, and nothing at all with the setting off.

The decisions are checked on seeded rows of a real PostgreSQL; one test runs them for real:
a worker (one process, one job at a time) with preemption on, in a database of its own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import handback, repository
from archsearch.jobs.domain.jobs.preemption import plan_preemptions
from archsearch.jobs.domain.jobs.repository import Placement
from archsearch.jobs.domain.jobs.scheduler import pending_reason
from archsearch.jobs.domain.tables import Job, JobEvent, WorkerRecord
from archsearch.jobs.platform.broker import CeleryEnqueuer
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.reaper import preempt_for_waiting_jobs
from archsearch.schemas.jobs import PRIORITY_LEVELS, JobStatus
from tests.service.conftest import start_worker
from tests.service.procs import REDIS_URL, create_database, drop_database

pytestmark = pytest.mark.service
URGENT, HIGH, NORMAL, LOW = (PRIORITY_LEVELS[p] for p in ("urgent", "high", "normal", "low"))
ON = Settings(preemption=True)


@pytest.fixture(scope="module")
def db_url() -> Iterator[str]:
    """A database of this module's own: no other worker claims its jobs."""
    name = f"archsearch_preempt_{uuid.uuid4().hex[:8]}"
    url = create_database(name)
    upgrade(url)
    yield url
    drop_database(name)


@pytest.fixture()
def db(db_url: str) -> Iterator[sessionmaker[Session]]:
    """An empty queue and no workers."""
    engine = make_engine(db_url)
    sessions = make_session_factory(engine)
    with transaction(sessions) as session:
        session.execute(delete(Job))
        session.execute(delete(WorkerRecord))
    yield sessions
    engine.dispose()


def job(
    db: sessionmaker[Session], priority: int, device: str = "auto", age: float = 0
) -> uuid.UUID:
    with transaction(db) as session:
        created = repository.create_job(session, "train", {}, None, Placement(priority=priority))
        created.device = device
        created.created_at = utcnow() - timedelta(seconds=age)
        return created.id


def running(db: sessionmaker[Session], priority: int, device: str = "cpu", age: float = 0) -> str:
    """A job of `priority` running on a live worker of `device`; returns the worker's name."""
    job_id, worker = job(db, priority, age=age), f"w-{uuid.uuid4().hex[:6]}"
    with transaction(db) as session:
        found = session.get(Job, job_id)
        assert found is not None
        found.status, found.worker, found.attempts = JobStatus.running, worker, 1
        session.add(
            WorkerRecord(
                name=worker, host="node", device=device, heartbeat_at=utcnow(), started_at=utcnow()
            )
        )
        session.flush()
        session.get_one(WorkerRecord, worker).current_job_id = job_id
    return worker


def running_job_of(db: sessionmaker[Session], worker: str) -> uuid.UUID:
    with db() as session:
        found = session.scalar(select(Job.id).where(Job.worker == worker))
        assert found is not None
        return found


def plan(db: sessionmaker[Session], settings: Settings = ON) -> list[tuple[uuid.UUID, uuid.UUID]]:
    with transaction(db) as session:
        return [(p.job_id, p.victim_id) for p in plan_preemptions(session, settings)]


def reasons(db: sessionmaker[Session], job_id: uuid.UUID) -> list[str]:
    with db() as session:
        query = select(JobEvent.reason).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
        return list(session.scalars(query))


def test_the_lowest_priority_youngest_job_makes_way_and_no_more(db: sessionmaker[Session]) -> None:
    normal = running(db, NORMAL, age=30)
    old_low, young_low = running(db, LOW, age=20), running(db, LOW, age=10)
    urgent = job(db, URGENT)
    victim = running_job_of(db, young_low)
    assert plan(db) == [(urgent, victim)]
    assert plan(db) == []  # the victim is on its way: nothing more until it stops
    assert f"preempting job {victim} (low priority) to start" in reasons(db, urgent)
    assert any(r.startswith(f"preemption asked: job {urgent}") for r in reasons(db, victim))
    with db() as session:
        waiting = session.get_one(Job, urgent)
        assert pending_reason(session, waiting, ON).startswith(f"preempting job {victim}")
    second = job(db, URGENT)
    assert plan(db) == [(second, running_job_of(db, old_low))]
    assert plan(db) == []
    third = job(db, URGENT)  # only the normal job is left below urgent
    assert plan(db) == [(third, running_job_of(db, normal))]


def test_one_victim_per_urgent_job_whatever_dies_during_its_hand_back(
    db: sessionmaker[Session],
) -> None:
    first, second = running(db, LOW, age=10), running(db, LOW, age=20)
    urgent = job(db, URGENT)
    victim = running_job_of(db, first)
    assert plan(db) == [(urgent, victim)]
    with transaction(db) as session:  # SIGKILLed: its worker goes silent, its lease still runs
        session.get_one(WorkerRecord, first).heartbeat_at = utcnow() - timedelta(hours=1)
        session.get_one(Job, victim).lease_expires_at = utcnow() + timedelta(seconds=30)
    assert plan(db) == []
    with transaction(db) as session:  # ... or it handed the victim back, then died
        assert handback.hand_back(session, victim, first, "worker stopping")
    assert plan(db) == []
    with transaction(db) as session:  # two leases on, its worker has not claimed: one more
        session.get_one(Job, urgent).victim_asked_until = utcnow() - timedelta(seconds=1)
    assert plan(db) == [(urgent, running_job_of(db, second))]


def test_equal_or_higher_priority_is_never_preempted(db: sessionmaker[Session]) -> None:
    running(db, URGENT)
    running(db, URGENT + 5)
    job(db, URGENT)
    assert plan(db) == []


def test_a_free_worker_or_a_foreign_device_means_no_preemption(db: sessionmaker[Session]) -> None:
    low_cpu = running(db, LOW, device="cpu")
    job(db, URGENT, device="cuda")  # no CUDA worker: stopping a CPU job would not help
    assert plan(db) == []
    with transaction(db) as session:  # a free CPU worker comes up
        now = utcnow()
        session.add(WorkerRecord(name="idle", host="n", device="cpu", heartbeat_at=now))
    cpu_job = job(db, URGENT, device="cpu")
    assert plan(db) == []  # it starts on the idle worker
    job(db, URGENT, device="cpu")  # a second one finds no free worker
    assert [victim for _, victim in plan(db)] == [running_job_of(db, low_cpu)]
    assert cpu_job not in [p[0] for p in plan(db)]


def test_high_may_preempt_only_when_configured(db: sessionmaker[Session]) -> None:
    running(db, LOW)
    high = job(db, HIGH)
    assert plan(db) == []  # the default: only urgent preempts
    assert [p[0] for p in plan(db, Settings(preemption=True, preemption_priority="high"))] == [high]


def test_with_the_setting_off_nothing_is_preempted(db_url: str, db: sessionmaker[Session]) -> None:
    running(db, LOW)
    job(db, URGENT)
    services = Services.from_settings(Settings(database_url=db_url))
    try:
        assert preempt_for_waiting_jobs(services) == []
        with db() as session:
            assert session.scalar(select(Job).where(Job.stop_requested_for.is_not(None))) is None
    finally:
        services.engine.dispose()


# The live test: a low-priority job long enough (~8 s on a quiet CPU) to be still running
# when the preemption reaches it: a tick and a lease renewal (a third of the 3 s lease
# each), then its next checkpoint (an epoch, ~0.03 s). As the engine's steps got cheaper,
# 60 epochs came down to 1.9 s on an AVX-512 CPU and once ended before the preemption.
EPOCHS = 250
TRAIN = {"method": "train", "dataset": {"name": "digits"}, "training": {"batch_size": 16}}


def submit(
    db: sessionmaker[Session], enqueuer: CeleryEnqueuer, priority: int, epochs: int
) -> uuid.UUID:
    spec = {**TRAIN, "training": {**TRAIN["training"], "epochs": epochs}}
    with transaction(db) as session:
        job_id = repository.create_job(
            session, "train", spec, None, Placement(priority=priority)
        ).id
    enqueuer.enqueue(job_id, "auto")
    return job_id


def wait_for(db: sessionmaker[Session], job_id: uuid.UUID, done: str, timeout: float = 240) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with db() as session:
            found = session.get_one(Job, job_id)
            session.expunge(found)
        points = len(series(db, job_id))
        if (done == "running" and found.status is JobStatus.running and points >= 2) or (
            done == "ended" and found.status.terminal
        ):
            return found
        time.sleep(0.1)
    raise TimeoutError(f"job {job_id} never {done}")


def series(db: sessionmaker[Session], job_id: uuid.UUID) -> list[int]:
    with db() as session:
        return [
            s
            for s, _ in repository.metric_series(session, job_id, ["test_accuracy"]).get(
                "test_accuracy", []
            )
        ]


def events(db: sessionmaker[Session], job_id: uuid.UUID) -> list[tuple[str, str, object]]:
    with db() as session:
        query = select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
        return [(e.to_status, e.reason, e.at) for e in session.scalars(query)]


@pytest.mark.slow
def test_an_urgent_job_takes_the_worker_of_a_running_low_priority_job(
    db_url: str, db: sessionmaker[Session], service_env: dict[str, str], log_dir: Path
) -> None:
    queue = f"archsearch-preempt-{uuid.uuid4().hex[:8]}"
    env = {
        **service_env,
        "ARCHSEARCH_DATABASE_URL": db_url,
        "ARCHSEARCH_QUEUE_NAME": queue,
        "ARCHSEARCH_PREEMPTION": "true",
        "ARCHSEARCH_TORCH_THREADS": "1",
    }
    enqueuer = CeleryEnqueuer(Settings(broker_url=REDIS_URL, queue_name=queue))
    worker = start_worker(env, log_dir, "preempting")
    try:
        low = submit(db, enqueuer, LOW, EPOCHS)
        wait_for(db, low, "running")
        first, second = submit(db, enqueuer, URGENT, 3), submit(db, enqueuer, URGENT, 3)
        finished = {j: wait_for(db, j, "ended") for j in (first, second, low)}
    finally:
        worker.stop()
    assert {j.status for j in finished.values()} == {JobStatus.succeeded}, worker.log()
    assert [j.attempts for j in finished.values()] == [1, 1, 1]
    low_events = events(db, low)
    preempted = [(s, r, at) for s, r, at in low_events if r.startswith("preempted")]
    assert len(preempted) == 1 and preempted[0][0] == "queued", low_events
    assert f"job {first} of higher priority needs this worker" in preempted[0][1]
    first_events, second_events = events(db, first), events(db, second)
    assert f"preempting job {low} (low priority) to start" in [r for _, r, _ in first_events]
    # The urgent job started once the low one was handed back, the low one resumed last,
    # and the second urgent job never preempted the first (equal priority): it waited.
    (first_start,) = [at for s, _, at in first_events if s == "running"]
    assert preempted[0][2] <= first_start
    assert not [r for _, r, _ in second_events if "preempt" in r]
    assert not [r for _, r, _ in first_events if r.startswith("preempted")]
    resumed = [at for s, _, at in low_events if s == "running"][-1]
    assert resumed >= max(at for s, _, at in second_events if s == "succeeded")
    (asked,) = [at for _, r, at in low_events if r.startswith("preemption asked")]
    print(  # the figures (pytest -s)
        f"asked -> handed back {(preempted[0][2] - asked).total_seconds():.2f} s, "
        f"handed back -> urgent started {(first_start - preempted[0][2]).total_seconds():.2f} s"
    )
    steps = series(db, low)  # one point per epoch, each once, none lost
    assert steps == [steps[0] * epoch for epoch in range(1, EPOCHS + 1)]
