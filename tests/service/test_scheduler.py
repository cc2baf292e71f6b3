"""The scheduler on a real PostgreSQL: order, fair share, quotas, placement, and many
concurrent claimers. Runs on a database of its own, which no worker process watches."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import create_engine, delete, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.jobs.repository import Placement
from archsearch.jobs.domain.jobs.scheduler import (
    CANDIDATE_WINDOW,
    claim_next,
    pending_reason,
    queue_position,
)
from archsearch.jobs.domain.tables import Job, JobEvent, RunningCount
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus
from tests.service.procs import create_database, drop_database

pytestmark = pytest.mark.service
CPU = Offer("cpu")
SPEC = {"method": "train", "dataset": {"name": "digits"}}


@pytest.fixture()
def db() -> Iterator[sessionmaker[Session]]:
    name = f"archsearch_sched_{uuid.uuid4().hex[:8]}"
    url = create_database(name)
    upgrade(url)
    engine = make_engine(url)
    yield make_session_factory(engine)
    engine.dispose()
    drop_database(name)


@pytest.fixture()
def people(db: sessionmaker[Session]) -> dict[str, tuple[uuid.UUID, uuid.UUID]]:
    """user -> (user id, team id): alice and bob in alpha (quota 3), carol in beta."""
    with transaction(db) as session:
        alpha = account_repo.create_team(session, "alpha", 3)
        beta = account_repo.create_team(session, "beta", None)
        users = {
            name: account_repo.create_user(session, team, name, False, quota)
            for name, team, quota in (
                ("alice", alpha, 2),
                ("bob", alpha, None),
                ("carol", beta, None),
            )
        }
        return {name: (user.id, user.team_id) for name, user in users.items()}


def submit(
    db: sessionmaker[Session], people: dict, user: str, priority: int = 0, device: str = "auto"
) -> uuid.UUID:
    owner, team = people[user]
    with transaction(db) as session:
        placement = Placement(
            actor=user, owner_id=owner, team_id=team, priority=priority, device=device
        )
        return repository.create_job(session, "train", SPEC, user, placement).id


def claim(
    db: sessionmaker[Session],
    offer: Offer = CPU,
    worker: str = "w",
    settings: Settings | None = None,
) -> uuid.UUID | None:
    with transaction(db) as session:
        return claim_next(session, worker, offer, settings or Settings())


def label_of(db: sessionmaker[Session], job_id: uuid.UUID | None) -> str | None:
    if job_id is None:
        return None
    with db() as session:
        return session.get(Job, job_id).label


def test_priority_then_fair_share_then_first_come(db: sessionmaker[Session], people: dict) -> None:
    a1, a2, a3 = (submit(db, people, "alice") for _ in range(3))
    b1 = submit(db, people, "bob")
    c_high = submit(db, people, "carol", priority=10)
    order = [claim(db, worker=f"w{i}") for i in range(5)]
    # Highest priority first; then alice's oldest; then bob, who has nothing running, goes
    # before alice's second; alice's third waits on her quota of 2.
    assert order == [c_high, a1, b1, a2, None]
    with db() as session:
        job = session.get(Job, a3)
        assert pending_reason(session, job, Settings()) == "user quota 2/2 in use"
        assert queue_position(session, job) == 1


def test_team_quota_and_device_placement(db: sessionmaker[Session], people: dict) -> None:
    jobs = [submit(db, people, "bob") for _ in range(4)]
    gpu_job = submit(db, people, "carol", device="cuda")
    claimed = [claim(db, worker=f"w{i}") for i in range(4)]
    assert claimed == jobs[:3] + [None]  # team alpha's quota is 3; the cuda job is not for a CPU
    with db() as session:
        assert (
            pending_reason(session, session.get(Job, jobs[3]), Settings())
            == "team quota 3/3 in use"
        )
        assert pending_reason(session, session.get(Job, gpu_job), Settings()).startswith(
            "waiting for a worker with a CUDA device"
        )
    assert claim(db, Offer("cuda", 16.0)) == gpu_job


@pytest.mark.parametrize("database", ["postgresql", "sqlite"])
def test_a_quota_of_zero_pauses_a_user_or_a_team(
    database: str, db: sessionmaker[Session], tmp_path: Any
) -> None:
    """0 is a quota (nothing starts), not "unset": on the claim's one-statement path
    (PostgreSQL) and on the in-process one (SQLite, embedded) alike."""
    if database == "sqlite":
        url = f"sqlite:///{tmp_path / 'paused.db'}"
        upgrade(url)
        db = make_session_factory(make_engine(url))
    with transaction(db) as session:
        paused_team = account_repo.create_team(session, "paused", 0)
        open_team = account_repo.create_team(session, "open", None)
        users = {
            "alice": account_repo.create_user(session, paused_team, "alice", False, None),
            "bob": account_repo.create_user(session, open_team, "bob", False, 0),
            "carol": account_repo.create_user(session, open_team, "carol", False, None),
        }
        people = {name: (user.id, user.team_id) for name, user in users.items()}
    alice, bob = submit(db, people, "alice", 10), submit(db, people, "bob", 10)
    carol = submit(db, people, "carol")
    assert [claim(db, worker=f"w{i}") for i in range(2)] == [carol, None]
    with db() as session:
        reasons = [
            pending_reason(session, session.get_one(Job, j), Settings()) for j in (alice, bob)
        ]
    assert reasons == ["team quota 0/0 in use", "user quota 0/0 in use"]


def test_higher_priority_jobs_ahead_are_counted(db: sessionmaker[Session], people: dict) -> None:
    low = submit(db, people, "carol", priority=-10)
    for _ in range(3):
        submit(db, people, "carol", priority=10)
    with db() as session:
        job = session.get(Job, low)
        settings = Settings(broker_url=None)
        assert queue_position(session, job) == 4
        assert pending_reason(session, job, settings) == "3 higher-priority jobs ahead"


def test_a_claim_passes_a_window_held_by_others_and_opens_the_run(
    db: sessionmaker[Session], people: dict
) -> None:
    """Other claimers hold every job of the fair-share window: the claim takes the first
    free job beyond it in the same statement, with its event and its usage row."""
    jobs = [submit(db, people, "carol") for _ in range(CANDIDATE_WINDOW + 2)]
    holder = db()
    held = select(Job.id).order_by(Job.priority.desc(), Job.created_at, Job.id)
    holder.execute(held.limit(CANDIDATE_WINDOW).with_for_update())  # another claimer's locks
    try:
        assert claim(db, worker="w1") == jobs[CANDIDATE_WINDOW]
    finally:
        holder.rollback()
        holder.close()
    assert claim(db, worker="w2") == jobs[0]
    with db() as session:
        runs = session.scalars(select(JobAttempt).order_by(JobAttempt.started_at)).all()
        assert [(r.job_id, r.attempt, r.worker, r.device) for r in runs] == [
            (jobs[CANDIDATE_WINDOW], 1, "w1", "cpu"),
            (jobs[0], 1, "w2", "cpu"),
        ]
        started = session.scalars(select(JobEvent.job_id).where(JobEvent.to_status == "running"))
        assert sorted(started) == sorted([jobs[CANDIDATE_WINDOW], jobs[0]])


def test_deleting_a_user_or_team_clears_it_from_usage_rows(
    db: sessionmaker[Session], people: dict
) -> None:
    """Usage rows name their owner and team without foreign keys (a claim would lock the
    team's row); deleting either still clears it from them, as `ON DELETE SET NULL` did."""
    job_id = submit(db, people, "carol")
    assert claim(db) == job_id
    owner, team = people["carol"]
    with transaction(db) as session:
        session.execute(delete(User).where(User.id == owner))
        session.execute(delete(Team).where(Team.id == team))
    with db() as session:
        run = session.scalars(select(JobAttempt)).one()
        assert (run.job_id, run.owner_id, run.team_id) == (job_id, None, None)


def test_concurrent_claimers_never_run_a_job_twice(db: sessionmaker[Session], people: dict) -> None:
    submitted = [submit(db, people, "carol") for _ in range(120)]
    claimed: list[uuid.UUID] = []
    lock = threading.Lock()

    def claimer(index: int) -> None:
        while (job_id := claim(db, worker=f"worker-{index}")) is not None:
            with lock:
                claimed.append(job_id)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(claimer, range(8)))
    assert sorted(claimed) == sorted(submitted)
    assert len(set(claimed)) == len(claimed)
    with db() as session:
        attempts = Counter(session.scalars(select(Job.attempts)))
    assert attempts == {1: 120}


def test_quotas_hold_under_concurrent_claims(db: sessionmaker[Session], people: dict) -> None:
    for _ in range(30):
        submit(db, people, "alice")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: claim(db, worker=f"worker-{i}"), range(24)))
    with db() as session:
        running = session.scalar(
            select(func.count()).select_from(Job).where(Job.status == JobStatus.running)
        )
    assert running == 2  # alice's quota, however many workers asked at once


def running_per(session: Session, column: Any) -> dict[uuid.UUID, int]:
    query = (
        select(column, func.count())
        .where(Job.status == JobStatus.running, column.is_not(None))
        .group_by(column)
    )
    return {subject: count for subject, count in session.execute(query)}


FREE_SLOTS_SQL = """
SELECT current_setting('max_connections')::int
       - current_setting('superuser_reserved_connections')::int - count(*)
FROM pg_stat_activity WHERE backend_type = 'client backend'
"""
HOLDERS_SQL = """
SELECT coalesce(nullif(application_name, ''), '?') || ' on ' || coalesce(datname, '?'), count(*)
FROM pg_stat_activity WHERE backend_type = 'client backend' GROUP BY 1 ORDER BY 2 DESC
"""


def wait_for_free_connections(db: sessionmaker[Session], needed: int, seconds: float) -> None:
    """The server's free connection slots (processes of earlier tests may still be closing
    theirs), waited for; a failure names who holds the slots."""
    deadline = time.monotonic() + seconds
    with db() as session:
        while (free := session.scalar(text(FREE_SLOTS_SQL))) < needed:
            if time.monotonic() > deadline:
                holders = session.execute(text(HOLDERS_SQL)).all()
                pytest.fail(f"{free} free connection slots, {needed} needed; held: {holders}")
            time.sleep(0.5)


def test_64_claimers_fill_every_quota_exactly_and_never_share_a_job(
    db: sessionmaker[Session],
) -> None:
    """64 claimers at once, each on its own connection, until nothing is eligible: four
    teams of quota 5 with three users of quota 2 each (so a team fills before its users),
    one team without a quota whose users have 3, and owners with no quota at all."""
    with transaction(db) as session:
        limited = [account_repo.create_team(session, f"t{i}", 5) for i in range(4)]
        free_team = account_repo.create_team(session, "free", None)
        users = [
            account_repo.create_user(session, team, f"{team.name}-u{j}", False, quota)
            for team, quota in [(t, 2) for t in limited] + [(free_team, 3)]
            for j in range(3)
        ]
        unlimited = account_repo.create_user(session, free_team, "unlimited", False, None)
        owners = {user.id: (user.id, user.team_id) for user in [*users, unlimited]}
    people = {str(owner): pair for owner, pair in owners.items()}
    for user in users:
        for _ in range(6):
            submit(db, people, str(user.id))
    open_jobs = {submit(db, people, str(unlimited.id)) for _ in range(40)}

    # A connection per claimer (the service's pool stops at 30).
    wait_for_free_connections(db, 64, seconds=60)
    wide = make_session_factory(create_engine(db.kw["bind"].url, pool_size=64, max_overflow=0))
    claimed: list[uuid.UUID] = []
    lock, start = threading.Lock(), threading.Barrier(64)

    def claimer(index: int) -> None:
        start.wait()
        while (job_id := claim(wide, worker=f"worker-{index}")) is not None:
            with lock:
                claimed.append(job_id)

    with ThreadPoolExecutor(64) as pool:
        list(pool.map(claimer, range(64)))
    wide.kw["bind"].dispose()
    assert len(set(claimed)) == len(claimed), "no job was claimed twice"
    assert open_jobs <= set(claimed), "jobs without any quota all ran"
    with db() as session:
        per_user, per_team = running_per(session, Job.owner_id), running_per(session, Job.team_id)
        attempts = Counter(session.scalars(select(Job.attempts)))
        stored: Counter[tuple[str, uuid.UUID]] = Counter()
        for row in session.scalars(select(RunningCount)):
            stored[row.kind, row.subject_id] += row.running  # the sum of its shards
    assert attempts == {1: len(claimed), 0: 130 - len(claimed)}
    assert {per_team[t.id] for t in limited} == {5}, "every limited team exactly full"
    assert all(per_user.get(u.id, 0) <= 2 for u in users[:12]), "no user over quota"
    assert [per_user[u.id] for u in users[12:]] == [3, 3, 3]
    assert per_user[unlimited.id] == 40
    # The counts the database keeps are the counts of the jobs.
    assert stored == {
        **{("user", s): n for s, n in per_user.items()},
        **{("team", s): n for s, n in per_team.items()},
    }
