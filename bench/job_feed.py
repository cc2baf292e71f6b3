"""What the job feed costs the database: notifying commits per running job-second, and the
rate and server CPU of progress writes, under migration 0020's trigger (every change of what
GET /v1/jobs/{id} shows notifies, progress included), 0021's (a job's state changes only),
0030's (the same, skipped by an update that sets no state column), each write in a
transaction, and 0030's with each write one autocommitted statement as the worker now sends
it (`db.single_statement`); arms interleaved on one database by migrating before each.

`--jobs` running jobs each write their progress every 0.5 s, as a worker's run context does
(`repository.record_progress`), from `--writers` threads, and renew their
lease every 5 s (`claims.renew_lease`); one connection listens on `job_changed` and counts
what arrives, as an API process's feed does. Goal: <= 0.2 notifying commits per running
job-second (a job's state changes, a few in its life, and nothing for its progress).

    PYTHONPATH=$PWD python bench/job_feed.py [--jobs 100] [--seconds 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
from alembic import command
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from job_notifications import RUNNING_SQL  # noqa: E402
from job_queue import add_queued, backend_cpu_seconds, seed_people  # noqa: E402

from archsearch.api.live.feed import CHANNEL  # noqa: E402
from archsearch.jobs.domain.jobs import claims, repository  # noqa: E402
from archsearch.jobs.platform.db import (  # noqa: E402
    make_engine,
    make_session_factory,
    single_statement,
    transaction,
)
from archsearch.jobs.platform.migrate import alembic_config, upgrade  # noqa: E402
from tests.service import procs  # noqa: E402

# arm -> (the migration whose trigger is in place, how a progress write is sent)
ARMS = {
    "0020: progress notifies": ("0020", "transaction"),
    "0021: state only": ("0021", "transaction"),
    "0030: UPDATE OF state": ("0030", "transaction"),
    "0030, one statement": ("0030", "single statement"),
}
OPENS = {"transaction": transaction, "single statement": single_statement}
FLUSH_SECONDS, RENEW_SECONDS = 0.5, 5.0


@dataclass
class Arm:
    notifications: int
    writes: int
    seconds: float
    cpu_ms_per_write: float


class Listener:
    """Counts `job_changed` notifications on a connection of its own."""

    def __init__(self, url: str) -> None:
        self.count, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()

    def _read(self, url: str) -> None:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f"LISTEN {CHANNEL}")
            while not self._stop.is_set():
                self.count += sum(1 for _ in connection.notifies(timeout=0.2))

    def close(self) -> int:
        time.sleep(0.5)  # what was committed last is on its way
        self._stop.set()
        self._thread.join()
        return self.count


def write_progress(sessions, jobs: list[tuple[str, uuid.UUID]], seconds: float, sent: str) -> int:  # type: ignore[no-untyped-def]
    """Each job's progress every FLUSH_SECONDS, its lease every RENEW_SECONDS; returns the
    number of progress writes made."""
    writes, step, started = 0, 0, time.monotonic()
    next_renewal = started + RENEW_SECONDS
    while time.monotonic() - started < seconds:
        tick = time.monotonic()
        step += 1
        for worker, job_id in jobs:
            with OPENS[sent](sessions) as session:
                repository.record_progress(session, job_id, step, 10_000, {"loss": 1.0 / step})
            writes += 1
            if tick >= next_renewal:
                with transaction(sessions) as session:
                    claims.renew_lease(session, job_id, worker, 30)
        next_renewal += RENEW_SECONDS if tick >= next_renewal else 0.0
        time.sleep(max(0.0, FLUSH_SECONDS - (time.monotonic() - tick)))
    return writes


def measure(url: str, sessions, jobs, args: argparse.Namespace, sent: str) -> Arm:  # type: ignore[no-untyped-def]
    writers, seconds = args.writers, args.seconds
    listener = Listener(url)
    time.sleep(0.3)
    cpu_before = sum(backend_cpu_seconds(sessions).values())
    shares = [jobs[k::writers] for k in range(writers)]
    counts: list[int] = []
    threads = [
        threading.Thread(
            target=lambda s=share: counts.append(write_progress(sessions, s, seconds, sent))
        )
        for share in shares
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = sum(backend_cpu_seconds(sessions).values()) - cpu_before
    writes = sum(counts)
    return Arm(listener.close(), writes, seconds, 1000 * cpu / max(1, writes))


def run(url: str, args: argparse.Namespace) -> dict[str, list[Arm]]:
    engine = create_engine(make_engine(url).url, pool_size=args.writers + 4, max_overflow=0)
    sessions = make_session_factory(engine)
    seed_people(sessions)
    add_queued(sessions, args.jobs, 0)
    with sessions() as session:
        rows = session.execute(text(RUNNING_SQL), {"count": args.jobs}).all()
        session.commit()
    jobs = [(f"bench-{k}", job_id) for k, job_id in rows]
    measured: dict[str, list[Arm]] = {arm: [] for arm in ARMS}
    for r in range(args.rounds):
        for arm in list(ARMS)[r % len(ARMS) :] + list(ARMS)[: r % len(ARMS)]:
            revision, sent = ARMS[arm]
            command.downgrade(alembic_config(url), "0020")
            upgrade(url, revision)
            measured[arm].append(measure(url, sessions, jobs, args, sent))
    engine.dispose()
    return measured


def report(measured: dict[str, list[Arm]], jobs: int) -> None:
    print(f"{jobs} running jobs, progress every {FLUSH_SECONDS} s; median over rounds:")
    print(f"  {'trigger':<26}{'notifying commits / job-s':>27}{'writes/s':>10}{'CPU ms/write':>14}")
    for arm, rounds in measured.items():
        per_job_second = statistics.median(a.notifications / (jobs * a.seconds) for a in rounds)
        rate = statistics.median(a.writes / a.seconds for a in rounds)
        cpu = statistics.median(a.cpu_ms_per_write for a in rounds)
        print(f"  {arm:<26}{per_job_second:>27.3f}{rate:>10.0f}{cpu:>14.3f}")
    print("  goal: <= 0.2 notifying commits per running job-second")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    name = f"archsearch_fbench_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    try:
        upgrade(url)
        report(run(url, args), args.jobs)
    finally:
        procs.drop_database(name)


if __name__ == "__main__":
    main()
