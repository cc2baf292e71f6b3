"""Service benchmark: submit-to-running latency and the cost of GET /v1/jobs/{id}.

Starts, on this machine: a fresh PostgreSQL database, `archsearch api`, one idle
`archsearch worker` (Redis broker), and a bare FastAPI app served the same way.
1. submit -> running: 50 jobs one after another (the worker idle each time); the latency is
   the job row's started_at - created_at, both written by the service.
2. GET /v1/jobs/{id} requests per second (with a bearer token, checked on every request, as
   in team mode) against the bare route, interleaved rounds with the same concurrent client;
   printed as a ratio.
Targets (issue 2): median submit-to-running < 100 ms; throughput ratio >= 0.5.

    python bench/service.py [--jobs 50] [--seconds 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archsearch.client import ArchsearchClient  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from tests.service import procs  # noqa: E402

QUICK_JOB = {
    "method": "train",
    "dataset": {"name": "digits", "train_subset": 64},
    "training": {"epochs": 1},
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def submit_to_running(client: ArchsearchClient, jobs: int) -> list[float]:
    latencies = []
    for _ in range(jobs):
        job = client.wait(client.submit(QUICK_JOB).id, poll=0.05, timeout=120)
        assert job.status == "succeeded" and job.started_at is not None, job.error
        latencies.append((job.started_at - job.created_at).total_seconds() * 1000)
    return latencies


async def _hammer(url: str, seconds: float, concurrency: int, headers: dict[str, str]) -> float:
    count = 0
    deadline = time.perf_counter() + seconds

    async def one_client(client: httpx.AsyncClient) -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            response = await client.get(url)
            assert response.status_code == 200, response.text
            count += 1

    async with httpx.AsyncClient(
        limits=httpx.Limits(max_connections=concurrency), headers=headers
    ) as client:
        start = time.perf_counter()
        await asyncio.gather(*(one_client(client) for _ in range(concurrency)))
        return count / (time.perf_counter() - start)


def throughput(
    ours: str, bare: str, seconds: float, rounds: int, headers: dict[str, str], concurrency: int = 8
) -> tuple[list[float], list[float]]:
    our_rates, bare_rates = [], []
    for _ in range(rounds):  # interleaved, so drift on a shared machine hits both alike
        our_rates.append(asyncio.run(_hammer(ours, seconds, concurrency, headers)))
        bare_rates.append(asyncio.run(_hammer(bare, seconds, concurrency, headers)))
    return our_rates, bare_rates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    name = f"archsearch_bench_{uuid.uuid4().hex[:8]}"
    pg_url = procs.create_database(name)
    started: list[procs.Proc] = []
    bare_proc = None
    try:
        upgrade(pg_url)
        token = procs.user_with_token(pg_url)  # team mode, as deployed: every request has a token
        tmp = Path(tempfile.mkdtemp(prefix="archsearch-bench-"))
        env = {
            "ARCHSEARCH_DATABASE_URL": pg_url,
            "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
            "ARCHSEARCH_QUEUE_NAME": f"bench-{name}",
            "ARCHSEARCH_HOME": str(tmp),
            "ARCHSEARCH_DATA_DIR": str(Path(__file__).resolve().parents[2] / "shared" / "datasets"),
        }
        api_port, bare_port = procs.free_port(), procs.free_port()
        api = procs.start("api", ["api", "--port", str(api_port)], env, tmp)
        started.append(api)
        worker = procs.start("worker", ["worker", "-n", f"bench-{name}@%h"], env, tmp)
        started.append(worker)
        bare_proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("_bare_app.py")), str(bare_port)]
        )
        procs.wait_http(f"http://127.0.0.1:{api_port}/healthz", api)
        procs.wait_log(worker, "ready.", timeout=90)
        _wait_bare(bare_port)

        with ArchsearchClient(f"http://127.0.0.1:{api_port}", token=token) as client:
            client.wait(client.submit(QUICK_JOB).id, timeout=120)  # warm the pool process
            latencies = submit_to_running(client, args.jobs)
            job_id = client.list_jobs(limit=1).data[0].id
        ours, bare = throughput(
            f"http://127.0.0.1:{api_port}/v1/jobs/{job_id}",
            f"http://127.0.0.1:{bare_port}/v1/jobs/{job_id}",
            args.seconds,
            args.rounds,
            headers={"Authorization": f"Bearer {token}"},
        )
        report(latencies, ours, bare)
    finally:
        for proc in started:
            proc.stop()
        if bare_proc:
            bare_proc.terminate()
        procs.drop_database(name)


def _wait_bare(port: int) -> None:
    for _ in range(100):
        try:
            httpx.get(f"http://127.0.0.1:{port}/v1/jobs/x", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise TimeoutError("bare app did not start")


def report(latencies: list[float], ours: list[float], bare: list[float]) -> None:
    median, p95 = statistics.median(latencies), percentile(latencies, 0.95)
    ratio = statistics.median(o / b for o, b in zip(ours, bare, strict=True))
    print(
        f"submit -> running over {len(latencies)} jobs (idle worker): "
        f"median {median:.1f} ms, p95 {p95:.1f} ms, max {max(latencies):.1f} ms  "
        f"[target median < 100 ms: {'met' if median < 100 else 'MISSED'}]"
    )
    print("GET /v1/jobs/{id} throughput, requests/s per round (8 concurrent clients):")
    print("  archsearch: " + ", ".join(f"{r:.0f}" for r in ours))
    print("  bare route: " + ", ".join(f"{r:.0f}" for r in bare))
    print(
        f"  ratio archsearch / bare (median of rounds): {ratio:.2f}  "
        f"[target >= 0.5: {'met' if ratio >= 0.5 else 'MISSED'}]"
    )


if __name__ == "__main__":
    main()
