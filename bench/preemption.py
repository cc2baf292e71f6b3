"""What one preemption pass costs as the fleet and the urgent queue grow: the elected
sweeper's pass (`preemption.plan_preemptions`) over a database holding N live workers, each
running a normal-priority job, N/10 urgent jobs waiting for them, and ten queued jobs per
worker (at most 100,000), as `bench/fleet.py` seeds a fleet.

Two passes are timed at each size, each in a transaction rolled back so that every round
sees the same rows:
- "asks": the first pass, which picks a victim for every urgent job (N/10 stops asked, each
  with its two events);
- "on their way": a pass once those stops are asked, where every urgent job finds its
  victim already stopping (what every later pass does until the victims hand back).
Beside them, in the same run, the pass's own floor: one bare SQL statement reading the live
workers with their running jobs (what any pass must read). Printed: wall ms and PostgreSQL
CPU ms per pass, the pass against the floor, and the pass's share of a worker-second (one
pass per lease / 3 for the whole fleet, divided by N workers).

    PYTHONPATH=$PWD python bench/preemption.py [--sizes 100,1000,10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet import seed  # noqa: E402
from job_queue import backend_cpu_seconds  # noqa: E402

from archsearch.jobs.domain.jobs.preemption import plan_preemptions  # noqa: E402
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.settings import Settings  # noqa: E402
from archsearch.schemas.jobs import PRIORITY_LEVELS  # noqa: E402
from tests.service import procs  # noqa: E402

SETTINGS = Settings(preemption=True, lease_seconds=60.0)
URGENT_SQL = """
UPDATE jobs SET priority = :urgent
WHERE id IN (SELECT id FROM jobs WHERE status = 'queued' ORDER BY created_at LIMIT :n)
"""
FLOOR_SQL = """
SELECT w.name, w.device, w.gpu_memory_gb, j.id, j.priority, j.created_at, j.stop_requested_for
FROM workers w LEFT JOIN jobs j ON j.worker = w.name AND j.status = 'running'
WHERE w.heartbeat_at >= now() - make_interval(secs => :lease)
"""


def timed(sessions, rounds: int, run: Callable[[Session], object]) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Median wall ms and mean server CPU ms of `run(session)`, each round rolled back and
    started with every worker seen just now (a pass may take longer than a lease)."""
    walls, cpus = [], []
    for _ in range(rounds):
        fresh(sessions)
        before = backend_cpu_seconds(sessions)
        with sessions() as session:
            started = time.perf_counter()
            run(session)
            walls.append(1000 * (time.perf_counter() - started))
            session.rollback()
        after = backend_cpu_seconds(sessions)
        cpus.append(1000 * sum(used - before.get(pid, 0.0) for pid, used in after.items()))
    return statistics.median(walls), statistics.mean(cpus)


def fresh(sessions) -> None:  # type: ignore[no-untyped-def]
    """Every seeded worker seen just now (a large seed takes longer than a lease)."""
    with transaction(sessions) as session:
        session.execute(text("UPDATE workers SET heartbeat_at = now()"))


def read_the_floor(session: Session) -> None:
    session.execute(text(FLOOR_SQL), {"lease": SETTINGS.lease_seconds}).all()


def asks_every_urgent_job_a_victim(session: Session) -> None:
    asked = plan_preemptions(session, SETTINGS)
    assert asked, "the seeded fleet has victims for the urgent jobs"


def measure(workers: int, rounds: int) -> dict[str, tuple[float, float]]:
    name = f"archsearch_preempt_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    try:
        upgrade(url)
        engine = create_engine(make_engine(url).url, pool_size=2, max_overflow=0)
        sessions = make_session_factory(engine)
        seed(sessions, workers)
        with transaction(sessions) as session:
            urgent = {"urgent": PRIORITY_LEVELS["urgent"], "n": max(1, workers // 10)}
            session.execute(text(URGENT_SQL), urgent)
            session.execute(text("ANALYZE jobs"))
        found = {
            "floor (one SELECT)": timed(sessions, rounds, read_the_floor),
            "pass that asks": timed(sessions, rounds, asks_every_urgent_job_a_victim),
        }
        fresh(sessions)
        with transaction(sessions) as session:
            plan_preemptions(session, SETTINGS)
        found["pass, on their way"] = timed(
            sessions, rounds, lambda s: plan_preemptions(s, SETTINGS)
        )
        engine.dispose()
        return found
    finally:
        procs.drop_database(name)


def report(sizes: list[int], results: dict[int, dict[str, tuple[float, float]]]) -> None:
    print("\nPREEMPTION PASS, wall ms / PostgreSQL CPU ms per pass (median wall, mean CPU):")
    print(f"  {'':22}" + "".join(f"{n:>22,}" for n in sizes))
    for what in results[sizes[0]]:
        cells = "".join(
            f"{results[n][what][0]:>13.1f} / {results[n][what][1]:>6.1f}" for n in sizes
        )
        print(f"  {what:22}{cells}")
    print(
        "\n  wall against the floor, and PostgreSQL CPU per worker-second (a pass every lease / 3):"
    )
    interval = SETTINGS.lease_seconds / 3
    for what in ("pass that asks", "pass, on their way"):
        ratios = "".join(
            f"{results[n][what][0] / results[n]['floor (one SELECT)'][0]:>9.1f}x"
            f" {results[n][what][1] / (n * interval):>8.5f} ms"
            for n in sizes
        )
        print(f"  {what:22}{ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    results = {n: measure(n, args.rounds) for n in sizes}
    report(sizes, results)


if __name__ == "__main__":
    main()
