"""The KEDA overlay's queries, run as KEDA runs them, against PostgreSQL.

Each scenario seeds teams, users, jobs and workers in one transaction (rolled back after),
runs the rendered ScaledObjects' queries, and checks the count two ways: the number written
in the scenario, and what the scheduler itself does (`claim_next` with that device's offer
until nothing is eligible, plus the jobs already running on that kind of worker).

A paused team is one whose jobs may not start: a team whose running-job quota is used up
(`team_at_quota`), or one over its weekly device-hours (`team_over_weekly_device_hours`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as accounts
from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.jobs.repository import Placement, create_job
from archsearch.jobs.domain.jobs.scheduler import claim_next
from archsearch.jobs.domain.tables import Job, JobStatus, WorkerRecord
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.jobs.platform.settings import Settings
from tests.k8s.conftest import render

KINDS = ("cpu", "cuda")
RUNNING_WITH_WORKER_DEVICE = text(
    "SELECT j.worker, w.device, j.device FROM jobs j"
    " LEFT JOIN workers w ON w.name = j.worker WHERE j.status = 'running'"
)
URGENT, NORMAL, LOW = 100, 0, -100


@pytest.fixture(scope="module")
def queries() -> dict[str, str]:
    """The query of each device kind's ScaledObject, as rendered by `kubectl kustomize`."""
    scaled = [o for o in render("keda") if o["kind"] == "ScaledObject"]
    by_target = {o["spec"]["scaleTargetRef"]["name"]: o["spec"]["triggers"] for o in scaled}
    found = {}
    for kind, target in (("cpu", "archsearch-worker-cpu"), ("cuda", "archsearch-worker-gpu")):
        (trigger,) = by_target[target]
        assert trigger["type"] == "postgresql"
        assert trigger["metadata"]["connectionFromEnv"] == "ARCHSEARCH_DATABASE_URL"
        found[kind] = trigger["metadata"]["query"]
    return found


@pytest.fixture
def session(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """An empty queue (inside this transaction), rolled back after the test."""
    with sessions() as session:
        for model in (Job, WorkerRecord, User, Team):
            session.query(model).delete()
        yield session
        session.rollback()


@dataclass
class Seed:
    session: Session
    teams: dict[str, Team] = field(default_factory=dict)
    users: dict[str, User] = field(default_factory=dict)

    def team(self, name: str, max_running: int | None = None) -> None:
        self.teams[name] = accounts.create_team(self.session, name, max_running)

    def user(self, name: str, team: str, max_running: int | None = None) -> None:
        self.users[name] = accounts.create_user(
            self.session, self.teams[team], name, False, max_running
        )

    def used(self, team: str, hours: float, weekly: float) -> None:
        """The team spent `hours` of device time today, with a weekly quota of `weekly` hours."""
        self.teams[team].weekly_device_hours = weekly
        self.job(None, "cpu")
        done = self.session.scalars(select(Job).order_by(Job.created_at.desc())).first()
        assert done is not None
        done.status, done.team_id = JobStatus.succeeded, self.teams[team].id
        end = utcnow()
        self.session.add(
            JobAttempt(
                job_id=done.id, attempt=1, team_id=done.team_id, method="train",
                device="cpu", worker="w", started_at=end - timedelta(hours=hours),
                last_seen_at=end, ended_at=end, seconds=hours * 3600,
            )
        )  # fmt: skip
        self.session.flush()
        assert team in quota.update_holds(self.session)

    def worker(self, name: str, device: str) -> None:
        self.session.add(WorkerRecord(name=name, host="node", device=device))

    def job(
        self,
        user: str | None,
        device: str = "auto",
        priority: int = NORMAL,
        *,
        running_on: str | None = None,
        gpu_memory: float | None = None,
    ) -> None:
        owner = self.users.get(user) if user else None
        placement = Placement(
            owner_id=owner.id if owner else None,
            team_id=owner.team_id if owner else None,
            priority=priority,
            device=device,
            min_gpu_memory_gb=gpu_memory,
        )
        job = create_job(self.session, "train", {}, None, placement)
        if running_on is not None:
            job.status, job.worker, job.attempts = JobStatus.running, running_on, 1
        self.session.flush()


def empty_queue(seed: Seed) -> None:
    seed.team("alpha")
    seed.user("alice", "alpha")


def cuda_vs_cpu(seed: Seed) -> None:
    seed.team("alpha")
    seed.user("alice", "alpha")
    for device in ("cpu", "cpu", "cuda", "cuda", "cuda", "auto"):
        seed.job("alice", device)
    seed.job("alice", "auto", gpu_memory=40)  # asks for GPU memory: never a CPU worker's
    seed.job(None, "cpu")  # a job without owner (auth off): no quota applies


def user_quota_full(seed: Seed) -> None:
    seed.team("alpha")
    seed.user("alice", "alpha", max_running=1)
    seed.user("bob", "alpha", max_running=3)
    seed.worker("cpu-1", "cpu")
    seed.worker("gpu-1", "cuda")
    seed.job("alice", "cpu", running_on="cpu-1")
    for _ in range(3):
        seed.job("alice", "cpu")  # alice is full: none of these may start
        seed.job("alice", "cuda")
    seed.job("bob", "cuda", running_on="gpu-1")
    for _ in range(4):
        seed.job("bob", "cpu")  # bob has room for two more, whatever their device
    seed.job("bob", "cuda")


def team_at_quota(seed: Seed) -> None:
    seed.team("alpha", max_running=1)  # the nearest thing to a paused team
    seed.team("beta", max_running=3)
    seed.user("alice", "alpha")
    seed.user("bob", "alpha")
    seed.user("carol", "beta", max_running=1)
    seed.user("dave", "beta")
    seed.worker("gpu-1", "cuda")
    seed.job("alice", "cuda", running_on="gpu-1")
    for user in ("alice", "bob", "bob"):
        seed.job(user, "cuda")  # alpha is full: none counts
    for user in ("carol", "carol", "dave", "dave", "dave"):
        seed.job(user, "cuda")  # beta: carol 1 + dave 2 = the team's 3


def priorities(seed: Seed) -> None:
    seed.team("alpha", max_running=2)
    seed.user("alice", "alpha", max_running=1)
    seed.user("bob", "alpha")
    seed.job("alice", "cpu", URGENT)
    seed.job("alice", "cpu", LOW)  # alice's quota: only one of her two starts
    seed.job("bob", "cpu", LOW)
    seed.job("bob", "cuda", URGENT)
    seed.job("bob", "cpu", NORMAL)  # team quota 2: per device, two start at most


def lost_worker(seed: Seed) -> None:
    seed.team("alpha")
    seed.user("alice", "alpha", max_running=2)
    # Running on workers whose rows are gone (pruned): counted by the job's device.
    seed.job("alice", "cuda", running_on="gone:1")
    seed.job("alice", "auto", running_on="gone:2")
    seed.job("alice", "cpu")  # full: blocked


def team_over_weekly_device_hours(seed: Seed) -> None:
    seed.team("alpha")
    seed.team("beta")
    seed.user("alice", "alpha")
    seed.user("carol", "beta")
    seed.worker("cpu-1", "cpu")
    seed.job("alice", "cpu", running_on="cpu-1")  # started before: it runs on
    seed.used("alpha", hours=3, weekly=2)  # the tick holds alpha
    for device in ("cpu", "cuda", "auto"):
        seed.job("alice", device)  # held: none counts
        seed.job("carol", device)


SCENARIOS: dict[str, tuple[Callable[[Seed], None], dict[str, int]]] = {
    "empty_queue": (empty_queue, {"cpu": 0, "cuda": 0}),
    "cuda_vs_cpu": (cuda_vs_cpu, {"cpu": 4, "cuda": 5}),
    "user_quota_full": (user_quota_full, {"cpu": 1 + 2, "cuda": 1 + 1}),
    "team_at_quota": (team_at_quota, {"cpu": 0, "cuda": 1 + 3}),
    "priorities": (priorities, {"cpu": 2, "cuda": 1}),
    "lost_worker": (lost_worker, {"cpu": 1, "cuda": 1}),
    "team_over_weekly_device_hours": (team_over_weekly_device_hours, {"cpu": 1 + 2, "cuda": 2}),
}


def scheduler_count(session: Session, kind: str) -> int:
    """Running on `kind` workers now + what `claim_next` hands such workers until none is
    eligible: the scheduler's own answer, inside a savepoint rolled back after."""
    rows = session.execute(RUNNING_WITH_WORKER_DEVICE)
    running = sum(1 for r in rows if (r[1] or ("cuda" if r[2] == "cuda" else "cpu")) == kind)
    savepoint, claimed = session.begin_nested(), 0
    while claim_next(session, f"sim-{uuid.uuid4().hex[:6]}", Offer(kind), Settings()) is not None:
        claimed += 1
    savepoint.rollback()
    return running + claimed


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_keda_query_counts_the_jobs_a_worker_could_start(
    scenario: str, session: Session, queries: dict[str, str]
) -> None:
    seed_scenario, expected = SCENARIOS[scenario]
    seed_scenario(Seed(session))
    session.flush()
    for kind in KINDS:
        counted = session.execute(text(queries[kind])).scalar_one()
        assert (counted, scheduler_count(session, kind)) == (expected[kind],) * 2, kind


def test_query_defaults_match_the_configmap(queries: dict[str, str]) -> None:
    (config,) = [o for o in render("keda") if o["kind"] == "ConfigMap"]
    settings = Settings.model_validate(
        {k.removeprefix("ARCHSEARCH_").lower(): v for k, v in config["data"].items()}
    )
    as_sql = [
        "NULL::int" if v is None else f"{v}::int"
        for v in (settings.max_running_per_user, settings.max_running_per_team)
    ]
    line = f"SELECT {as_sql[0]} AS per_user, {as_sql[1]} AS per_team"
    assert all(line in query for query in queries.values())
    # The two kinds' queries differ only in the device they count.
    cpu = queries["cpu"].replace("\n    AND j.min_gpu_memory_gb IS NULL", "")
    cpu = cpu.split("\n", 1)[1].split("--", 1)[0]
    assert cpu.replace("cpu", "cuda") == queries["cuda"].split("\n", 1)[1].split("--", 1)[0]
