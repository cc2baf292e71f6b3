"""What a fleet of workers costs PostgreSQL: server CPU per worker-second at 100, 1,000 and
10,000 workers, MODELLED from each periodic operation's measured cost at that fleet's size;
and, with `--live-workers N`, MEASURED in real time for N simulated workers through a real
PgBouncer (`bench/fleet_live.py`: how late events are, and the server processes' CPU).

For each fleet size the database holds what such a fleet makes: that many registered
workers, each running one job, ten queued jobs per worker (at most 100,000) and a week of
attempts. Each operation a worker repeats is then run `--calls` times from 8 threads, with
the project's own code, and its server CPU per call read from /proc (PostgreSQL runs on this
machine): the heartbeat (`worker_repository.record_presence`), the lease renewal
(`claims.renew_lease`), a progress write (`repository.record_progress`), the tick of a worker
that does not hold the sweeps' turn (`sweeper.take_turn`), the sweeps themselves (expired
leases, quota holds, preemption, wake-ups, studies: once per interval for the whole fleet)
and a claim with its job's end. The cost of a worker-second is each operation's cost times
how often one worker does it (the settings' lease and flush intervals, a job every
`--job-minutes`). Goal: <= 0.5 ms at 1,000 and at 10,000 workers, and no operation whose
cost grows with the fleet.

The 1k and 10k figures are a cost model, not a real-time run: 10,000 workers' Python cannot
run on 2 cores (the numbers say how many PostgreSQL cores a fleet needs, where lateness
starts); the model's connections are direct. The live run is the real-time check at the
largest count this machine drives.

    PYTHONPATH=$PWD python bench/fleet.py [--sizes 100,1000,10000] [--calls 1000]
        [--live-workers 200 --live-seconds 90]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet_live import Noop  # noqa: E402
from fleet_live import main as live_main  # noqa: E402
from job_queue import add_queued, backend_cpu_seconds, seed_people  # noqa: E402

from archsearch.jobs.domain.jobs import claims, repository, sweeper, worker_repository  # noqa: E402
from archsearch.jobs.domain.jobs.offer import Offer  # noqa: E402
from archsearch.jobs.domain.jobs.scheduler import claim_next  # noqa: E402
from archsearch.jobs.platform.db import (  # noqa: E402
    make_engine,
    make_session_factory,
    single_statement,
    transaction,
)
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.services import Services  # noqa: E402
from archsearch.jobs.platform.settings import Settings  # noqa: E402
from archsearch.jobs.runtime import reaper  # noqa: E402
from archsearch.jobs.runtime.studies import advance_open_studies  # noqa: E402
from archsearch.schemas.jobs import JobStatus  # noqa: E402
from tests.service import procs  # noqa: E402

THREADS = 8
FLUSH_SECONDS = Settings().progress_flush_seconds  # the default, 1 s (0.5 s before)
WORKERS_SQL = """
INSERT INTO workers (name, host, device, started_at, heartbeat_at)
SELECT 'fleet-' || g, 'host-' || (g / 8), 'cuda', now(), now() FROM generate_series(0, :n - 1) g
"""
RUNNING_SQL = """
UPDATE jobs SET status = 'running', worker = 'fleet-' || picked.k, started_at = now(),
       attempts = 1, lease_expires_at = now() + interval '1 hour'
FROM (SELECT id, row_number() OVER (ORDER BY created_at) - 1 AS k FROM jobs
      WHERE status = 'queued' LIMIT :n) AS picked
WHERE jobs.id = picked.id
RETURNING picked.k, jobs.id
"""
ATTEMPTS_SQL = """
INSERT INTO job_attempts (job_id, attempt, team_id, owner_id, method, device, worker,
                          started_at, last_seen_at, seconds)
SELECT j.id, 1, j.team_id, j.owner_id, j.method, 'cuda', j.worker, now() - interval '1 day',
       now(), 86400
FROM jobs j WHERE j.status = 'running'
"""


def seed(sessions, workers: int) -> list[tuple[str, uuid.UUID]]:  # type: ignore[no-untyped-def]
    seed_people(sessions)
    add_queued(sessions, min(100_000, 10 * workers) + workers, 0)
    with transaction(sessions) as session:
        session.execute(text(WORKERS_SQL), {"n": workers})
        rows = session.execute(text(RUNNING_SQL), {"n": workers}).all()
        session.execute(text(ATTEMPTS_SQL))
        session.execute(text("ANALYZE"))
    return [(f"fleet-{k}", job_id) for k, job_id in rows]


def per_call_cpu_ms(sessions, operation: Callable[[Session, int], object], calls: int) -> float:  # type: ignore[no-untyped-def]
    """Server CPU ms per call of `operation(session, k)`, each call one transaction (or one
    autocommitted statement, as the worker sends its progress writes)."""
    opens = single_statement if operation.__name__ in ONE_STATEMENT else transaction
    before = backend_cpu_seconds(sessions)
    counter = iter(range(calls))
    lock = threading.Lock()

    def run() -> None:
        while True:
            with lock:
                k = next(counter, None)
            if k is None:
                return
            with opens(sessions) as session:
                operation(session, k)

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = backend_cpu_seconds(sessions)
    return 1000 * sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items()) / calls


# What the worker sends as one statement in autocommit (`db.single_statement`).
ONE_STATEMENT = {"progress"}


def operations(jobs: list[tuple[str, uuid.UUID]], settings: Settings) -> dict[str, Callable]:  # type: ignore[type-arg]
    offer = Offer("cuda", gpu_memory_gb=80.0)

    def heartbeat(session: Session, k: int) -> None:
        worker_repository.record_presence(session, jobs[k % len(jobs)][0], "h", offer, 0, "gpu")

    def renewal(session: Session, k: int) -> None:
        worker, job_id = jobs[k % len(jobs)]
        claims.renew_lease(session, job_id, worker, settings.lease_seconds)

    def progress(session: Session, k: int) -> None:
        repository.record_progress(session, jobs[k % len(jobs)][1], k, 10**6, {"loss": 0.5})

    def progress_in_a_transaction(session: Session, k: int) -> None:
        progress(session, k)  # as it was sent before (BEGIN, the write, COMMIT): a baseline

    def tick(session: Session, k: int) -> None:
        sweeper.take_turn(session, jobs[k % len(jobs)][0], settings.lease_seconds / 3)

    def claim_and_end(session: Session, k: int) -> None:
        job_id = claim_next(session, f"fleet-claimer-{k}", offer, settings)
        if job_id is not None:
            session.flush()
            repository.finish_job(session, job_id, JobStatus.succeeded, "done")

    return {
        "heartbeat": heartbeat,
        "lease renewal": renewal,
        "progress write": progress,
        "  same, transaction": progress_in_a_transaction,
        "tick (no turn)": tick,
        "claim + end": claim_and_end,
    }


def sweep_cpu_ms(sessions, settings: Settings, rounds: int) -> float:  # type: ignore[no-untyped-def]
    """Server CPU ms of one pass of the sweeps, as the turn's holder runs it."""
    services = Services.from_settings(settings)
    before = backend_cpu_seconds(sessions)
    for _ in range(rounds):
        reaper.reap_expired(services, Noop())
        reaper.hold_teams_over_quota(services)
        reaper.preempt_for_waiting_jobs(services)
        reaper.wake_for_waiting_jobs(services, Noop(), older_than_seconds=2.0)
        advance_open_studies(services)
    after = backend_cpu_seconds(sessions)
    return 1000 * sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items()) / rounds


def measure(workers: int, args: argparse.Namespace) -> dict[str, float]:
    name = f"archsearch_fleet_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    try:
        upgrade(url)
        engine = create_engine(make_engine(url).url, pool_size=THREADS + 2, max_overflow=0)
        sessions = make_session_factory(engine)
        jobs = seed(sessions, workers)
        home = tempfile.mkdtemp(prefix="archsearch-fleet-")
        settings = Settings(database_url=url, home=home, lease_seconds=60.0, preemption=True)
        costs = {
            what: per_call_cpu_ms(sessions, operation, args.calls)
            for what, operation in operations(jobs, settings).items()
        }
        costs["sweeps (one holder)"] = sweep_cpu_ms(sessions, settings, args.sweeps)
        engine.dispose()
        return costs
    finally:
        procs.drop_database(name)


def per_worker_second(
    costs: dict[str, float], workers: int, args: argparse.Namespace, flush_seconds: float
) -> float:
    interval = 60.0 / 3  # the workers' tick and heartbeat: a third of the 60 s lease
    rates = {
        "heartbeat": 1 / interval,
        "lease renewal": 1 / interval,
        "progress write": 1 / flush_seconds,
        "tick (no turn)": 1 / interval,
        "claim + end": 1 / (60 * args.job_minutes),
        "sweeps (one holder)": 1 / interval / workers,
    }  # "  same, transaction" is printed beside the progress write, and not modelled
    return sum(costs[what] * rate for what, rate in rates.items())


def report(results: dict[int, dict[str, float]], args: argparse.Namespace) -> None:
    sizes = list(results)
    print("MEASURED PostgreSQL CPU ms per call, by fleet size (workers):")
    print(f"  {'operation':<22}" + "".join(f"{n:>12,}" for n in sizes))
    for what in results[sizes[0]]:
        print(f"  {what:<22}" + "".join(f"{results[n][what]:>12.3f}" for n in sizes))
    print("MODELLED (per-call costs above times each operation's rate):")
    for flush in sorted({0.5, FLUSH_SECONDS, args.fleet_flush_seconds}):
        each = [per_worker_second(results[n], n, args, flush) for n in sizes]
        default = " (the default)" if flush == FLUSH_SECONDS else ""
        print(f"  with progress every {flush:g} s{default}:")
        line = "".join(f"{cost:>12.3f}" for cost in each)
        print(f"  {'  ms per worker-second':<22}{line}   [goal <= 0.5]")
        cores = "".join(f"{cost * n / 1000:>12.2f}" for cost, n in zip(each, sizes, strict=True))
        print(f"  {'  PostgreSQL cores':<22}{cores}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--job-minutes", type=float, default=10.0)
    parser.add_argument(
        "--fleet-flush-seconds", type=float, default=2.0, help="ARCHSEARCH_PROGRESS_FLUSH_SECONDS"
    )
    parser.add_argument("--live-workers", type=int, default=0, help="also a real-time run")
    parser.add_argument("--live-seconds", type=float, default=90.0)
    args = parser.parse_args()
    if args.live_workers:
        live_main(["--workers", str(args.live_workers), "--seconds", str(args.live_seconds)])
    sizes = [int(size) for size in args.sizes.split(",")]
    results = {}
    for workers in sizes:
        started = time.monotonic()
        results[workers] = measure(workers, args)
        print(f"  ({workers:,} workers measured in {time.monotonic() - started:.0f} s)")
    report(results, args)


if __name__ == "__main__":
    main()
