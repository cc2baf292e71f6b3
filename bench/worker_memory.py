"""A worker's memory piece by piece: the pool process's resident memory after each stage
of its life, in arms run as fresh interpreters, rounds interleaved.

Each arm replays what a Celery worker does without Celery's own machinery: a "parent"
imports the worker application (`archsearch.worker.app`, as the `archsearch worker` command
does) and runs `preload`, then forks; the child (the pool process) prepares its training
thread, runs `warm_up`, then claims and runs through the executor a 1-epoch MNIST train job
and a default prune job (the 235k-parameter MLP, masks learned), as `bench/engine.py
--worker` does on a real worker. Per stage: VmRSS, VmHWM (peak resident), RssAnon,
RssFile; at the end the mapped dataset cache resident, and Pss for both processes.

How to read RSS against Pss: RSS counts every resident page a process maps, shared or not:
torch's libraries, the modules the parent imported before the fork (its anonymous pages,
shared copy-on-write with the child until written) and the dataset cache file (a
copy-on-write file mapping: its pages are the kernel's page cache, shared by every process
of the machine that maps it, and dropped under pressure). Pss divides each shared page by
the number of processes mapping it, so the Pss of all processes adds up to the machine's
real use. The goal (VmHWM) is an RSS figure: sharing does not lower it.

Arms:
- before: CLI parent: the main process also holds what it held before it became a fresh
  interpreter (`archsearch worker` execs `python -m archsearch.worker`) and before Optuna,
  Alembic and the webhook client left its imports: the command line, the API, uvicorn.
- as built: the worker as the code stands.
- arena 2: MALLOC_ARENA_MAX=2 (glibc keeps two heaps for all threads, not eight per core).
- no warm_up: the pool process skips `warm_up` (the first job then pays its imports and
  first calls; `bench/engine.py --worker` prints that job's time against a warm one).
- no dynamo: a floor, not a fix. `torch.optim` imports torch._dynamo (and sympy) on its
  first step (`_use_grad_for_differentiable`, `torch._disable_dynamo`); this arm puts a stub
  `torch._dynamo` module (graph_break, disable) in sys.modules first, to measure what a
  worker would hold if the engine stepped its optimisers without torch.optim's wrappers
  (e.g. `torch._fused_adam_` called directly). Never do this in the service.

Floors, each a fresh interpreter: bare `import torch`, then one import each on top of it.

Run: PYTHONPATH=$PWD ARCHSEARCH_DATA_DIR=/work/shared/datasets python bench/worker_memory.py
     --database-url postgresql://postgres@127.0.0.1:5432/<an empty database> [--rounds 2]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import types
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("ARCHSEARCH_DATA_DIR", REPO.parent / "shared" / "datasets"))
# What the Celery main process imported before it became a fresh interpreter of its own
# (`python -m archsearch.worker`): the command line, the API, uvicorn, Alembic, Optuna, httpx.
CLI_PARENT = (
    "archsearch.cli.main,archsearch.server.commands,archsearch.jobs.platform.migrate,"
    "archsearch.jobs.domain.studies.adaptive,archsearch.jobs.domain.webhooks.deliverer"
)
ARMS: dict[str, dict[str, str]] = {
    "before: CLI parent": {"EXTRA_IMPORTS": CLI_PARENT},
    "as built": {},
    "arena 2": {"MALLOC_ARENA_MAX": "2"},
    "no warm_up": {"NO_WARM_UP": "1"},
    "no dynamo": {"STUB": "1"},
}
TRAIN = {"method": "train", "dataset": {"name": "mnist"}, "training": {"epochs": 1}}
PRUNE = {**TRAIN, "method": "prune"}
FLOORS = {
    "torch._dynamo (what torch.optim's first step imports)": "import torch._dynamo",
    "onnx + onnxruntime (the deployment export and check)": "import onnx, onnxruntime",
    "matplotlib.pyplot (the job's figures)": "import matplotlib.pyplot",
    "sqlalchemy + celery + redis": "import sqlalchemy, celery.app, redis",
    "alembic (the parent's schema check)": "import alembic.command, alembic.script",
    "optuna (adaptive studies)": "import optuna",
    "httpx (webhooks, parent only)": "import httpx",
}


def status() -> dict[str, float]:
    """MB from /proc/self/status."""
    lines = Path("/proc/self/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in lines)
    keys = ("VmRSS", "VmHWM", "RssAnon", "RssFile")
    return {k: int(fields[k].split()[0]) / 1024 for k in keys}


def pss(pid: int | str = "self") -> dict[str, float]:
    """MB from smaps_rollup: Pss and the private (unshared) part."""
    rows = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    kb = {row.split()[0].rstrip(":"): int(row.split()[1]) for row in rows}
    return {"Pss": kb["Pss"] / 1024, "Private": (kb["Private_Clean"] + kb["Private_Dirty"]) / 1024}


def mapped_dataset(cache_dir: Path) -> float:
    """MB resident of this process's mappings of the dataset cache files."""
    total_kb, mapping = 0, ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            mapping = fields[5] if len(fields) > 5 else ""
        elif fields[0] == "Rss:" and mapping.startswith(str(cache_dir)):
            total_kb += int(fields[1])
    return total_kb / 1024


def stub_dynamo() -> None:
    """The 'no dynamo' arm only: what torch.optim's wrappers call, as no-ops."""
    import torch

    stub = types.ModuleType("torch._dynamo")
    stub.graph_break = lambda: None  # type: ignore[attr-defined]
    stub.disable = lambda fn, recursive=True, wrapping=True: fn  # type: ignore[attr-defined]
    stub.is_compiling = lambda: False  # type: ignore[attr-defined]
    sys.modules["torch._dynamo"] = stub
    torch._dynamo = stub  # type: ignore[attr-defined]


# ---------------------------------------------------------------- one arm (a fresh process)
def settings_for(args: argparse.Namespace) -> Any:
    from archsearch.jobs.platform.settings import Settings

    return Settings(
        home=Path(args.home),
        database_url=args.database_url,
        broker_url=None,
        data_dir=DATA_DIR,
        torch_threads=1,
    )


def queue_job(services: Any, spec: dict[str, Any]) -> uuid.UUID:
    from archsearch.jobs.domain.tables import Job, JobStatus
    from archsearch.jobs.platform.db import transaction
    from archsearch.specs import parse_job_spec

    with transaction(services.sessions) as session:
        raw = parse_job_spec(spec).model_dump(mode="json")
        job = Job(method=spec["method"], spec=raw, status=JobStatus.queued)
        session.add(job)
        session.flush()
        return job.id


def pool_process(settings: Any, stages: list[tuple[str, dict[str, float]]]) -> None:
    """The child: what `register_process` and then the run_job task do."""
    import torch

    from archsearch.jobs.domain.jobs.offer import Offer
    from archsearch.jobs.platform.services import Services
    from archsearch.jobs.runtime.device import prepare_training_thread
    from archsearch.jobs.runtime.executor import execute_next
    from archsearch.jobs.runtime.warmup import warm_up

    stages.append(("pool: after the fork", status()))
    prepare_training_thread(settings)
    if not os.environ.get("NO_WARM_UP"):
        warm_up(torch.device("cpu"))
    stages.append(("pool: after warm_up", status()))
    services = Services.from_settings(settings)
    for name, spec in (("train 1 epoch", TRAIN), ("prune (learned)", PRUNE)):
        job_id = queue_job(services, spec)
        assert execute_next(services, Offer("cpu")) == job_id, "the arm's job runs next"
        stages.append((f"pool: after the {name} job", status()))
    services.engine.dispose()


def run_arm(args: argparse.Namespace) -> None:
    """Parent then child; the child prints its stages as JSON, with the parent's Pss read
    while both live."""
    if os.environ.get("STUB"):
        stub_dynamo()
    for name in filter(None, os.environ.get("EXTRA_IMPORTS", "").split(",")):
        importlib.import_module(name)
    import archsearch.worker.app  # noqa: F401  # what the `archsearch worker` parent imports
    from archsearch.jobs.runtime.warmup import preload

    settings = settings_for(args)
    preload()
    stages = [("parent: imports + preload", status())]
    parent_pid = os.getpid()
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        pool_process(settings, stages)
        out = {"stages": stages, "end": {**status(), **pss()}}
        out["end"]["dataset"] = mapped_dataset(settings.resolved_dataset_cache_dir)
        out["parent"] = {**pss(parent_pid), "VmRSS": rss_of(parent_pid)}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.wait()
    print(text)


def rss_of(pid: int) -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if "VmRSS" in x)
    return int(line.split()[1]) / 1024


# ---------------------------------------------------------------- the driver
def arm_output(args: argparse.Namespace, arm: str, home: str) -> dict[str, Any]:
    env = {**os.environ, **ARMS[arm], "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "--arm", arm, "--home", home]
    command += ["--database-url", args.database_url]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def floor(code: str) -> float:
    """Peak resident MB of a fresh interpreter that imports torch, then runs `code`."""
    probe = (
        f"import torch, pathlib; {code}; print([l for l in pathlib.Path('/proc/self/status')"
        ".read_text().splitlines() if l.startswith('VmHWM')][0].split()[1])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return int(out.stdout.strip()) / 1024


def prepare(args: argparse.Namespace, home: str) -> None:
    """Schema and the machine's dataset cache, built once before any arm (as on a worker
    machine after its first MNIST job)."""
    sys.path.insert(0, str(REPO))
    from archsearch.jobs.platform.migrate import upgrade
    from archsearch.jobs.platform.services import Services
    from archsearch.jobs.runtime.data import load_job_dataset
    from archsearch.specs import parse_job_spec

    settings = settings_for(argparse.Namespace(home=home, database_url=args.database_url))
    settings.prepare_directories()
    upgrade(settings.resolved_database_url)
    services = Services.from_settings(settings)
    load_job_dataset(services, parse_job_spec(TRAIN))
    services.engine.dispose()


def report(results: dict[str, list[dict[str, Any]]]) -> None:
    print(f"\nMB, median over rounds; load {os.getloadavg()[0]:.1f}")
    arms = list(results)
    print(f"{'stage (pool process VmRSS / VmHWM)':36s}" + "".join(f"{a:>20s}" for a in arms))
    first = results[arms[0]][0]["stages"]
    for i, (stage, _) in enumerate(first):
        cells = []
        for arm in arms:
            rss = median([r["stages"][i][1]["VmRSS"] for r in results[arm]])
            hwm = median([r["stages"][i][1]["VmHWM"] for r in results[arm]])
            cells.append(f"{rss:8.0f} / {hwm:6.0f}")
        print(f"{stage:36s}" + "".join(f"{c:>20s}" for c in cells))
    for key in ("RssAnon", "RssFile", "dataset", "Pss", "Private"):
        row = [median([r["end"][key] for r in results[a]]) for a in arms]
        print(f"{'pool at the end: ' + key:36s}" + "".join(f"{v:20.0f}" for v in row))
    for key in ("VmRSS", "Pss", "Private"):
        row = [median([r["parent"][key] for r in results[a]]) for a in arms]
        print(f"{'parent at the end: ' + key:36s}" + "".join(f"{v:20.0f}" for v in row))


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        run_arm(args)
        return
    print(f"load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="archsearch-worker-memory-") as home:
        prepare(args, home)
        results: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
        for r in range(args.rounds):
            for arm in list(ARMS)[r % len(ARMS) :] + list(ARMS)[: r % len(ARMS)]:
                results[arm].append(arm_output(args, arm, home))
                print(f"round {r + 1}: {arm} done", file=sys.stderr, flush=True)
        report(results)
    print(f"\nfloors (peak resident, fresh interpreter; load {os.getloadavg()[0]:.1f})")
    bare = floor("pass")
    print(f"  bare `import torch`: {bare:.0f} MB")
    for name, code in FLOORS.items():
        print(f"  + {name}: +{floor(code) - bare:.0f} MB")


if __name__ == "__main__":
    main()
