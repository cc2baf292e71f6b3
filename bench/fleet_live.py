"""A fleet in real time, through a real PgBouncer: how late the workers' periodic events
are, and the PostgreSQL CPU per worker-second measured from the server processes.

`--workers` simulated workers (threads, each its own client connection) run the project's
own control-plane code on their schedules for `--seconds`: a heartbeat
(`worker_repository.record_presence`), the tick (`sweeper.take_turn`, and the sweeps for
the turn's holder: expired leases, quota holds, preemption, wake-ups, studies), the lease
renewal (`claims.renew_lease`) every third of the lease, a progress write
(`repository.record_progress`) every `--flush-seconds`, and a claim (`scheduler.claim_next`)
then a finish (`repository.finish_job`) for each job, a job lasting `--job-seconds`. No
torch runs: the workers' Python is the control plane alone.

PgBouncer (`--pgbouncer`, the machine's `pgbouncer` by default) is started as a subprocess
on a free port with a generated ini in transaction mode, as `deploy/k8s/components/pgbouncer`
configures it. A PgBouncer of 1.21 or later tracks protocol-level prepared statements
(`max_prepared_statements = 200`, as the shipped ini sets), so psycopg prepares its
statements as it does on a direct connection; an older one (Debian bookworm's 1.18) cannot,
and the connections then set psycopg's `prepare_threshold=None`, as the shipped ini says an
older PgBouncer needs. `--unprepared` forces that for comparison; `--both` runs the fleet
twice in one invocation, prepared then unprepared, on fresh databases, and prints the two
side by side.

An event is late by the time between when it was due and when it started; an event whose
statement waited for a pooled server connection is late by that wait too. An event whose
statement failed (the pooler refused or dropped its connection) is tried again a second
later, as a worker would, and counted as failed: a run with failures says it is not clean.
Measured: CPU seconds of the PostgreSQL backends serving this database, of PgBouncer, and of
this process (the simulated workers), read from /proc, over the run. The simulated workers
share one Python process: one that needs most of a core (about 1,000 workers with progress
every 2 s fit; 1,000 every second do not) falls behind on its own, and the run says so
rather than blame the database for the lateness.

    PYTHONPATH=$PWD python bench/fleet_live.py [--workers 200] [--seconds 60]
        [--pgbouncer /opt/pgbouncer/bin/pgbouncer] [--unprepared | --both]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from job_queue import add_queued, backend_cpu_seconds, seed_people  # noqa: E402

from archsearch.jobs.domain.jobs import claims, repository, sweeper, worker_repository  # noqa: E402
from archsearch.jobs.domain.jobs.offer import Offer  # noqa: E402
from archsearch.jobs.domain.jobs.scheduler import claim_next  # noqa: E402
from archsearch.jobs.platform.db import make_session_factory, single_statement, transaction  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.services import Services  # noqa: E402
from archsearch.jobs.platform.settings import Settings  # noqa: E402
from archsearch.jobs.runtime import reaper  # noqa: E402
from archsearch.jobs.runtime.studies import advance_open_studies  # noqa: E402
from archsearch.schemas.jobs import JobStatus  # noqa: E402
from tests.service import procs  # noqa: E402


class Noop:
    """Wake-ups go nowhere: the bench measures the database, not the broker."""

    def enqueue(self, job_id: uuid.UUID, device: str = "auto") -> None:
        return None

    def ping(self) -> bool:
        return True

    def can_ever_offer(self, device: str) -> bool:
        return True


OFFER = Offer("cuda", gpu_memory_gb=80.0)
RETRY_SECONDS = 1.0  # a failed event is tried again this much later
# One Python process runs every simulated worker: near one core, its threads queue for the
# interpreter lock and its events start late whatever the database does.
SIMULATOR_CORES_LIMIT = 0.8
TICK_KINDS = ("heartbeat", "tick", "lease renewal")


# The first PgBouncer that tracks protocol-level prepared statements per client.
PREPARED_SINCE = (1, 21)


def pgbouncer_version(binary: str) -> tuple[str, tuple[int, ...]]:
    """("PgBouncer 1.25.2", (1, 25, 2)) from `binary --version`."""
    answer = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    line = answer.stdout.splitlines()[0]
    return line, tuple(int(part) for part in line.split()[-1].split(".") if part.isdigit())


@contextmanager
def pgbouncer(database: str, binary: str, prepared: bool) -> Iterator[tuple[str, int]]:
    """A transaction-pooling PgBouncer before `database`: yields (url, pid)."""
    folder = Path(tempfile.mkdtemp(prefix="archsearch-pgbouncer-"))
    folder.chmod(0o755)  # PgBouncer drops to the postgres user, which must read the ini
    port = procs.free_port()
    (folder / "userlist.txt").write_text('"postgres" ""\n')
    (folder / "pgbouncer.ini").write_text(
        f"[databases]\n{database} = host=127.0.0.1 port=5432 dbname={database}\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder}/userlist.txt\npool_mode = transaction\n"
        "default_pool_size = 20\nmax_client_conn = 2000\n"
        "ignore_startup_parameters = extra_float_digits\n"
        + ("max_prepared_statements = 200\n" if prepared else "")
    )
    argv = [binary, "-u", "postgres"] if os.geteuid() == 0 else [binary]
    # Its log goes to a file: a pipe nobody reads fills with a large fleet's login lines,
    # and PgBouncer, blocked writing its log, then stops serving every client.
    log = (folder / "pgbouncer.log").open("wb")
    process = subprocess.Popen([*argv, str(folder / "pgbouncer.ini")], stderr=log)
    try:
        procs.wait_until(lambda: port_open(port), 10, "PgBouncer listening")
        url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a loaded machine: it is only the bench's
            process.kill()
            process.wait(timeout=10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def process_cpu_seconds(pid: int | str = "self") -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass
class Schedule:
    """When each of one worker's periodic events is next due (monotonic seconds)."""

    due: dict[str, float]
    job: uuid.UUID | None = None
    job_ends: float = 0.0

    def next_event(self) -> tuple[str, float]:
        kind = min(self.due, key=self.due.__getitem__)
        return kind, self.due[kind]


class Fleet:
    """The simulated workers and what they measured."""

    def __init__(self, sessions: sessionmaker[Session], services: Services, args) -> None:  # type: ignore[no-untyped-def]
        self.sessions, self.services, self.args = sessions, services, args
        self.tick = services.settings.lease_seconds / 3
        self.lateness: dict[str, list[float]] = defaultdict(list)
        self.failed: Counter[str] = Counter()  # events whose statement failed, retried
        self.lock = threading.Lock()

    def run_worker(self, k: int, start: float, until: float) -> None:
        name, offset = f"sim-{k}", self.tick * k / self.args.workers  # spread as real starts
        first = start + offset
        plan = Schedule({"heartbeat": first, "tick": first, "claim": first})
        while True:
            kind, due = plan.next_event()
            if due >= until:
                return
            time.sleep(max(0.0, due - time.monotonic()))
            late = time.monotonic() - due
            try:
                self.step(name, plan, kind, due)
            except OperationalError:  # refused or dropped by the pooler: a worker retries
                with self.lock:
                    self.failed[kind] += 1
                plan.due[kind] = time.monotonic() + RETRY_SECONDS
                continue
            with self.lock:
                self.lateness[kind].append(late)

    def step(self, name: str, plan: Schedule, kind: str, due: float) -> None:
        if kind == "claim":
            del plan.due["claim"]
            self.claim(name, plan, due)
        elif kind == "progress" and time.monotonic() >= plan.job_ends:
            self.finish(plan, due)
        else:
            self.periodic(name, plan, kind)
            plan.due[kind] = due + (self.args.flush_seconds if kind == "progress" else self.tick)

    def periodic(self, name: str, plan: Schedule, kind: str) -> None:
        settings = self.services.settings
        if kind == "tick":
            with transaction(self.sessions) as session:
                holder = sweeper.take_turn(session, name, self.tick)
            if holder:
                sweeps(self.services)
            return
        if kind == "progress" and plan.job is not None:
            # As the worker's flush (`DbRunContext.flush`): one autocommitted statement.
            with single_statement(self.sessions) as session:
                step = int(time.monotonic() * 10)
                repository.record_progress(session, plan.job, step, 10**9, {"loss": 0.5})
            return
        with transaction(self.sessions) as session:
            if kind == "heartbeat":
                worker_repository.record_presence(session, name, "sim", OFFER, 0, "gpu")
            elif kind == "lease renewal" and plan.job is not None:
                claims.renew_lease(session, plan.job, name, settings.lease_seconds)

    def claim(self, name: str, plan: Schedule, due: float) -> None:
        with transaction(self.sessions) as session:
            plan.job = claim_next(session, name, OFFER, self.services.settings)
        if plan.job is None:
            plan.due["claim"] = due + self.tick  # nothing to run: look again next tick
            return
        plan.job_ends = time.monotonic() + self.args.job_seconds
        plan.due["progress"] = due + self.args.flush_seconds
        plan.due["lease renewal"] = due + self.tick

    def finish(self, plan: Schedule, due: float) -> None:
        assert plan.job is not None, "a finish ends a job"
        with transaction(self.sessions) as session:
            repository.finish_job(session, plan.job, JobStatus.succeeded, "done")
        plan.job = None
        del plan.due["progress"], plan.due["lease renewal"]
        plan.due["claim"] = due  # and the next job at once


def sweeps(services: Services) -> None:
    reaper.reap_expired(services, Noop())
    reaper.hold_teams_over_quota(services)
    reaper.preempt_for_waiting_jobs(services)
    reaper.wake_for_waiting_jobs(services, Noop(), older_than_seconds=2.0)
    advance_open_studies(services)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def run_fleet(fleet: Fleet, seconds: float) -> float:
    """Every simulated worker for `seconds`; returns the wall time it took."""
    start = time.monotonic() + 1.0  # every thread started before the first event is due
    until = start + seconds
    threads = [
        threading.Thread(target=fleet.run_worker, args=(k, start, until), daemon=True)
        for k in range(fleet.args.workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.monotonic() - start


def measure(args: argparse.Namespace, prepared: bool) -> dict[str, object]:
    """Seed a fresh database, run the fleet through PgBouncer, and return what it measured."""
    name = f"archsearch_fleet_live_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    try:
        upgrade(url)
        with pgbouncer(name, args.pgbouncer, prepared) as (pooled_url, bouncer_pid):
            return run_through(args, url, pooled_url, bouncer_pid, prepared)
    finally:
        procs.drop_database(name)


def run_through(
    args: argparse.Namespace, url: str, pooled: str, bouncer: int, prepared: bool
) -> dict[str, object]:
    # Without PgBouncer's tracking, a statement prepared on one server connection would be
    # missing on the next one the pool hands the client: psycopg must not prepare then.
    unprepared = {} if prepared else {"prepare_threshold": None}
    engine = create_engine(
        pooled, pool_size=args.workers + 4, max_overflow=0, connect_args=unprepared
    )
    sessions = make_session_factory(engine)
    seed_people(sessions)
    jobs_needed = args.workers * (int(args.seconds / args.job_seconds) + 2)
    add_queued(sessions, jobs_needed, 0)
    settings = Settings(
        database_url=url,
        home=tempfile.mkdtemp(prefix="archsearch-fleet-"),
        lease_seconds=args.lease_seconds,
        preemption=True,
    )
    services = dataclasses.replace(
        Services.from_settings(settings), engine=engine, sessions=sessions
    )
    fleet = Fleet(sessions, services, args)
    backends, bouncer_cpu, own = (
        backend_cpu_seconds(sessions),
        process_cpu_seconds(bouncer),
        process_cpu_seconds(),
    )
    wall = run_fleet(fleet, args.seconds)
    after = backend_cpu_seconds(sessions)
    postgres = sum(cpu - backends.get(pid, 0.0) for pid, cpu in after.items())
    engine.dispose()
    return {
        "wall": wall,
        "postgres_cpu": postgres,
        "pgbouncer_cpu": process_cpu_seconds(bouncer) - bouncer_cpu,
        "simulator_cpu": process_cpu_seconds() - own,
        "lateness": dict(fleet.lateness),
        "failed": dict(fleet.failed),
        "prepared": prepared,
    }


def report(args: argparse.Namespace, version: str, measured: dict[str, object]) -> None:
    wall = float(measured["wall"])  # type: ignore[arg-type]
    worker_seconds = args.workers * wall
    lateness: dict[str, list[float]] = measured["lateness"]  # type: ignore[assignment]
    statements = "prepared" if measured["prepared"] else "unprepared (prepare_threshold=None)"
    print(
        f"MEASURED, real time: {args.workers} simulated workers for {wall:.0f} s through "
        f"{version} (transaction pooling, 20 server connections), statements {statements}; "
        f"lease {args.lease_seconds:g} s, progress every {args.flush_seconds:g} s, "
        f"a job every {args.job_seconds:g} s"
    )
    failed: dict[str, int] = measured["failed"]  # type: ignore[assignment]
    print(f"  {'event':<15}{'count':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'failed':>8}")
    for kind, values in sorted(lateness.items()):
        cut = sorted(values)
        p99 = cut[min(len(cut) - 1, int(0.99 * len(cut)))]
        print(
            f"  {kind:<15}{len(cut):>8}{1000 * statistics.median(cut):>9.1f}"
            f"{1000 * p99:>9.1f}{1000 * cut[-1]:>9.1f}{failed.get(kind, 0):>8}"
        )
    if failed:
        print(f"  NOT CLEAN: {sum(failed.values())} events failed (connection refused or dropped)")
    simulator_cores = float(measured["simulator_cpu"]) / wall  # type: ignore[arg-type]
    if wall > 1.1 * args.seconds or simulator_cores > SIMULATOR_CORES_LIMIT:
        print(
            f"  NOT CLEAN: the simulator fell behind ({wall:.0f} s for {args.seconds:g} s, "
            f"{simulator_cores:.2f} of a core in one Python process): the lateness above is "
            "its own, not the database's; run fewer workers or a longer interval"
        )
    for what in ("postgres_cpu", "pgbouncer_cpu", "simulator_cpu"):
        used = float(measured[what])  # type: ignore[arg-type]
        print(
            f"  {what.replace('_', ' '):<15} {used:7.1f} s = "
            f"{1000 * used / worker_seconds:.3f} ms per worker-second"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--lease-seconds", type=float, default=60.0)
    parser.add_argument("--flush-seconds", type=float, default=Settings().progress_flush_seconds)
    parser.add_argument("--job-seconds", type=float, default=120.0)
    parser.add_argument("--pgbouncer", default="pgbouncer", help="the PgBouncer binary to run")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--unprepared", action="store_true", help="prepare_threshold=None")
    modes.add_argument("--both", action="store_true", help="prepared, then unprepared")
    args = parser.parse_args(argv)
    version, numbers = pgbouncer_version(args.pgbouncer)
    can_prepare = numbers >= PREPARED_SINCE
    if (args.both or not args.unprepared) and not can_prepare:
        print(f"{version} cannot track prepared statements (1.21+ can): unprepared only")
    passes = [True, False] if args.both else [not args.unprepared]
    runs = [measure(args, prepared) for prepared in passes if can_prepare or not prepared]
    for measured in runs:
        report(args, version, measured)
    if len(runs) == 2:
        print_ratio(args, runs)


def print_ratio(args: argparse.Namespace, runs: list[dict[str, object]]) -> None:
    """PostgreSQL CPU per worker-second, prepared over unprepared, from the same invocation."""
    per_worker_second = [
        float(run["postgres_cpu"]) / (args.workers * float(run["wall"]))  # type: ignore[arg-type]
        for run in runs
    ]
    print(
        "  PostgreSQL CPU per worker-second, prepared / unprepared: "
        f"{per_worker_second[0] / per_worker_second[1]:.2f}x"
    )


if __name__ == "__main__":
    main()
