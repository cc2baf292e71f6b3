"""Live streams benchmark: 200 clients following running jobs over SSE, side by side with
200 clients polling `GET /v1/jobs/{id}` once a second.

Starts, on this machine: a fresh PostgreSQL database and `archsearch api` (team mode: every
request carries a token). `--jobs` jobs are submitted through the API and claimed by a
stand-in worker; a writer thread then reports one point per job per second, staggered,
through the worker's own domain functions (`record_metrics` and `record_progress`, as
`DbRunContext.flush` does; a tenth of the jobs per transaction), and notes when each point
was committed.
1. Streams: one client per job on `GET /v1/jobs/{id}/stream`; the latency of a point is its
   arrival at the client minus its commit.
2. Polling: one client per job asks `GET /v1/jobs/{id}` once a second; the latency of a
   point is the first answer showing its step minus its commit.
Each phase runs `--seconds`; the API process's CPU time over the phase (from /proc) is
divided by the number of clients; for polling, by the polls answered (the CPU a client
costs at one poll a second, even where a loaded machine keeps the clients slower: their
achieved rate is printed). Goal: stream p50 < 250 ms and less API CPU than polling.

    python bench/stream.py [--jobs 200] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data_dir import bench_data_dir  # noqa: E402

from archsearch.client.streams import parse_events  # noqa: E402
from archsearch.jobs.domain.jobs import claims, repository  # noqa: E402
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.schemas.streams import StreamMetric  # noqa: E402
from tests.service import procs  # noqa: E402

JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1000}}
TOTAL_STEPS = 100_000
Arrivals = dict[tuple[str, int], float]  # (job id, step) -> when a client first saw it


class Writer(threading.Thread):
    """Reports step n of every job at about second n and records the commit time of each
    (job, step). The jobs are written in `SLICES` slices spread over the second, one
    transaction a slice (a machine shared with the API cannot commit 200 times a second
    and still time anything)."""

    SLICES = 10

    def __init__(self, database_url: str, job_ids: list[uuid.UUID], first_step: int) -> None:
        super().__init__(daemon=True)
        self.engine = make_engine(database_url)
        self.sessions = make_session_factory(self.engine)
        self.job_ids, self.step = job_ids, first_step
        self.committed: dict[tuple[str, int], float] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        size = -(-len(self.job_ids) // self.SLICES)
        slices = [self.job_ids[i : i + size] for i in range(0, len(self.job_ids), size)]
        while not self.stopping.is_set():
            self.step += 1
            second = time.perf_counter()
            for i, jobs in enumerate(slices):
                time.sleep(max(0.0, second + i / len(slices) - time.perf_counter()))
                self.write(jobs)
            time.sleep(max(0.0, second + 1.0 - time.perf_counter()))

    def write(self, jobs: list[uuid.UUID]) -> None:
        """What `DbRunContext.flush` writes for each job, for a slice of jobs at once."""
        loss = 1.0 / self.step
        with transaction(self.sessions) as session:
            for job_id in jobs:
                repository.record_metrics(session, job_id, [(self.step, "loss", loss)])
                repository.record_progress(session, job_id, self.step, TOTAL_STEPS, {"loss": loss})
        done = time.perf_counter()
        for job_id in jobs:
            self.committed[(str(job_id), self.step)] = done

    def stop(self) -> int:
        self.stopping.set()
        self.join()
        self.engine.dispose()
        return self.step


def api_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def follow(
    client: httpx.AsyncClient, api: str, job_id: str, arrivals: Arrivals, opened: list[str]
) -> None:
    async with client.stream("GET", f"{api}/v1/jobs/{job_id}/stream") as response:
        assert response.status_code == 200, await response.aread()
        opened.append(job_id)
        lines = []
        async for line in response.aiter_lines():
            lines.append(line)
            if line:
                continue
            for event in parse_events(lines):
                if event is not None and event.event == "metric":
                    point = StreamMetric.model_validate_json(event.data)
                    arrivals.setdefault((job_id, point.step), time.perf_counter())
            lines = []


async def poll(
    client: httpx.AsyncClient,
    api: str,
    job_id: str,
    arrivals: Arrivals,
    offset: float,
    answered: list[float],
) -> None:
    await asyncio.sleep(offset)
    seen = None  # the steps before the first answer are not this client's to time
    while True:
        started = time.perf_counter()
        response = await client.get(f"{api}/v1/jobs/{job_id}")
        step = response.json()["step"]
        answered.append(time.perf_counter())
        for s in range(step + 1 if seen is None else seen + 1, step + 1):
            arrivals.setdefault((job_id, s), time.perf_counter())
        seen = step if seen is None else max(seen, step)
        await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - started)))


async def phase(
    kind: str,
    api: str,
    job_ids: list[str],
    headers: dict[str, str],
    writer: Writer,
    seconds: float,
    pid: int,
) -> Phase:
    """Latencies of the points committed during the phase, the API's CPU, and the rate of
    the polls the clients managed."""
    arrivals: Arrivals = {}
    opened: list[str] = []
    answered: list[float] = []  # when each poll was answered
    limits = httpx.Limits(max_connections=len(job_ids) + 8)
    timeout = httpx.Timeout(30.0, read=None)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=timeout) as client:
        if kind == "stream":
            tasks = [asyncio.create_task(follow(client, api, j, arrivals, opened)) for j in job_ids]
            while len(opened) < len(job_ids):
                await asyncio.sleep(0.1)
        else:
            n = len(job_ids)
            tasks = [
                asyncio.create_task(poll(client, api, j, arrivals, i / n, answered))
                for i, j in enumerate(job_ids)
            ]
        await asyncio.sleep(2.0)  # every client past its first answer
        start, cpu = time.perf_counter(), api_cpu_seconds(pid)
        await asyncio.sleep(seconds)
        cpu, end = api_cpu_seconds(pid) - cpu, time.perf_counter()
        await asyncio.sleep(2.0)  # points committed near the end arrive
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    committed = {k: t for k, t in dict(writer.committed).items() if start <= t <= end}
    latencies = [(arrivals[k] - t) * 1000 for k, t in committed.items() if k in arrivals]
    polls = sum(start <= t <= end for t in answered) / seconds
    return Phase(latencies, len(committed) - len(latencies), cpu / seconds, polls, len(job_ids))


@dataclass
class Phase:
    latencies: list[float]  # ms, commit to arrival
    missed: int  # points committed in the phase that no client saw
    cpu: float  # API CPU seconds per second
    polls: float  # answered polls per second (0 for streams)
    clients: int

    def cpu_per_client(self) -> float:
        """ms of API CPU per second per client; for polling, at one poll a second per
        client (the CPU of one answer), whatever rate this machine let the clients reach."""
        if self.polls:
            return self.cpu / self.polls * 1e3
        return self.cpu / self.clients * 1e3


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def start_jobs(api: str, headers: dict[str, str], database_url: str, n: int) -> list[uuid.UUID]:
    """Jobs submitted through the API (so they belong to the token's team), then claimed by
    a stand-in worker that never finishes them."""
    with httpx.Client(headers=headers, timeout=30) as client:
        ids = [uuid.UUID(client.post(f"{api}/v1/jobs", json=JOB).json()["id"]) for _ in range(n)]
    engine = make_engine(database_url)
    with transaction(make_session_factory(engine)) as session:
        for job_id in ids:
            claims.claim_job(session, job_id, "bench-writer", 3600.0, 3)
    engine.dispose()
    return ids


def write_history(database_url: str, job_ids: list[uuid.UUID], steps: int) -> None:
    """`steps` points per job already stored, as a job that has run for `steps` seconds."""
    if not steps:
        return
    engine = make_engine(database_url)
    with transaction(make_session_factory(engine)) as session:
        for job_id in job_ids:
            points = [(step, "loss", 1.0 / step) for step in range(1, steps + 1)]
            repository.record_metrics(session, job_id, points)
            repository.record_progress(session, job_id, steps, TOTAL_STEPS, {"loss": 1.0 / steps})
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="steps each job has already reported before the clients connect (a long job)",
    )
    args = parser.parse_args()
    name = f"archsearch_bench_{uuid.uuid4().hex[:8]}"
    pg_url = procs.create_database(name)
    tmp = Path(tempfile.mkdtemp(prefix="archsearch-bench-"))
    api_proc = None
    try:
        upgrade(pg_url)
        headers = {"Authorization": f"Bearer {procs.user_with_token(pg_url)}"}
        api_proc, api = start_api(pg_url, name, tmp)
        job_ids = start_jobs(api, headers, pg_url, args.jobs)
        write_history(pg_url, job_ids, args.history)
        writer = Writer(pg_url, job_ids, first_step=args.history)
        writer.start()
        ids, pid = [str(j) for j in job_ids], api_proc.popen.pid
        results = {
            kind: asyncio.run(phase(kind, api, ids, headers, writer, args.seconds, pid))
            for kind in ("stream", "poll")
        }
        writer.stop()
        report(results, args)
    finally:
        if api_proc is not None:
            api_proc.stop()
        procs.drop_database(name)
        shutil.rmtree(tmp, ignore_errors=True)


def start_api(pg_url: str, name: str, tmp: Path) -> tuple[procs.Proc, str]:
    env = {
        "ARCHSEARCH_DATABASE_URL": pg_url,
        "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"bench-{name}",
        "ARCHSEARCH_HOME": str(tmp),
        "ARCHSEARCH_DATA_DIR": str(bench_data_dir()),
    }
    port = procs.free_port()
    proc = procs.start("api", ["api", "--port", str(port)], env, tmp)
    procs.wait_http(f"http://127.0.0.1:{port}/healthz", proc)
    return proc, f"http://127.0.0.1:{port}"


def report(results: dict[str, Phase], args: argparse.Namespace) -> None:
    print(
        f"{args.jobs} clients, one per running job; a point per job per second; {args.seconds} s; "
        f"jobs {args.history} steps old when the clients connect"
    )
    header = ("", "points", "missed", "p50 ms", "p99 ms", "polls/s", "API CPU ms/s per client")
    print("{:8} {:>7} {:>6} {:>8} {:>8} {:>8} {:>24}".format(*header))
    for kind, phase in results.items():
        p50, p99 = percentile(phase.latencies, 0.5), percentile(phase.latencies, 0.99)
        row = (kind, len(phase.latencies), phase.missed, p50, p99, phase.polls)
        print(
            "{:8} {:7d} {:6d} {:8.1f} {:8.1f} {:8.1f} {:24.3f}".format(*row, phase.cpu_per_client())
        )
    stream, poll = results["stream"], results["poll"]
    latency = percentile(stream.latencies, 0.5) / max(percentile(poll.latencies, 0.5), 1e-9)
    cpu = stream.cpu_per_client() / max(poll.cpu_per_client(), 1e-12)
    print(f"stream / poll: p50 {latency:.2f}x; API CPU per client {cpu:.2f}x")


if __name__ == "__main__":
    main()
