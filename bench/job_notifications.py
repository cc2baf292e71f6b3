"""What the job-change notifications cost the queue: claims and lease renewals per second
under migration 0019's trigger (every change of a job that was not queued notifies) and
0020's (only changes of what GET /v1/jobs/{id} shows), arms interleaved on one database by
migrating between the two before each arm.

One connection listens on `job_changed` and reads it throughout, as an API process does.
Claims: the scheduler's claim (`bench/job_queue.py`'s arm) with 64 claimers on 60,000 queued
jobs of 50 users. Renewals: `claims.renew_lease` of its own running job by each renewer,
one transaction each, as a worker's lease thread does. Beside each rate, the server CPU per
operation (the bench database's backends, from /proc).

    PYTHONPATH=$PWD python bench/job_notifications.py [--seconds 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import uuid
from pathlib import Path

import psycopg
from alembic import command
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from job_queue import add_queued, measured_arm, scheduler_claim, seed_people  # noqa: E402

from archsearch.api.live.feed import CHANNEL  # noqa: E402
from archsearch.jobs.domain.jobs import claims  # noqa: E402
from archsearch.jobs.platform.db import make_engine, make_session_factory  # noqa: E402
from archsearch.jobs.platform.migrate import alembic_config, upgrade  # noqa: E402
from tests.service import procs  # noqa: E402

TRIGGERS = {"0019: every change": "0019", "0020: shown changes": "0020"}
RENEWERS = (8, 64)
CLAIMERS = 64

# Each renewer's own running job, named by the worker that holds it (`bench-<k>`).
RUNNING_SQL = """
UPDATE jobs SET status = 'running', worker = 'bench-' || picked.k, lease_expires_at = now()
FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM jobs
      WHERE status = 'queued' LIMIT :count) AS picked
WHERE jobs.id = picked.id
RETURNING picked.k, jobs.id
"""


def listen(url: str, stop: threading.Event) -> threading.Thread:
    """A connection that listens and reads every notification, as an API process does."""

    def read() -> None:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f"LISTEN {CHANNEL}")
            while not stop.is_set():
                for _ in connection.notifies(timeout=0.2):
                    pass

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def renewal_of(jobs: dict[str, uuid.UUID]):  # type: ignore[no-untyped-def]
    def renew(session, worker: str) -> bool | None:  # type: ignore[no-untyped-def]
        return claims.renew_lease(session, jobs[worker], worker, 30) or None

    return renew


def run(url: str, args: argparse.Namespace) -> dict[str, dict[str, list[tuple[float, float]]]]:
    engine = create_engine(make_engine(url).url, pool_size=CLAIMERS, max_overflow=0)
    sessions = make_session_factory(engine)
    seed_people(sessions)
    add_queued(sessions, 60_000, 0)
    with sessions() as session:
        rows = session.execute(text(RUNNING_SQL), {"count": max(RENEWERS)}).all()
        session.commit()
    renew = renewal_of({f"bench-{k}": job_id for k, job_id in rows})
    cases = {f"claims, {CLAIMERS} claimers": (scheduler_claim, CLAIMERS)}
    cases |= {f"renewals, {n} renewers": (renew, n) for n in RENEWERS}
    measured: dict[str, dict[str, list[tuple[float, float]]]] = {
        case: {arm: [] for arm in TRIGGERS} for case in cases
    }
    for r in range(args.rounds):
        for arm in list(TRIGGERS)[r % 2 :] + list(TRIGGERS)[: r % 2]:
            command.downgrade(alembic_config(url), "0019")
            upgrade(url, TRIGGERS[arm])
            for case, (operation, threads) in cases.items():
                measured[case][arm].append(measured_arm(sessions, operation, threads, args.seconds))
    engine.dispose()
    return measured


def report(measured: dict[str, dict[str, list[tuple[float, float]]]], rounds: int) -> None:
    print(f"per second (server CPU ms each), median of {rounds} interleaved rounds:")
    old, new = TRIGGERS
    print(f"  {'':<22}{old:>26}{new:>26}  ratio 0020/0019 (spread)")
    for case, arms in measured.items():
        ratios = sorted(n[0] / o[0] for o, n in zip(arms[old], arms[new], strict=True))
        cells = []
        for arm in (old, new):
            rate = statistics.median(m[0] for m in arms[arm])
            cpu = statistics.median(m[1] for m in arms[arm])
            cells.append(f"{rate:8.0f}/s ({cpu:.2f} ms)")
        print(
            f"  {case:<22}{cells[0]:>26}{cells[1]:>26}  "
            f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    name = f"archsearch_nbench_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    stop = threading.Event()
    try:
        upgrade(url)
        listener = listen(url, stop)
        report(run(url, args), args.rounds)
        stop.set()
        listener.join()
    finally:
        stop.set()
        procs.drop_database(name)


if __name__ == "__main__":
    main()
