"""Service benchmark: submit-to-running latency and the cost of GET /v1/jobs/{id}.

Starts, on this machine: a fresh PostgreSQL database, `archsearch api`, one idle
`archsearch worker` (Redis broker), a bare FastAPI app served the same way, and a bare
pipeline (`_bare_pipeline.py`: a FastAPI POST that inserts a row and sends a Celery message,
a bare prefork Celery worker that marks it running).
1. submit -> running: jobs one after another (the worker idle each time), each followed by
   the same job through the bare pipeline; both latencies are the row's started_at -
   created_at, written by the servers; both clients poll every 50 ms.
2. GET /v1/jobs/{id} requests per second (with a bearer token, checked on every request, as
   in team mode) against the bare route, interleaved rounds with the same concurrent client;
   printed as a ratio. The yardstick is the cheapest bare FastAPI route: `async def`
   returning the same job-sized JSON (`_bare_app.py`), as anyone would write a route without
   I/O. The same route as a sync handler (run in FastAPI's thread pool, which costs several
   times the async one in process) is measured in the same rounds and printed for
   information only; the target is judged against the async route.
3. Artifact downloads (the same token) against a bare `FileResponse` of the same file on
   disk (`_bare_app.py`), interleaved rounds: the last job's largest artifact (~200 kB,
   where per-request work shows) and a 16 MiB file recorded as an artifact of that job
   (where streaming shows), as downloads/s and MiB/s; and HEAD of the small one.
   The server's CPU time per request (its process's user + system time from /proc over
   each round) is printed beside the rate, as a ratio to the bare route's.
   `--peer DIR` starts one more `archsearch api` from another checkout's code (e.g. a worktree
   of main) on the same database and measures it in the same interleaved rounds: before and
   after, side by side in one sitting.
4. A chart's first download: each job's `curves.png` is drawn by the API when first asked
   for (the worker keeps only its data); its first and second downloads, one after the
   other, show the cost moved from the job to whoever opens the chart.
Targets: median submit-to-running < 100 ms and <= 2x the bare pipeline's (p50); GET job CPU
<= 1.5x the bare async route's; throughput ratio >= 0.5; downloads >= 0.9x the bare FileResponse.

    python bench/service.py [--jobs 50] [--seconds 3] [--rounds 5] [--peer DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bare_pipeline import CREATE_TABLE  # noqa: E402
from _data_dir import bench_data_dir  # noqa: E402

from archsearch.client import ArchsearchClient  # noqa: E402
from archsearch.jobs.domain.tables import Artifact  # noqa: E402
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.objects.local import LocalObjectStore  # noqa: E402
from archsearch.jobs.platform.store import ArtifactStore  # noqa: E402
from tests.service import procs  # noqa: E402

BIG_NAME, BIG_BYTES = "bench-16mib.bin", 16 << 20
QUICK_JOB = {
    "method": "train",
    "dataset": {"name": "digits", "train_subset": 64},
    "training": {"epochs": 1},
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def submit_to_running(
    client: ArchsearchClient, jobs: int, bare: str, pipeline: str
) -> tuple[list[float], list[float], list[float]]:
    """Submit -> running of each job through archsearch and, interleaved, through the bare
    pipeline (`_bare_pipeline.py`), both from the rows' server-written times; and beside
    each a bare GET round trip (the kept-alive connection of a client): all in ms."""
    latencies, round_trips, bare_latencies = [], [], []
    with httpx.Client(base_url=bare) as bare_client, httpx.Client(base_url=pipeline) as piped:
        bare_client.get("/v1/jobs/x")
        bare_submit_to_running(piped)  # warm its pool process, as archsearch's was
        for _ in range(jobs):
            start = time.perf_counter()
            bare_client.get("/v1/jobs/x").raise_for_status()
            round_trips.append((time.perf_counter() - start) * 1000)
            job = client.wait(client.submit(QUICK_JOB).id, poll=0.05, timeout=120)
            assert job.status == "succeeded" and job.started_at is not None, job.error
            latencies.append((job.started_at - job.created_at).total_seconds() * 1000)
            bare_latencies.append(bare_submit_to_running(piped))
    return latencies, round_trips, bare_latencies


def bare_submit_to_running(pipeline: httpx.Client) -> float:
    """One job through the bare pipeline, polled as `client.wait` polls (every 50 ms)."""
    job_id = pipeline.post("/jobs", json=QUICK_JOB).raise_for_status().json()["id"]
    deadline = time.monotonic() + 120
    while (row := pipeline.get(f"/jobs/{job_id}").json())["status"] != "succeeded":
        assert time.monotonic() < deadline, f"bare job {job_id} never ran"
        time.sleep(0.05)
    started = datetime.fromisoformat(row["started_at"])
    return (started - datetime.fromisoformat(row["created_at"])).total_seconds() * 1000


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads) so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _hammer(
    url: str,
    seconds: float,
    concurrency: int,
    headers: dict[str, str],
    method: str = "GET",
    pid: int | None = None,
) -> Rate:
    """Requests/s, body MiB/s and the server's (`pid`) CPU ms per request of `concurrency`
    clients asking `url` for `seconds`."""
    count = size = 0
    cpu_before = cpu_seconds(pid) if pid else 0.0
    deadline = time.perf_counter() + seconds

    async def one_client(client: httpx.AsyncClient) -> None:
        nonlocal count, size
        while time.perf_counter() < deadline:
            async with client.stream(method, url) as response:
                assert response.status_code == 200, await response.aread()
                async for chunk in response.aiter_raw():
                    size += len(chunk)
            count += 1

    async with httpx.AsyncClient(
        limits=httpx.Limits(max_connections=concurrency), headers=headers
    ) as client:
        start = time.perf_counter()
        await asyncio.gather(*(one_client(client) for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
        cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000 / max(count, 1) if pid else 0.0
        return Rate(count / elapsed, size / (1 << 20) / elapsed, cpu_ms)


@dataclass
class Rate:
    requests: float  # per second
    mib: float  # body MiB per second
    cpu_ms: float = 0.0  # the server's CPU time per request


def throughput(
    urls: list[str],
    args: argparse.Namespace,
    headers: dict[str, str],
    concurrency: int = 8,
    method: str = "GET",
    pids: list[int | None] | None = None,
) -> list[list[Rate]]:
    """Each URL's rates per round (its server's CPU per request where `pids` names it)."""
    pids = pids or [None] * len(urls)
    rates: list[list[Rate]] = [[] for _ in urls]
    for _ in range(args.rounds):  # interleaved, so drift on a shared machine hits all alike
        for url, pid, arm in zip(urls, pids, rates, strict=True):
            arm.append(asyncio.run(_hammer(url, args.seconds, concurrency, headers, method, pid)))
    return rates


def record_big_artifact(database_url: str, artifact_root: Path, job_id: uuid.UUID) -> str:
    """A file of random bytes stored under the API's artifact root and recorded as an
    artifact of `job_id`, as a job's upload of it would be."""
    data = os.urandom(BIG_BYTES)
    stored = ArtifactStore(LocalObjectStore(artifact_root)).write_artifact(job_id, BIG_NAME, data)
    engine = make_engine(database_url)
    with transaction(make_session_factory(engine)) as session:
        session.add(
            Artifact(
                job_id=job_id,
                name=BIG_NAME,
                media_type="application/octet-stream",
                size=stored.size,
                sha256=stored.sha256,
            )
        )
    engine.dispose()
    return BIG_NAME


def downloads(
    api: str, bare: str, job_id: uuid.UUID, names: list[str], args: argparse.Namespace, token: str
) -> dict[str, tuple[list[Rate], list[Rate]]]:
    """Each artifact through our route and the bare FileResponse; HEAD of the first."""
    headers = {"Authorization": f"Bearer {token}"}
    results = {}
    for name in names:
        path = f"/v1/jobs/{job_id}/artifacts/{name}"
        body = httpx.get(api + path, headers=headers).content
        assert body == httpx.get(bare + path).content, "the two servers must send one file"
        concurrency = 8 if name != BIG_NAME else 2
        label = f"GET {name}, {len(body)} bytes"
        ours, theirs = throughput([api + path, bare + path], args, headers, concurrency)
        results[label] = ours, theirs
    path = f"/v1/jobs/{job_id}/artifacts/{names[0]}"
    answer = httpx.head(api + path, headers=headers).status_code
    if answer == 200:
        ours, theirs = throughput([api + path, bare + path], args, headers, 8, "HEAD")
        results[f"HEAD {names[0]}"] = ours, theirs
    else:
        print(f"HEAD {path}: archsearch answers {answer}, not measured")
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-downloads", action="store_true")
    parser.add_argument("--peer", type=Path, help="another checkout whose API to measure too")
    args = parser.parse_args()

    name = f"archsearch_bench_{uuid.uuid4().hex[:8]}"
    pg_url = procs.create_database(name)
    tmp = Path(tempfile.mkdtemp(prefix="archsearch-bench-"))
    started: list[procs.Proc] = []
    try:
        upgrade(pg_url)
        token = procs.user_with_token(pg_url)  # team mode, as deployed: every request has a token
        api, bare = start_servers(pg_url, name, tmp, started)
        pipeline = start_bare_pipeline(pg_url, name, tmp, started)
        with ArchsearchClient(api, token=token) as client:
            client.wait(client.submit(QUICK_JOB).id, timeout=120)  # warm the pool process
            latencies, round_trips, bare_latencies = submit_to_running(
                client, args.jobs, bare, pipeline
            )
            job_id = client.list_jobs(limit=1).data[0].id
            # A chart not drawn yet has no size: the largest of the files the job wrote.
            small = max(client.artifacts(job_id), key=lambda a: a.size or 0).name
            job_ids = [job.id for job in client.list_jobs(limit=args.jobs).data]
        report_submits(latencies, round_trips, bare_latencies)
        peer = start_peer(pg_url, name, tmp, started, args.peer) if args.peer else None
        measure_reads(api, bare, peer, job_id, args, token, started)
        if not args.no_downloads:
            big = record_big_artifact(pg_url, tmp / "artifacts", job_id)
            report_downloads(downloads(api, bare, job_id, [small, big], args, token))
            report_charts(chart_downloads(api, job_ids, token))
    finally:
        for proc in reversed(started):
            proc.stop()
        procs.drop_database(name)
        shutil.rmtree(tmp, ignore_errors=True)


def measure_reads(
    api: str,
    bare: str,
    peer: tuple[str, int] | None,
    job_id: uuid.UUID,
    args: argparse.Namespace,
    token: str,
    started: list[procs.Proc],
) -> None:
    """GET job against the bare routes (and the peer API, if any), interleaved rounds."""
    path = f"/v1/jobs/{job_id}"
    bare_pid = started[2].popen.pid  # the bare app serves both bare routes
    urls = [api + path, bare + path, bare + "/sync" + path]
    pids: list[int | None] = [started[0].popen.pid, bare_pid, bare_pid]
    if peer is not None:
        urls.append(peer[0] + path)
        pids.append(peer[1])
    rates = throughput(urls, args, {"Authorization": f"Bearer {token}"}, pids=pids)
    report(*rates[:3])
    if peer is not None:
        report_peer(rates[3], rates[0], rates[1], args.peer)


def server_env(pg_url: str, name: str, tmp: Path) -> dict[str, str]:
    return {
        "ARCHSEARCH_DATABASE_URL": pg_url,
        "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"bench-{name}",
        "ARCHSEARCH_HOME": str(tmp),
        "ARCHSEARCH_DATA_DIR": str(bench_data_dir()),
    }


def start_peer(
    pg_url: str, name: str, tmp: Path, started: list[procs.Proc], checkout: Path
) -> tuple[str, int]:
    """`archsearch api` run from `checkout`'s code; its base URL and process id."""
    port = procs.free_port()
    env = {**server_env(pg_url, name, tmp), "PYTHONPATH": str(checkout.resolve())}
    # -P: without it `python -m` puts the working directory (this checkout) first on the path.
    argv = [sys.executable, "-P", "-m", "archsearch.cli.main", "api", "--port", str(port)]
    peer = procs.start_program("peer-api", argv, env, tmp)
    started.append(peer)
    procs.wait_http(f"http://127.0.0.1:{port}/healthz", peer)
    return f"http://127.0.0.1:{port}", peer.popen.pid


def start_servers(pg_url: str, name: str, tmp: Path, started: list[procs.Proc]) -> tuple[str, str]:
    """`archsearch api`, one idle worker and the bare app; their base URLs (API, bare)."""
    env = server_env(pg_url, name, tmp)
    api_port, bare_port = procs.free_port(), procs.free_port()
    api = procs.start("api", ["api", "--port", str(api_port)], env, tmp)
    started.append(api)
    worker = procs.start("worker", ["worker", "-n", f"bench-{name}@%h"], env, tmp)
    started.append(worker)
    bare_app = [sys.executable, str(Path(__file__).with_name("_bare_app.py"))]
    bare = procs.start_program("bare", [*bare_app, str(bare_port), str(tmp / "artifacts")], {}, tmp)
    started.append(bare)
    procs.wait_http(f"http://127.0.0.1:{api_port}/healthz", api)
    procs.wait_log(worker, "ready.", timeout=90)
    procs.wait_http(f"http://127.0.0.1:{bare_port}/v1/jobs/x", bare)
    return f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{bare_port}"


def report_submits(latencies: list[float], round_trips: list[float], bare: list[float]) -> None:
    median, p95 = statistics.median(latencies), percentile(latencies, 0.95)
    bare_median, trip = statistics.median(bare), statistics.median(round_trips)
    print(
        f"submit -> running over {len(latencies)} jobs (idle worker): "
        f"median {median:.1f} ms, p95 {p95:.1f} ms, max {max(latencies):.1f} ms  "
        f"[target median < 100 ms: {'met' if median < 100 else 'MISSED'}]"
    )
    print(
        f"  bare pipeline (FastAPI insert + Celery message, bare prefork worker), interleaved: "
        f"median {bare_median:.1f} ms, p95 {percentile(bare, 0.95):.1f} ms, "
        f"max {max(bare):.1f} ms"
    )
    print(
        f"  submit -> running / bare pipeline (p50): {median / bare_median:.2f}x  "
        f"[target <= 2: {'met' if median / bare_median <= 2 else 'MISSED'}]"
    )
    print(f"  (a bare GET round trip beside each submit: median {trip:.1f} ms)")


def report(ours: list[Rate], bare: list[Rate], sync: list[Rate]) -> None:
    ratio = statistics.median(o.requests / b.requests for o, b in zip(ours, bare, strict=True))
    cpu = statistics.median(o.cpu_ms / b.cpu_ms for o, b in zip(ours, bare, strict=True))
    sync_cpu = statistics.median(o.cpu_ms / b.cpu_ms for o, b in zip(ours, sync, strict=True))
    print("GET /v1/jobs/{id} server CPU ms per request per round (8 concurrent clients):")
    print("  archsearch:        " + ", ".join(f"{r.cpu_ms:.2f}" for r in ours))
    print("  bare async route:  " + ", ".join(f"{r.cpu_ms:.2f}" for r in bare))
    print("  bare sync route:   " + ", ".join(f"{r.cpu_ms:.2f}" for r in sync))
    print(
        f"  ratio archsearch / bare async (median of rounds): {cpu:.2f}x  "
        f"[target <= 1.5: {'met' if cpu <= 1.5 else 'MISSED'}]"
    )
    print(f"  (for information, archsearch / bare sync route: {sync_cpu:.2f}x)")
    print("GET /v1/jobs/{id} throughput, requests/s per round (8 concurrent clients):")
    print("  archsearch:        " + ", ".join(f"{r.requests:.0f}" for r in ours))
    print("  bare async route:  " + ", ".join(f"{r.requests:.0f}" for r in bare))
    print("  bare sync route:   " + ", ".join(f"{r.requests:.0f}" for r in sync))
    print(
        f"  ratio archsearch / bare async (median of rounds): {ratio:.2f}  "
        f"[target >= 0.5: {'met' if ratio >= 0.5 else 'MISSED'}]"
    )


def report_peer(peer: list[Rate], ours: list[Rate], bare: list[Rate], checkout: Path) -> None:
    cpu = statistics.median(p.cpu_ms / b.cpu_ms for p, b in zip(peer, bare, strict=True))
    mine = statistics.median(o.cpu_ms / p.cpu_ms for o, p in zip(ours, peer, strict=True))
    print(f"GET /v1/jobs/{{id}} of the peer API ({checkout}), in the same rounds:")
    print("  peer CPU ms:       " + ", ".join(f"{r.cpu_ms:.2f}" for r in peer))
    print("  peer requests/s:   " + ", ".join(f"{r.requests:.0f}" for r in peer))
    print(f"  ratio peer / bare async (median of rounds): {cpu:.2f}x")
    print(f"  ratio archsearch / peer (median of rounds): {mine:.2f}x")


def start_bare_pipeline(pg_url: str, name: str, tmp: Path, started: list[procs.Proc]) -> str:
    """The bare pipeline's API and worker (`_bare_pipeline.py`) on this database and the same
    broker, with a queue of their own; the API's base URL."""
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(CREATE_TABLE)
    program = [sys.executable, str(Path(__file__).with_name("_bare_pipeline.py"))]
    queue, port = f"bench-bare-{name}", procs.free_port()
    api = [*program, "api", str(port), pg_url, procs.REDIS_URL, queue]
    started.append(procs.start_program("bare-pipeline-api", api, {}, tmp))
    worker = [*program, "worker", pg_url, procs.REDIS_URL, queue]
    started.append(procs.start_program("bare-pipeline-worker", worker, {}, tmp))
    procs.wait_http(f"http://127.0.0.1:{port}/docs", started[-2])
    procs.wait_log(started[-1], "ready.", timeout=90)
    return f"http://127.0.0.1:{port}"


def report_downloads(results: dict[str, tuple[list[Rate], list[Rate]]]) -> None:
    print("artifact downloads vs a bare FileResponse of the same file, per round:")
    for label, (ours, bare) in results.items():
        ratio = statistics.median(o.requests / b.requests for o, b in zip(ours, bare, strict=True))
        unit = "MiB/s" if BIG_NAME in label else "requests/s"
        pick = (lambda r: r.mib) if BIG_NAME in label else (lambda r: r.requests)
        print(f"  {label} ({unit}):")
        print("    archsearch:   " + ", ".join(f"{pick(r):.0f}" for r in ours))
        print("    FileResponse: " + ", ".join(f"{pick(r):.0f}" for r in bare))
        print(
            f"    ratio (median of rounds): {ratio:.2f}  "
            f"[target >= 0.9: {'met' if ratio >= 0.9 else 'MISSED'}]"
        )


def chart_downloads(api: str, job_ids: list[uuid.UUID], token: str) -> list[tuple[float, float]]:
    """Per job, the wall seconds of its `curves.png`'s first download (the API draws and
    stores it) and of its second (a stored file), one after the other."""
    headers = {"Authorization": f"Bearer {token}"}
    times = []
    with httpx.Client(headers=headers) as session:
        for job_id in job_ids:
            url = f"{api}/v1/jobs/{job_id}/artifacts/curves.png"
            pair = []
            for _ in range(2):
                start = time.perf_counter()
                assert session.get(url).status_code == 200
                pair.append(time.perf_counter() - start)
            times.append((pair[0], pair[1]))
    return times


def report_charts(times: list[tuple[float, float]]) -> None:
    """The cost a chart moved from the job to its first download."""
    again = [t[1] for t in times]
    later_first = [t[0] for t in times[1:]] or [times[0][0]]  # the process's first: below
    print(f"a job's curves.png, drawn on its first download ({len(times)} jobs, wall ms):")
    print(f"  the API process's first chart (matplotlib's import): {times[0][0] * 1e3:.0f} ms")
    print(
        f"  first download, median / p90: {statistics.median(later_first) * 1e3:.1f} / "
        f"{percentile(later_first, 0.9) * 1e3:.1f} ms; the same file stored, "
        f"{statistics.median(again) * 1e3:.1f} / {percentile(again, 0.9) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
