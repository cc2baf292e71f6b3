"""Study benchmark: the `best-small-model` preset through the service, and what
a study costs over the same jobs submitted one by one.

1. A fresh PostgreSQL database, `archsearch api` and `--workers` Celery workers. For each
   dataset (MNIST, Fashion-MNIST) one study: the preset at a CPU-sized budget (`--epochs`
   epochs of `--train` training images at batch size 128, `--seeds` seeds, `--densities`).
   Its table (report.md) and pareto.png go into `--out/<dataset>/`, with results.csv,
   study.json and curves.png.
2. Overhead: the same job specs as one study and as separate `POST /v1/jobs`, run on the
   same workers one after the other, ABBA over `--overhead-rounds`. Each arm is timed from
   the client's first submit to the last job's end (plain) or to the study's artifacts
   stored (study: its report and charts are built after its last job, and a user waits for
   them); both arms wait with the same light PostgreSQL poll. Printed: the wall ratio (the
   goal's figure: summed over rounds with a bootstrap interval, and over the rounds the rest
   of the machine left alone), and beside it what each arm spent, from the jobs' own
   timestamps (job run-time sum, queue gaps, submit, the study's end and artifact build)
   and from /proc (CPU of the API, the workers, this database's PostgreSQL backends, the
   rest of the machine; each job's CPU and run-queue wait).

   Last, the last study's two charts drawn from its own summary, one after the other and side
   by side (the curves in a forked child, as a worker draws them on a machine with a second
   core), each way in a process of its own that keeps the figures a worker keeps,
   interleaved: the wall seconds of the study's end they take.

   The workers are told they share the machine (`ARCHSEARCH_WORKER_PROCESSES`): each takes
   its share of the cores for torch threads. Left at one worker's default, two workers ran
   two threads each on two cores, and the same job took 0.3-4.6 s instead of 0.15 s.

    python bench/study.py [--out /tmp/archsearch-study] [--epochs 3] [--train 8000]
                          [--seeds 3] [--densities 0.5 0.2 0.1 0.05] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _study_timeline as timeline  # noqa: E402  (this script's folder is on sys.path)
from _data_dir import bench_data_dir  # noqa: E402
from _study_timeline import ArmRun  # noqa: E402

from archsearch.client import ArchsearchClient  # noqa: E402
from archsearch.jobs.domain.studies import summary  # noqa: E402
from archsearch.jobs.domain.studies.service import advance_study  # noqa: E402
from archsearch.jobs.platform.db import make_engine, make_session_factory  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.settings import Settings  # noqa: E402
from archsearch.jobs.runtime.study_charts import chart_files  # noqa: E402
from tests.service import procs  # noqa: E402

DATASETS = ("mnist", "fashion_mnist")
TERMINAL = {"succeeded", "failed", "cancelled", "pruned"}


def start_service(workers: int, tmp: Path) -> tuple[str, str, str, list[procs.Proc]]:
    """(api url, token, database name, processes)."""
    name = f"archsearch_sbench_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    upgrade(url)
    token = procs.user_with_token(url)
    env = {
        "ARCHSEARCH_DATABASE_URL": url,
        "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"sbench-{name}",
        "ARCHSEARCH_HOME": str(tmp),
        "ARCHSEARCH_DATA_DIR": str(bench_data_dir()),
        "OMP_NUM_THREADS": "1",
        # The workers share this machine's cores: each takes its share of torch threads.
        "ARCHSEARCH_WORKER_PROCESSES": str(workers),
    }
    port = procs.free_port()
    started = [procs.start("api", ["api", "--port", str(port)], env, tmp)]
    for i in range(workers):
        argv = ["worker", "-n", f"w{i}-{name}@%h"]
        started.append(procs.start(f"worker{i}", argv, env, tmp))
    api_url = f"http://127.0.0.1:{port}"
    procs.wait_http(f"{api_url}/healthz", started[0])
    for worker in started[1:]:
        procs.wait_log(worker, "ready.", timeout=120)
    return api_url, token, name, started


def preset_request(args: argparse.Namespace, dataset: str) -> dict[str, Any]:
    return {
        "name": f"best-small-model-{dataset}",
        "dataset": {"name": dataset, "train_subset": args.train},
        "base": {"training": {"batch_size": 128}},
        "budget": {"epochs": args.epochs},
        "seeds": list(range(args.seeds)),
        "preset": "best-small-model",
        "preset_densities": args.densities,
    }


def run_preset(client: ArchsearchClient, args: argparse.Namespace, dataset: str) -> None:
    started = time.perf_counter()
    study = client.submit_study(preset_request(args, dataset))
    print(f"{dataset}: study {study.id}, {sum(study.counts.values())} jobs", flush=True)
    detail = client.wait_study(study.id, timeout=args.timeout, poll=5)
    print(f"{dataset}: {detail.status} {detail.counts} in {time.perf_counter() - started:.0f}s")
    folder = Path(args.out) / dataset
    for path in client.download_study(study.id, folder):
        print(f"  wrote {path}")
    print((folder / "report.md").read_text())


def overhead_request(args: argparse.Namespace) -> dict[str, Any]:
    arms = []
    for width in (16, 32, 64, 128):
        model = {"name": "mlp", "hidden": [width]}
        arms.append({"label": f"w{width}", "spec": {"method": "train", "model": model}})
    return {
        "name": "overhead",
        "dataset": {"name": "digits"},
        "base": {"training": {"epochs": args.overhead_epochs}},
        "seeds": [0, 1],
        "arms": arms,
    }


class Probe:
    """The bench's own view of the service: the jobs' times and the studies' artifact
    stamps read straight from PostgreSQL (one light query per poll, the same for both
    arms), and the CPU of the API, the workers and this database's PostgreSQL backends."""

    def __init__(
        self, database_url: str, name: str, started: list[procs.Proc], timeout: float
    ) -> None:
        self.conn = psycopg.connect(database_url, autocommit=True)
        self.name, self.timeout = name, timeout
        self.api_pid = started[0].popen.pid
        self.worker_pids = [proc.popen.pid for proc in started[1:]]
        self.sched = timeline.SchedSamples()
        self.pool_pids: list[int] = []

    def scalar(self, sql: str, *params: Any) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def job_times(self, where: str, *params: Any) -> list[timeline.JobTimes]:
        rows = self.conn.execute(
            "SELECT created_at, started_at, finished_at, worker FROM jobs "
            f"WHERE {where} ORDER BY created_at, id",
            params,
        )
        return [timeline.JobTimes.from_row(*row) for row in rows]

    def wait_for(self, sql: str, *params: Any, poll: float = 0.05) -> float:
        """Seconds since the epoch the query's first non-null answer names."""
        deadline = time.monotonic() + self.timeout
        while (value := self.scalar(sql, *params)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer within {self.timeout:.0f}s: {sql}")
            self.sched.sample(self.pool_pids)
            time.sleep(poll)
        self.sched.sample(self.pool_pids)
        return float(value.timestamp())

    def cpu(self) -> dict[str, float]:
        self.pool_pids = [p for root in self.worker_pids for p in timeline.descendants(root)]
        self.sched.sample(self.pool_pids)
        backends = [
            pid
            for (pid,) in self.conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.name,)
            )
        ]
        mine = os.times()
        return {
            "api": timeline.cpu_seconds(timeline.descendants(self.api_pid)),
            "workers": sum(
                timeline.cpu_seconds(timeline.descendants(pid)) for pid in self.worker_pids
            ),
            "postgres": timeline.cpu_seconds(backends),
            "bench": mine.user + mine.system,
            "machine": timeline.machine_busy_seconds(),
        }

    def cpu_since(self, before: dict[str, float]) -> dict[str, float]:
        spent = {key: value - before[key] for key, value in self.cpu().items()}
        ours = sum(spent[key] for key in ("api", "workers", "postgres", "bench"))
        spent["others"] = max(0.0, spent["machine"] - ours)
        return spent


def study_arm(client: ArchsearchClient, args: argparse.Namespace, probe: Probe) -> ArmRun:
    """The jobs as one study; it ends when its artifacts are stored."""
    before = probe.cpu()
    t0 = time.time()
    study = client.submit_study(overhead_request(args))
    submit_s = time.time() - t0
    end = probe.wait_for("SELECT artifacts_at FROM studies WHERE id = %s", study.id)
    cpu = probe.cpu_since(before)
    jobs = probe.job_times("study_id = %s", study.id)
    ended = probe.scalar("SELECT finished_at FROM studies WHERE id = %s", study.id)
    return ArmRun("study", t0, submit_s, jobs, end, cpu, str(study.id), ended.timestamp())


def plain_arm(client: ArchsearchClient, specs: list[dict[str, Any]], probe: Probe) -> ArmRun:
    """The same jobs, each its own `POST /v1/jobs`; it ends when the last one ended."""
    before = probe.cpu()
    t0 = time.time()
    ids, submit_s = [], 0.0
    for spec in specs:
        sent = time.time()
        ids.append(client.submit(spec).id)
        submit_s += time.time() - sent
    end = probe.wait_for(
        "SELECT max(finished_at) FROM jobs WHERE id = ANY(%s) "
        "HAVING bool_and(finished_at IS NOT NULL)",
        ids,
    )
    cpu = probe.cpu_since(before)
    return ArmRun("plain", t0, submit_s, probe.job_times("id = ANY(%s)", ids), end, cpu)


def plain_specs(probe: Probe, study_id: str) -> list[dict[str, Any]]:
    """The study's job specs in its creation order, unlabelled (as a user would send them)."""
    rows = probe.conn.execute(
        "SELECT spec FROM jobs WHERE study_id = %s ORDER BY created_at, id", (study_id,)
    )
    return [{**spec, "label": None} for (spec,) in rows]


def hook_seconds(database_url: str, study_id: str, repeats: int = 20) -> float:
    """Median cost of one `advance_study` (what every job's end runs for its study)."""
    engine = make_engine(database_url)
    sessions, settings, times = make_session_factory(engine), Settings(), []
    for _ in range(repeats):
        with sessions() as session:
            start = time.perf_counter()
            advance_study(session, settings, uuid.UUID(study_id))
            session.rollback()
            times.append(time.perf_counter() - start)
    engine.dispose()
    return statistics.median(times)


CHART_REPEATS = 15


def chart_seconds(database_url: str, study_id: str) -> dict[bool, float]:
    """Median wall seconds of a study's two charts drawn one after the other (False) and
    side by side (True). Each way draws in its own process forked from this one (which has
    drawn nothing), so each keeps the figures a worker keeps: one after the other, both charts'
    figures are warm from the last draw; side by side, the Pareto chart's is, while the curves
    are drawn in a child that ends with them, from a cold figure, study after study. The two
    ways alternate, each after an untimed first draw."""
    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        detail = summary.read_study(session, uuid.UUID(study_id), team_id=None)
        curves = summary.accuracy_curves(session, uuid.UUID(study_id))
    engine.dispose()
    arms = {way: ChartArm(detail, curves, way) for way in (False, True)}
    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        for i in range(CHART_REPEATS + 1):
            for side_by_side in (i % 2 == 0, i % 2 == 1):
                seconds = arms[side_by_side].draw()
                if i:  # the first of each is the warm-up
                    times[side_by_side].append(seconds)
    finally:
        for arm in arms.values():
            arm.close()
    return {way: statistics.median(seconds) for way, seconds in times.items()}


class ChartArm:
    """A process that draws the charts one way whenever asked, and answers the wall seconds
    `chart_files` took there."""

    def __init__(self, detail: Any, curves: Any, side_by_side: bool) -> None:
        context = multiprocessing.get_context("fork")
        self.pipe, child_end = context.Pipe()
        self.process = context.Process(
            target=_draw_when_asked, args=(child_end, detail, curves, side_by_side)
        )
        self.process.start()

    def draw(self) -> float:
        self.pipe.send(True)
        seconds: float = self.pipe.recv()
        return seconds

    def close(self) -> None:
        self.pipe.send(False)
        self.process.join(timeout=30)


def _draw_when_asked(pipe: Any, detail: Any, curves: Any, side_by_side: bool) -> None:
    while pipe.recv():
        start = time.perf_counter()
        chart_files(detail, curves, side_by_side)
        pipe.send(time.perf_counter() - start)


def print_chart_seconds(seconds: dict[bool, float]) -> None:
    one, both = seconds[False], seconds[True]
    print(
        f"\nthe last study's two charts, median wall of {CHART_REPEATS} draws each way, "
        f"interleaved: one after the other {one * 1000:.0f} ms, side by side "
        f"{both * 1000:.0f} ms ({both / one:.2f}x)"
    )


def measure_overhead(
    client: ArchsearchClient, args: argparse.Namespace, database_url: str, probe: Probe
) -> None:
    warm = study_arm(client, args, probe)  # warm-up: workers load the data, caches fill
    specs = plain_specs(probe, warm.study_id)
    rounds: list[tuple[ArmRun, ArmRun]] = []
    for i in range(args.overhead_rounds):  # ABBA: each arm goes first in half the rounds
        print(f"round {i}: load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
        if i % 4 in (1, 2):
            plain = plain_arm(client, specs, probe)
            study = study_arm(client, args, probe)
        else:
            study = study_arm(client, args, probe)
            plain = plain_arm(client, specs, probe)
        rounds.append((study, plain))
    hook_s = hook_seconds(database_url, rounds[-1][0].study_id)
    timeline.print_overhead(rounds, args.overhead_epochs, args.workers, hook_s)
    timeline.print_job_spread(rounds, probe.sched)
    for arm in rounds[-1]:
        timeline.print_timeline(arm)
    print_chart_seconds(chart_seconds(database_url, rounds[-1][0].study_id))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "archsearch-study"))
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--train", type=int, default=8000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--densities", type=float, nargs="+", default=[0.5, 0.2, 0.1, 0.05])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--overhead-rounds", type=int, default=3)
    parser.add_argument("--overhead-epochs", type=int, default=3)
    parser.add_argument("--skip-preset", action="store_true")
    args = parser.parse_args()
    # A stopped bench stops its API and workers too (the `finally` below runs on SIGTERM).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = Path(tempfile.mkdtemp(prefix="archsearch-sbench-"))
    api_url, token, name, started = start_service(args.workers, tmp)
    db_url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        with ArchsearchClient(api_url, token=token, timeout=120) as client:
            if not args.skip_preset:
                for dataset in args.datasets:
                    run_preset(client, args, dataset)
            if args.overhead_rounds:
                probe = Probe(db_url, name, started, args.timeout)
                measure_overhead(client, args, db_url, probe)
                probe.conn.close()
    finally:
        for proc in reversed(started):
            proc.stop()
        procs.drop_database(name)


if __name__ == "__main__":
    main()
