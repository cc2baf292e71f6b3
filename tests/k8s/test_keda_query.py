"""The KEDA overlay's queries, run as KEDA runs them, against PostgreSQL.

Each scenario seeds teams, users, jobs and workers in one transaction (rolled back after),
runs the rendered ScaledObjects' queries, and checks the count two ways: the number written
in the scenario, and what the scheduler itself does (`fleet_counts`: `claim_next` handing
jobs to an unbounded fleet of every kind claiming at once, plus the jobs already running on
that kind of worker). `test_one_rule.py` checks the same on random states.

A paused team is one whose jobs may not start: a team whose running-job quota is used up
(`team_at_quota`), or one over its weekly device-hours (`team_over_weekly_device_hours`).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts import repository as accounts
from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import claimable
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.jobs.repository import Placement, create_job
from archsearch.jobs.domain.jobs.scheduler import claim_next
from archsearch.jobs.domain.tables import Job, WorkerRecord
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus
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
    # The plain `auto` job counts once, for cpu: both kinds' claims reach it first.
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
        seed.job("bob", "cpu")  # bob has room for two more: his two oldest, on cpu
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
    seed.job("bob", "cpu", NORMAL)  # team quota 2: the two urgent jobs, one per kind


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


def paused(seed: Seed) -> None:
    seed.team("alpha", max_running=0)  # a quota of 0 pauses: no job of alpha starts
    seed.team("beta")
    seed.user("alice", "alpha")
    seed.user("bob", "beta", max_running=0)
    seed.user("carol", "beta")
    for user, device in (("alice", "cpu"), ("alice", "cuda"), ("bob", "cpu"), ("bob", "auto")):
        seed.job(user, device)
    seed.job("carol", "cuda")


def fair_share_across_kinds(seed: Seed) -> None:
    seed.team("alpha", max_running=2)
    seed.user("alice", "alpha")
    seed.user("bob", "alpha")
    seed.worker("cpu-1", "cpu")
    seed.job("alice", "cpu", running_on="cpu-1")
    seed.job("alice", "cpu")  # older, but alice runs a job and bob none:
    seed.job("bob", "cuda")  # the team's last room goes to bob's, on cuda


SCENARIOS: dict[str, tuple[Callable[[Seed], None], dict[str, int]]] = {
    "empty_queue": (empty_queue, {"cpu": 0, "cuda": 0}),
    "paused": (paused, {"cpu": 0, "cuda": 1}),
    "fair_share_across_kinds": (fair_share_across_kinds, {"cpu": 1, "cuda": 1}),
    "cuda_vs_cpu": (cuda_vs_cpu, {"cpu": 4, "cuda": 4}),
    "user_quota_full": (user_quota_full, {"cpu": 1 + 2, "cuda": 1}),
    "team_at_quota": (team_at_quota, {"cpu": 0, "cuda": 1 + 3}),
    "priorities": (priorities, {"cpu": 1, "cuda": 1}),
    "lost_worker": (lost_worker, {"cpu": 1, "cuda": 1}),
    "team_over_weekly_device_hours": (team_over_weekly_device_hours, {"cpu": 1 + 2, "cuda": 1}),
}


# The claim's fair-share rank of a job (`claim_sql._FAIR_PICK`): the job a fleet of every
# kind claims next is the one of least rank among what each kind's claim would take.
FAIR_RANK = text(
    "SELECT -j.priority, coalesce(r.running, 0), j.created_at, j.id FROM jobs j"
    " LEFT JOIN running_counts r ON r.kind = 'user' AND r.subject_id = j.owner_id"
    " AND r.shard = 0 WHERE j.id = :id"
)


def offer(kind: str, settings: Settings) -> Offer:
    """What a worker of the fleet's `kind` offers (`any`: the embedded runner's)."""
    return Offer(kind, settings.fleet_gpu_memory_gb if kind == "cuda" else None)


def running_per_kind(session: Session) -> Counter[str]:
    rows = session.execute(RUNNING_WITH_WORKER_DEVICE)
    return Counter(r[1] or ("cuda" if r[2] == "cuda" else "cpu") for r in rows)


def _next_claimant(session: Session, settings: Settings) -> str | None:
    """The kind whose claim takes the job of least fair-share rank (each claim tried in a
    savepoint rolled back); an `auto` job both kinds reach goes to the first kind, cpu."""
    ranks = {}
    for kind in KINDS:
        trial = session.begin_nested()
        job_id = claim_next(session, "trial", offer(kind, settings), settings)
        trial.rollback()
        if job_id is not None:
            ranks[kind] = tuple(session.execute(FAIR_RANK, {"id": job_id}).one())
    return min(ranks, key=lambda kind: (ranks[kind], KINDS.index(kind)), default=None)


def claimed_by(session: Session, settings: Settings, kinds: tuple[str, ...]) -> Counter[str]:
    """What `claim_next` hands out to an unbounded fleet of every kind in `kinds`, claiming at
    once, per kind (inside a savepoint rolled back after). `("any",)`: the embedded runner,
    which takes every job: what can run at once."""
    savepoint, claimed = session.begin_nested(), Counter[str]()
    while True:
        kind = kinds[0] if kinds == ("any",) else _next_claimant(session, settings)
        if kind is None:
            break
        worker = f"sim-{uuid.uuid4().hex[:6]}"
        if claim_next(session, worker, offer(kind, settings), settings) is None:
            break
        claimed[kind] += 1
    savepoint.rollback()
    return claimed


def fleet_counts(session: Session, settings: Settings) -> Counter[str]:
    """Per kind: running on that kind now + what the fleet of every kind is handed."""
    return running_per_kind(session) + claimed_by(session, settings, KINDS)


def query_counts(session: Session, queries: dict[str, str]) -> dict[str, int]:
    return {kind: session.execute(text(queries[kind])).scalar_one() for kind in KINDS}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_keda_query_counts_the_jobs_a_worker_could_start(
    scenario: str, session: Session, queries: dict[str, str]
) -> None:
    seed_scenario, expected = SCENARIOS[scenario]
    seed_scenario(Seed(session))
    session.flush()
    counted, scheduled = query_counts(session, queries), fleet_counts(session, Settings())
    assert counted == {kind: scheduled[kind] for kind in KINDS} == expected


def test_query_arguments_match_the_configmap(queries: dict[str, str]) -> None:
    """Each query is one call of the installed count, with the ConfigMap's settings."""
    (config,) = [
        o
        for o in render("keda")
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "archsearch-config"
    ]
    settings = Settings.model_validate(
        {k.removeprefix("ARCHSEARCH_").lower(): v for k, v in config["data"].items()}
    )
    defaults = (settings.max_running_per_user, settings.max_running_per_team)
    for kind, query in queries.items():
        call = claimable.count_query(
            kind, defaults, settings.fleet_gpu_memory_gb, settings.max_attempts
        )
        assert query.splitlines()[-1] == call
        assert all(line.startswith("--") for line in query.splitlines()[:-1])


def test_installed_function_is_the_one_the_code_renders(session: Session) -> None:
    """The migrations installed the count the code defines now: a change to the rule comes
    with a migration that installs it again."""
    installed = session.execute(
        text(
            "SELECT string_agg(prosrc, '' ORDER BY proname) FROM pg_proc"
            " WHERE proname IN ('archsearch_claimable', 'archsearch_claim_candidates',"
            " 'archsearch_fill_team')"
        )
    ).scalar_one()
    rendered = claimable.function_bodies()
    assert installed == "".join(rendered[name] for name in sorted(rendered))
