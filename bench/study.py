"""Study benchmark: the `best-small-model` preset through the service, and what
a study costs over the same jobs submitted one by one.

1. A fresh PostgreSQL database, `archsearch api` and `--workers` Celery workers. For each
   dataset (MNIST, Fashion-MNIST) one study: the preset at a CPU-sized budget (`--epochs`
   epochs of `--train` training images at batch size 128, `--seeds` seeds, `--densities`).
   Its table (report.md) and pareto.png go into `--out/<dataset>/`, with results.csv,
   study.json and curves.png.
2. Overhead: the same job specs as one study and as separate `POST /v1/jobs`, run on the
   same workers one after the other (order alternated over `--overhead-rounds`), each timed
   from the first submit to the last job's end; the study's ratio to the plain jobs is
   printed (the study's makespan includes its artifact build), with the study's own costs
   (submit request, artifact build) beside it.

    python bench/study.py [--out /tmp/archsearch-study] [--epochs 3] [--train 8000]
                          [--seeds 3] [--densities 0.5 0.2 0.1 0.05] [--workers 2]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archsearch.client import ArchsearchClient  # noqa: E402
from archsearch.jobs.domain.studies.service import advance_study  # noqa: E402
from archsearch.jobs.platform.db import make_engine, make_session_factory  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.settings import Settings  # noqa: E402
from tests.service import procs  # noqa: E402

SHARED_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
DATASETS = ("mnist", "fashion_mnist")
TERMINAL = {"succeeded", "failed", "cancelled"}


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
        "ARCHSEARCH_DATA_DIR": str(SHARED_DATASETS),
        "OMP_NUM_THREADS": "1",
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


def wait_jobs(client: ArchsearchClient, job_ids: list[uuid.UUID]) -> float:
    """Seconds (wall clock, server side) from the first job's creation to the last end."""
    while True:
        jobs = [client.get_job(job_id) for job_id in job_ids]
        if all(job.status in TERMINAL for job in jobs):
            first = min(job.created_at for job in jobs)
            last = max(job.finished_at for job in jobs if job.finished_at)
            return (last - first).total_seconds()
        time.sleep(1)


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


def study_round(client: ArchsearchClient, args: argparse.Namespace) -> tuple[float, Any, Any]:
    """(study makespan, submit seconds, the ended study)."""
    t0 = time.perf_counter()
    study = client.submit_study(overhead_request(args))
    submit_s = time.perf_counter() - t0
    detail = client.wait_study(study.id, timeout=args.timeout, poll=0.5)
    return study_makespan(client, detail), submit_s, detail


def study_makespan(client: ArchsearchClient, detail: Any) -> float:
    jobs = [
        j for j in client.list_jobs(limit=500).data if j.label and j.label.startswith("overhead/")
    ]
    mine = [j for j in jobs if j.created_at >= detail.created_at][: sum(detail.counts.values())]
    return wait_jobs(client, [j.id for j in mine])


def plain_round(client: ArchsearchClient, specs: list[dict[str, Any]]) -> float:
    return wait_jobs(client, [client.submit(spec).id for spec in specs])


def plain_specs(client: ArchsearchClient, detail: Any) -> list[dict[str, Any]]:
    jobs = [
        j for j in client.list_jobs(limit=500).data if j.label and j.label.startswith("overhead/")
    ]
    return [{**j.spec, "label": None} for j in jobs if j.created_at >= detail.created_at]


def hook_seconds(database_url: str, study_id: uuid.UUID, repeats: int = 20) -> float:
    """Median cost of one `advance_study` (what every job's end runs for its study)."""
    engine = make_engine(database_url)
    sessions, settings, times = make_session_factory(engine), Settings(), []
    for _ in range(repeats):
        with sessions() as session:
            start = time.perf_counter()
            advance_study(session, settings, study_id)
            session.rollback()
            times.append(time.perf_counter() - start)
    engine.dispose()
    return statistics.median(times)


def measure_overhead(client: ArchsearchClient, args: argparse.Namespace, database_url: str) -> None:
    _, _, warm = study_round(client, args)  # warm-up: workers load torch and the data
    specs = plain_specs(client, warm)
    rows = []
    for i in range(args.overhead_rounds):  # alternate which goes first
        if i % 2:
            plain_s = plain_round(client, specs)
            study_s, submit_s, detail = study_round(client, args)
        else:
            study_s, submit_s, detail = study_round(client, args)
            plain_s = plain_round(client, specs)
        build_s = (detail.updated_at - detail.finished_at).total_seconds()
        # The study's wall clock includes its artifacts (report, charts): they are built
        # after its last job, and a user waits for them.
        rows.append((study_s + max(0.0, build_s), plain_s, submit_s, build_s, detail.id))
    hook_s = hook_seconds(database_url, rows[-1][4])
    print("\n## Overhead of a study over the same jobs submitted one by one\n")
    print(
        f"{len(specs)} train jobs on digits ({args.overhead_epochs} epochs), same workers, "
        "order alternated; makespan = first job created to last job ended (server clock), "
        "the study's plus its artifact build after that last job\n"
    )
    print(
        "| round | study makespan s (with artifacts) | plain jobs makespan s | ratio "
        "| submit s | artifacts s |"
    )
    print("|---|---|---|---|---|---|")
    for i, (s, p, sub, build, _) in enumerate(rows):
        print(f"| {i} | {s:.2f} | {p:.2f} | {s / p:.3f} | {sub:.3f} | {build:.2f} |")
    study_s = statistics.median(r[0] for r in rows)
    plain_s = statistics.median(r[1] for r in rows)
    print(f"\nmedian makespan ratio study / plain: {study_s / plain_s:.3f}")
    own = len(specs) * hook_s
    print(
        f"the study's own work on the workers: {len(specs)} x advance_study "
        f"{hook_s * 1e3:.1f} ms = {own:.3f} s = {own / plain_s * 100:.2f}% of the plain "
        "makespan (target < 2%); submit and artifact build in the table above"
    )


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
                measure_overhead(client, args, db_url)
    finally:
        for proc in reversed(started):
            proc.stop()
        procs.drop_database(name)


if __name__ == "__main__":
    main()
