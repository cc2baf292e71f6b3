"""GET /v1/jobs/{id} in process: the CPU and wall time of one request answered from memory,
against the bare route of `_bare_app.py`, both called straight through ASGI (no HTTP server,
no client process), one request at a time and `--concurrent` at once (what a busy API
process serves: requests in flight share the feed's catch-up barrier, api/live/barrier.py).

Arms, interleaved per round: `hit` (the kept answer of an ended job, behind the feed's
catch-up barrier, as served), `no barrier` (the same, the barrier skipped: what the barrier
costs; not a way to serve, it can answer stale), `miss` (the memory off: one row read and
presented), `bare` (the service bench's yardstick: an `async def` route returning the same
job-sized JSON, no thread hop, as ours is) and, for information, `bare sync` (the same route
as a sync handler: FastAPI runs it in its thread pool); `hit xN` and `bare xN` are the same
with N requests in flight. CPU is this process's (every thread's) user + system time per
request, so it includes the listener's work. `--burn K` keeps K other processes spinning for
the whole run: the figures with the machine busy. `--profile ARM` prints cProfile's top
entries of that arm instead.

    PYTHONPATH=$PWD python bench/get_job_cpu.py [--requests 2000] [--rounds 5] [--burn 2]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import multiprocessing
import os
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bare_app import app as bare_app  # noqa: E402

from archsearch.api.app import create_app  # noqa: E402
from archsearch.api.live.answers import JobAnswers  # noqa: E402
from archsearch.jobs.platform.broker import CeleryEnqueuer  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.services import Services  # noqa: E402
from archsearch.jobs.platform.settings import Settings  # noqa: E402
from tests.service import procs  # noqa: E402

JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}

ASGI = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def scope(method: str, path: str, token: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/json"),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }


async def call(app: ASGI, method: str, path: str, token: str, body: bytes = b"") -> bytes:
    """One request through the app; its body (asserting a 2xx)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope(method, path, token), receive, send)
    assert 200 <= sent[0]["status"] < 300, sent
    return b"".join(m.get("body", b"") for m in sent[1:])


async def measure(
    app: ASGI, path: str, token: str, requests: int, at_once: int = 1
) -> tuple[float, float]:
    """CPU and wall microseconds per request of `requests` GETs, `at_once` in flight."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(requests // at_once):
        await asyncio.gather(*(call(app, "GET", path, token) for _ in range(at_once)))
    n = requests // at_once * at_once / 1e6
    return (time.process_time() - cpu) / n, (time.perf_counter() - wall) / n


async def skip_barrier(answers: JobAnswers, job_id: uuid.UUID, team: uuid.UUID | None) -> Any:
    return answers.lookup(job_id, team)


async def arm(name: str, app: ASGI, path: str, token: str, requests: int) -> tuple[float, float]:
    at_once = int(name.split(" x")[1]) if " x" in name else 1
    if name.startswith("bare"):
        bare_path = "/sync" + path if name == "bare sync" else path
        return await measure(bare_app, bare_path, token, requests, at_once)
    state = app.state.archsearch  # type: ignore[attr-defined]
    fresh = JobAnswers.fresh
    if name == "no barrier":
        JobAnswers.fresh = skip_barrier  # type: ignore[method-assign,assignment]
    if name == "miss":
        JobAnswers.fresh = lambda *_: skip_none()  # type: ignore[method-assign,assignment,misc]
    try:
        await call(app, "GET", path, token)  # one to keep the answer
        assert name == "miss" or len(state.live.answers) > 0, "the answer was not kept"
        return await measure(app, path, token, requests, at_once)
    finally:
        JobAnswers.fresh = fresh  # type: ignore[method-assign]


async def skip_none() -> None:
    return None


async def run(args: argparse.Namespace, database_url: str, token: str) -> None:
    settings = Settings(
        database_url=database_url,
        broker_url=procs.REDIS_URL,
        queue_name=f"bench-get-{uuid.uuid4().hex[:8]}",
        auth="token",
    )
    app = create_app(Services.from_settings(settings), CeleryEnqueuer(settings))
    async with app.router.lifespan_context(app):
        while not app.state.archsearch.live.feed.exact:
            await asyncio.sleep(0.05)
        created = await call(app, "POST", "/v1/jobs", token, body=json.dumps(JOB).encode())
        job_id = uuid.UUID(json.loads(created)["id"])
        with psycopg.connect(database_url, autocommit=True) as conn:
            # Ended: its answer is kept until the job changes (a running job's lasts one
            # progress interval, api/live/answers.py).
            conn.execute("UPDATE jobs SET status = 'running' WHERE id = %s", (job_id,))
            conn.execute("UPDATE jobs SET status = 'succeeded' WHERE id = %s", (job_id,))
        await asyncio.sleep(0.2)  # the notification of that change, before the first keep
        path = f"/v1/jobs/{job_id}"
        if args.profile:
            await profile(args.profile, app, path, token, args.requests)
            return
        await report(app, path, token, args)


async def report(app: ASGI, path: str, token: str, args: argparse.Namespace) -> None:
    n = args.concurrent
    arms = ["hit", f"hit x{n}", "no barrier", "miss", f"bare x{n}", "bare", "bare sync"]
    results: dict[str, list[tuple[float, float]]] = {a: [] for a in arms}
    for _ in range(args.rounds):
        for name in arms:
            results[name].append(await arm(name, app, path, token, args.requests))
    print(
        f"GET job in process, {args.requests} requests per arm per round, {args.burn} burning "
        f"processes, load {os.getloadavg()[0]:.1f}; us per request, median over {args.rounds} "
        "rounds (spread):"
    )
    bare_cpu, sync_cpu = (statistics.median(c for c, _ in results[a]) for a in arms[-2:])
    bare_n_cpu = statistics.median(c for c, _ in results[f"bare x{n}"])
    hit_n_cpu = statistics.median(c for c, _ in results[f"hit x{n}"])
    print(f"  hit x{n} / bare x{n} CPU: {hit_n_cpu / bare_n_cpu:.2f}x  [goal <= 1.5]")
    for name in arms:
        cpus, walls = [c for c, _ in results[name]], [w for _, w in results[name]]
        print(
            f"  {name:<11} CPU {statistics.median(cpus):7.0f} ({min(cpus):.0f}-{max(cpus):.0f})"
            f"  wall {statistics.median(walls):7.0f} ({min(walls):.0f}-{max(walls):.0f})"
            f"  CPU / bare {statistics.median(cpus) / bare_cpu:.2f}x"
            f", / bare sync {statistics.median(cpus) / sync_cpu:.2f}x"
        )


async def profile(name: str, app: ASGI, path: str, token: str, requests: int) -> None:
    profiler = cProfile.Profile(time.thread_time)  # CPU, not wall: a preempted send is not ours
    profiler.enable()
    await arm(name, app, path, token, requests)
    profiler.disable()
    stats = pstats.Stats(profiler).sort_stats("tottime")
    stats.print_stats(35)
    stats.sort_stats("cumtime").print_stats("archsearch", 25)  # ours, by what they hold


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrent", type=int, default=16)
    parser.add_argument("--burn", type=int, default=0, help="processes spinning throughout")
    parser.add_argument("--profile", choices=["hit", "no barrier", "miss", "bare", "bare sync"])
    args = parser.parse_args()
    name = f"archsearch_bench_{uuid.uuid4().hex[:8]}"
    database_url = procs.create_database(name)
    burners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.burn)]
    try:
        upgrade(database_url)
        token = procs.user_with_token(database_url)
        for burner in burners:
            burner.start()
        asyncio.run(run(args, database_url, token))
    finally:
        for burner in burners:
            burner.terminate()
        procs.drop_database(name)


def spin() -> None:
    """A busy core, for as long as the bench runs."""
    while True:
        pass


if __name__ == "__main__":
    main()
