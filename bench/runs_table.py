"""Time to the first rows of the runs table at 10,000 jobs, in Chromium: the dashboard's
Jobs page with a metric column and a spec column, a metric filter and a sort on the spec
field (the server sorts: SQL on the JSON columns, keyset paging) against a bare page whose
bare route runs one hand-written SQL query (`_bare_runs.py`), arms interleaved, same data.
Also the API alone: `GET /v1/jobs` with the same query against the bare route, and the CSV
of all the filtered rows. Goal: first rows < 1 s.

A private database is created, seeded (`--jobs` finished jobs: a random learning rate and
optimizer in the spec, a random test accuracy and size in the metrics) and dropped.

    PYTHONPATH=$PWD python bench/runs_table.py [--jobs 10000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from tests.service import procs  # noqa: E402

BENCH = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
SEED_SQL = """
INSERT INTO jobs (id, method, spec, status, progress, step, total_steps, latest_metrics,
                  attempts, cancel_requested, created_at, updated_at, started_at, finished_at,
                  priority, device, tags)
SELECT gen_random_uuid(), 'train',
       json_build_object('method', 'train', 'dataset', json_build_object('name', 'digits'),
         'training', json_build_object('optimizer', json_build_object(
           'name', (ARRAY['sgd', 'adam'])[1 + g % 2],
           'lr', round(10 ^ (-4 * random())::numeric, 6)))),
       'succeeded', 1, 100, 100,
       json_build_object('test_accuracy', random(), 'parameters', 1000 + g % 5000),
       1, false, now() - make_interval(secs => g), now(),
       now() - make_interval(secs => g + 60), now() - make_interval(secs => g), 0, 'auto', '[]'
FROM generate_series(1, :count) AS g
"""
# The listing's query; the page's URL adds the columns it shows.
QUERY = "where=metrics.test_accuracy%3E0.5&sort=-spec.training.optimizer.lr"
PAGE_QUERY = f"{QUERY}&col=metrics.test_accuracy&col=spec.training.optimizer.lr"


def seeded_database(jobs: int) -> tuple[str, str]:
    name = f"archsearch_bench_runs_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    upgrade(url)
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(text(SEED_SQL), {"count": jobs})
        conn.execute(text("ANALYZE jobs"))
    engine.dispose()
    return name, url


def first_rows_seconds(page: Page, url: str) -> float:
    """From the navigation to the first row of the table in the DOM."""
    start = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_selector("#jobs tbody tr", timeout=30_000)
    return time.perf_counter() - start


def median_of(rounds: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(rounds))


def start_servers(url: str, tmp: Path) -> tuple[str, str, list[procs.Proc]]:
    env = {
        "ARCHSEARCH_DATABASE_URL": url,
        "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"archsearch-bench-{uuid.uuid4().hex[:8]}",
        "ARCHSEARCH_HOME": str(tmp),
        "ARCHSEARCH_AUTH": "none",
    }
    ours_port, bare_port = procs.free_port(), procs.free_port()
    api = procs.start("api", ["api", "--port", str(ours_port)], env, tmp)
    bare_argv = [sys.executable, str(BENCH / "_bare_runs.py"), str(bare_port), url]
    bare = procs.start_program("bare", bare_argv, {}, tmp)
    ours, theirs = f"http://127.0.0.1:{ours_port}", f"http://127.0.0.1:{bare_port}"
    procs.wait_http(f"{ours}/healthz", api)
    procs.wait_http(f"{theirs}/bare", bare)
    return ours, theirs, [api, bare]


def api_seconds(client: httpx.Client, url: str) -> float:
    start = time.perf_counter()
    answer = client.get(url)
    answer.raise_for_status()
    return time.perf_counter() - start


def report(label: str, ours: float, bare: float) -> None:
    print(
        f"{label:<34} ours {ours * 1000:8.1f} ms   bare {bare * 1000:8.1f} ms"
        f"   ratio {ours / bare:5.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    name, url = seeded_database(args.jobs)
    servers: list[procs.Proc] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-runs-") as tmp:
            ours, bare, servers = start_servers(url, Path(tmp))
            measure(args, ours, bare)
            for proc in servers:
                proc.stop()
    finally:
        for proc in servers:
            proc.stop()
        procs.drop_database(name)


def measure(args: argparse.Namespace, ours: str, bare: str) -> None:
    print(f"{args.jobs} jobs; medians of {args.rounds} rounds, arms interleaved")
    with httpx.Client(timeout=60) as client:
        api_seconds(client, f"{ours}/v1/jobs?{QUERY}")  # warm both
        api_seconds(client, f"{bare}/bare/rows?floor=0.5")
        report(
            "API: one page of 50 rows",
            median_of(args.rounds, lambda: api_seconds(client, f"{ours}/v1/jobs?{QUERY}")),
            median_of(args.rounds, lambda: api_seconds(client, f"{bare}/bare/rows?floor=0.5")),
        )
        csv_s = median_of(3, lambda: api_seconds(client, f"{ours}/v1/jobs.csv?{PAGE_QUERY}"))
        print(f"{'CSV of every filtered row':<34} ours {csv_s * 1000:8.1f} ms")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page()
        ours_s, bare_s = [], []
        first_rows_seconds(page, f"{ours}/?{PAGE_QUERY}")  # warm the browser's cache of each
        first_rows_seconds(page, f"{bare}/bare?floor=0.5")
        for _ in range(args.rounds):
            ours_s.append(first_rows_seconds(page, f"{ours}/?{PAGE_QUERY}"))
            bare_s.append(first_rows_seconds(page, f"{bare}/bare?floor=0.5"))
        browser.close()
    ours_first, bare_first = statistics.median(ours_s), statistics.median(bare_s)
    report("Chromium: navigation to first rows", ours_first, bare_first)
    print(f"goal: first rows < 1 s: {'met' if ours_first < 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
