"""Queue benchmark: the cost of a claim as the queue grows, and submit-to-running latency
under concurrent clients.

1. A fresh PostgreSQL database is filled with 1,000, then 10,000, then 100,000 queued jobs
   (spread over 50 users in 5 teams, 3 priorities). At each size the scheduler's claim
   (`jobs.scheduler.claim_next`, rolled back so the queue stays the same) is timed 40 times;
   the median is printed with its ratio to the 1,000 case. Target: <= 1.5 at 100,000 (the
   claim walks the partial index `ix_jobs_queue`, not the table).
2. Claims per second with 1, 8 and 64 concurrent claimers against a bare
   `UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1)` pop, arms interleaved
   on one database, with the server CPU each claim and each pop cost (read from /proc: the
   figure the machine's other load moves least). Target: claim/pop >= 0.6 at 64.
3. `archsearch api` and two `archsearch worker` processes; 8 client threads submit tiny jobs
   at once; the latency is started_at - created_at of each job, written by the service.

    python bench/job_queue.py [--quick | --scaling-only | --throughput-only | --latency-only]

(Not `bench/queue.py`: run as a script, that name would shadow the standard library's
`queue` for every script in this folder.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archsearch.client import ArchsearchClient  # noqa: E402
from archsearch.jobs.domain.accounts import repository as account_repo  # noqa: E402
from archsearch.jobs.domain.jobs import claim_sql  # noqa: E402
from archsearch.jobs.domain.jobs.offer import Offer  # noqa: E402
from archsearch.jobs.domain.jobs.scheduler import CANDIDATE_WINDOW, claim_next  # noqa: E402
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.settings import Settings  # noqa: E402
from tests.service import procs  # noqa: E402

# One statement seeds any number of queued jobs, spread over the 50 users (in 5 teams) in
# turn and over 3 priorities, each older than the last.
SEED_SQL = """
WITH people AS (SELECT id, team_id, row_number() OVER (ORDER BY name) - 1 AS k FROM users)
INSERT INTO jobs (id, method, spec, status, progress, step, total_steps, latest_metrics, attempts,
                  cancel_requested, created_at, updated_at, owner_id, team_id, priority, device)
SELECT gen_random_uuid(), 'train', '{"method": "train", "dataset": {"name": "digits"}}', 'queued',
       0, 0, 0, '{}', 0, false, now() - make_interval(secs => :offset + g), now(),
       p.id, p.team_id, (g % 3 - 1) * 10, 'auto'
FROM generate_series(1, :count) AS g JOIN people p ON p.k = g % 50
"""


def seed_people(sessions) -> None:  # type: ignore[no-untyped-def]
    with transaction(sessions) as session:
        for t in range(5):
            team = account_repo.create_team(session, f"team{t}", None)
            for u in range(10):
                account_repo.create_user(session, team, f"user{t}-{u:02d}", False, None)


def add_queued(sessions, count: int, offset: int) -> None:  # type: ignore[no-untyped-def]
    with transaction(sessions) as session:
        session.execute(text(SEED_SQL), {"count": count, "offset": offset})
        session.execute(text("ANALYZE jobs"))


# Claims a second no arm reaches on a 2-core machine (a pop did 2,473/s there, quiet): every
# row of the throughput table starts with at least a second's worth of jobs for each of its
# arms' seconds, so no claimer finds the queue dry on a faster CPU.
MAX_CLAIMS_PER_S = 4_000


def top_up_queue(sessions, needed: int, row: int) -> None:  # type: ignore[no-untyped-def]
    """Queue jobs until `needed` are queued (new jobs older than those of earlier rows)."""
    with sessions() as session:
        queued = session.scalar(text("SELECT count(*) FROM jobs WHERE status = 'queued'"))
    if needed > queued:
        add_queued(sessions, needed - queued, (row + 1) * 10 * needed)


def time_claim(sessions, worker: str) -> float:  # type: ignore[no-untyped-def]
    """One claim of the scheduler, rolled back so the queue stays as it is."""
    with sessions() as session:
        start = time.perf_counter()
        claimed = claim_next(session, worker, Offer("cpu"), CLAIM_SETTINGS)
        elapsed = time.perf_counter() - start
        assert claimed is not None
        session.rollback()
    return elapsed


def claim_scaling(repeats: int, sizes: list[int]) -> list[tuple[int, float]]:
    """One database per queue size, claims timed in turn on each (interleaved): the median
    claim of each size."""
    names = [f"archsearch_qbench_{uuid.uuid4().hex[:8]}" for _ in sizes]
    engines = []
    try:
        for name, size in zip(names, sizes, strict=True):
            url = procs.create_database(name)
            upgrade(url)
            engines.append(engine := make_engine(url))
            seed_people(make_session_factory(engine))
            add_queued(make_session_factory(engine), size, 0)
        factories = [make_session_factory(engine) for engine in engines]
        times: list[list[float]] = [[] for _ in sizes]
        for i in range(repeats + 5):  # the first 5: the driver prepares the statement
            for k, sessions in enumerate(factories):
                elapsed = time_claim(sessions, f"bench-{i}")
                if i >= 5:
                    times[k].append(elapsed)
        print_claim_plan(factories[-1], sizes[-1])
        return [(size, statistics.median(t)) for size, t in zip(sizes, times, strict=True)]
    finally:
        for engine in engines:
            engine.dispose()
        for name in names:
            procs.drop_database(name)


def print_claim_plan(sessions, size: int) -> None:  # type: ignore[no-untyped-def]
    """The claim statement's plan on the largest queue: its reads of the queue index, and
    the fair walk's reads of ranked rows by address."""
    statement = claim_sql.claim_statement(Offer("cpu"), CANDIDATE_WINDOW, (None, None))
    now = datetime.now(UTC)
    params = {"worker": "bench-plan", "now": now, "lease_expires_at": now}
    with sessions() as session:
        explain = text("EXPLAIN (ANALYZE, BUFFERS) " + statement.text)
        lines = [row[0] for row in session.execute(explain, params)]
        session.rollback()
    print(f"claim statement at {size:,} queued (EXPLAIN ANALYZE, key lines):")
    for line in lines:
        if any(key in line for key in ("ix_jobs_queue", "Tid Scan", "Execution", "Planning T")):
            print("  " + line.strip())


CLAIM_SETTINGS = Settings()  # built once, as a worker builds its settings

BARE_POP = """
UPDATE jobs SET status = 'running', worker = :worker, attempts = attempts + 1
WHERE id = (SELECT id FROM jobs WHERE status = 'queued'
            ORDER BY priority DESC, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id
"""


def bare_pop(session, worker: str) -> uuid.UUID | None:  # type: ignore[no-untyped-def]
    return session.execute(text(BARE_POP), {"worker": worker}).scalar_one_or_none()


def scheduler_claim(session, worker: str) -> uuid.UUID | None:  # type: ignore[no-untyped-def]
    return claim_next(session, worker, Offer("cpu"), CLAIM_SETTINGS)


def claims_per_second(sessions, claim, claimers: int, seconds: float) -> float:  # type: ignore[no-untyped-def]
    """`claimers` threads, each its own connection and one transaction per claim, claiming
    for `seconds`: claims committed per second."""
    start, counts = threading.Barrier(claimers + 1), [0] * claimers
    deadline = [0.0]

    def claimer(index: int) -> None:
        start.wait()
        while time.perf_counter() < deadline[0]:
            with transaction(sessions) as session:
                assert claim(session, f"bench-{index}") is not None, "the queue ran dry"
            counts[index] += 1

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    deadline[0] = began + seconds
    start.wait()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - began)


def backend_cpu_seconds(sessions) -> dict[int, float]:  # type: ignore[no-untyped-def]
    """CPU seconds used so far by each server process of the bench's database (PostgreSQL
    runs on this machine): a cost per claim that the machine's other load moves less than
    it moves claims per second."""
    with sessions() as session:
        query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        pids = session.scalars(text(query)).all()
    used = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a connection that closed meanwhile
        used[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def measured_arm(sessions, claim, claimers: int, seconds: float) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(claims/s, server CPU ms per claim) of one arm."""
    before = backend_cpu_seconds(sessions)
    began = time.perf_counter()
    rate = claims_per_second(sessions, claim, claimers, seconds)
    claims = rate * (time.perf_counter() - began)
    after = backend_cpu_seconds(sessions)
    used = sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
    return rate, used * 1000 / claims


def claim_throughput(claimers: list[int], seconds: float, rounds: int) -> None:
    """The scheduler's claim against a bare SKIP LOCKED pop, interleaved, on one database
    of 50 users in 5 teams (no quotas: the server's defaults) and 3 priorities."""
    name = f"archsearch_qbench_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    try:
        upgrade(url)
        engine = create_engine(make_engine(url).url, pool_size=max(claimers), max_overflow=0)
        sessions = make_session_factory(engine)
        seed_people(sessions)
        arms = {"claim": scheduler_claim, "bare pop": bare_pop}
        print(f"claims/s, {seconds:.0f} s per arm, rounds {rounds}, interleaved (PostgreSQL):")
        print(
            f"  {'claimers':>8}  {'claim/s':>8}  {'pop/s':>8}  {'claim/pop':>9}  {'spread':>9}"
            "  server CPU ms per claim / per pop"
        )
        for row, n in enumerate(claimers):
            top_up_queue(sessions, int(MAX_CLAIMS_PER_S * seconds * rounds * len(arms)), row)
            measured: dict[str, list[tuple[float, float]]] = {arm: [] for arm in arms}
            for r in range(rounds):
                for arm in list(arms)[r % 2 :] + list(arms)[: r % 2]:
                    measured[arm].append(measured_arm(sessions, arms[arm], n, seconds))
            print_throughput(n, measured["claim"], measured["bare pop"])
        engine.dispose()
    finally:
        procs.drop_database(name)


def print_throughput(
    claimers: int, claim: list[tuple[float, float]], pop: list[tuple[float, float]]
) -> None:
    ratios = sorted(c[0] / p[0] for c, p in zip(claim, pop, strict=True))
    claim_cpu, pop_cpu = (statistics.median(m[1] for m in arm) for arm in (claim, pop))
    print(
        f"  {claimers:>8}  {statistics.median(m[0] for m in claim):8.0f}  "
        f"{statistics.median(m[0] for m in pop):8.0f}  {statistics.median(ratios):8.2f}x"
        f"  {ratios[0]:.2f}-{ratios[-1]:.2f}  {claim_cpu:.2f} / {pop_cpu:.2f}"
    )


def concurrent_latency(clients: int, jobs_per_client: int) -> list[tuple[float, float, str]]:
    """(submit -> running, running -> finished) in ms for every job."""
    name = f"archsearch_qbench_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    started: list[procs.Proc] = []
    try:
        upgrade(url)
        token = procs.user_with_token(url)
        tmp = Path(tempfile.mkdtemp(prefix="archsearch-qbench-"))
        env = {
            "ARCHSEARCH_DATABASE_URL": url,
            "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
            "ARCHSEARCH_QUEUE_NAME": f"qbench-{name}",
            "ARCHSEARCH_HOME": str(tmp),
        }
        port = procs.free_port()
        started.append(api := procs.start("api", ["api", "--port", str(port)], env, tmp))
        for i in range(2):
            started.append(
                w := procs.start(
                    f"worker{i}", ["worker", "--device", "cpu", "-n", f"q{i}-{name}@%h"], env, tmp
                )
            )
            procs.wait_log(w, "ready.", timeout=90)
        procs.wait_http(f"http://127.0.0.1:{port}/healthz", api)
        spec = {
            "method": "train",
            "dataset": {"name": "digits", "train_subset": 64},
            "training": {"epochs": 1},
        }
        with ArchsearchClient(f"http://127.0.0.1:{port}", token=token) as client:
            # Warm both workers' pool processes (imports of torch, scikit-learn, matplotlib).
            for job_id in [client.submit(spec).id for _ in range(4)]:
                client.wait(job_id, timeout=300)

        def one_client(_: int) -> list[tuple[float, float, str]]:
            with ArchsearchClient(f"http://127.0.0.1:{port}", token=token) as client:
                ids = [client.submit(spec).id for _ in range(jobs_per_client)]
                done = [client.wait(job_id, poll=0.05, timeout=300) for job_id in ids]
            return [
                (
                    (_ts(j.started_at) - _ts(j.created_at)) * 1000,
                    (_ts(j.finished_at) - _ts(j.started_at)) * 1000,
                    j.worker or "",
                )
                for j in done
            ]

        with ThreadPoolExecutor(clients) as pool:
            return [ms for result in pool.map(one_client, range(clients)) for ms in result]
    finally:
        for proc in started:
            proc.stop()
        procs.drop_database(name)


def _ts(stamp: datetime | None) -> float:
    assert stamp is not None, "a finished job has its start and end times"
    return stamp.timestamp()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats, 1k/10k/30k")
    parser.add_argument("--latency-only", action="store_true")
    parser.add_argument("--throughput-only", action="store_true")
    parser.add_argument("--scaling-only", action="store_true")
    parser.add_argument("--seconds", type=float, default=3.0, help="per arm and round")
    # Seven: on a busy 2-core machine one round's claim/pop at 64 claimers ranged 0.43-0.80,
    # and a median of three read 0.55 where one of seven read 0.74 (the goal's line is 0.6).
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if args.throughput_only:
        return claim_throughput([1, 8, 64], args.seconds, args.rounds)
    if args.latency_only:
        return report_latency(concurrent_latency(clients=8, jobs_per_client=2))
    report_scaling([1_000, 10_000, 30_000] if args.quick else [1_000, 10_000, 100_000], args)
    if args.scaling_only:
        return None
    claim_throughput([1, 8, 64], args.seconds, 2 if args.quick else args.rounds)
    report_latency(concurrent_latency(clients=8, jobs_per_client=2 if args.quick else 5))


def report_scaling(sizes: list[int], args: argparse.Namespace) -> None:
    scaling = claim_scaling(repeats=15 if args.quick else 40, sizes=sizes)
    base = scaling[0][1]
    print("claim of the next job (median; one database per size, claims interleaved):")
    print(f"  {'queued jobs':>12}  {'ms':>7}  {'ratio to 1,000':>14}")
    for size, seconds in scaling:
        print(f"  {size:>12,}  {seconds * 1000:7.2f}  {seconds / base:14.2f}")
    verdict = "met" if scaling[-1][1] / base <= 1.5 else "MISSED"
    print(f"  target: ratio at {sizes[-1]:,} <= 1.5: {verdict}")


def report_latency(timings: list[tuple[float, float, str]]) -> None:
    latencies, runs = [t[0] for t in timings], [t[1] for t in timings]
    per_worker = sorted(Counter(t[2] for t in timings).values())
    p95 = sorted(latencies)[int(0.95 * (len(latencies) - 1))]
    print(
        f"submit -> running, 8 concurrent clients, 2 CPU workers, {len(latencies)} tiny jobs: "
        f"median {statistics.median(latencies):.0f} ms, p95 {p95:.0f} ms, "
        f"max {max(latencies):.0f} ms; jobs per worker {per_worker}"
    )
    print(
        f"  (each job runs {statistics.median(runs):.0f} ms median, so with {len(latencies)} "
        "jobs on 2 workers most of that latency is waiting behind other clients' jobs: "
        "an ideal FIFO gives about "
        f"{statistics.median(runs) * len(latencies) / 4:.0f} ms median)"
    )


if __name__ == "__main__":
    main()
