"""Engine overhead against plain PyTorch, measured side by side in one run.

Each method runs in-process through the entry point the worker uses
(`archsearch.core.methods.get_method`) with the service's `DbRunContext` (progress rows,
checkpoints and artifacts written to a real database and object store), and is compared
with a hand-written PyTorch loop of the same model, data, batch size, epochs, optimiser,
learning-rate schedule and thread count. The plain loop holds the inputs as normalised
float tensors in memory (the job keeps raw uint8 rows and normalises each batch), shuffles
with `randperm` each epoch and measures the test split after every epoch in batches of
512, as the job does (its history holds that number).

Three references per case:
- plain: the loop as a user writes it, with torch's default optimiser kernel (on a CPU, the
  per-tensor loop);
- fused: the same loop with the fused optimiser kernel the engine picks
  (`core.training.fusable`): job / fused is the engine's own overhead;
- floor (where a method has extra work): the plain loop plus only the work the method
  really has to do, written plainly (`bench/_engine_plain.py`, `bench/_engine_grow_floor.py`),
  with the fused kernel like the job; job / floor is the engine's overhead on that method
  and floor / fused the price of the method itself.

CPU seconds from `time.process_time` plus those of ended children (a job's ONNX export
runs in a child it forks), every case once per round, rounds interleaved so drift and
neighbours' load hit every case alike; a ratio is the median over rounds of the
same round's ratio, the spread its min-max. An untimed warm-up run of each job comes first,
then the heap is frozen (`gc.freeze`) as a worker freezes it after its own warm-up.
The train and prune jobs' CPU time is broken down into its parts, timed inside the job
(`bench/_engine_breakdown.py`): training loop, per-epoch test passes and checkpoints, then
each piece of the work a job does once whatever its epochs (model and mask files,
compaction, deployment with its sizes, layer forms, latency, ONNX export and check, the
spectrum, the charts' data rows (the PNGs are drawn on first download, by the API, not by
the job), artifact writes), which the plain loop does not do at all. Its last
line, "fixed per-job work", is the job's total less the training loop, its test passes,
checkpoints and model build.
- train: the default MLP (784-256-128-10) on MNIST at the documented default epochs (10).
- job: the same train job through the executor (`execute_next`: claim, dataset load, run,
  record), i.e. what a worker does, against the same plain loop.
- prune learned / prune free: each method's default MLP with learned masks (two
  temperatures, density 0.1) and weight-free, against the plain dense loop of the same
  widths and activation (ELU for the weight-free default). Floor: the two-temperature (or
  binary straight-through) mask loop with its penalty and second optimiser, frozen at the
  job's own freeze step.
- dnw: search, strategy dnw, static neural graph, one epoch of MNIST, against a plain loop
  of the same graph with a fixed mask. Floor: the same graph with the gradient of every
  admissible edge and a plain top-k over each graph's |w| after every step.
- grow: the default grow job (no from-scratch baseline, 10,000 samples, one epoch) against
  a plain loop of the final widths for the same steps. Floor: the same growth schedule
  written plainly (statistics, solves, line search, widening); the plain loop trains the
  final widths throughout.

--worker: a real Celery worker started cold (PostgreSQL and Redis): seconds until it lists
itself in `workers` (it does so after its warm-up), the same train job run first on it and
then warm (wall seconds from the job's started_at to finished_at), then a default prune job
of one epoch (its wall seconds too: it shows a pool process that lost its subnormal flush),
and the pool process's peak resident memory (VmHWM) after those MNIST
jobs, with its anonymous and file-backed parts; the Celery main process's resident memory,
its Pss and private part (/proc/<pid>/smaps_rollup), and the floor of a bare `import torch`.

Run: OMP_NUM_THREADS=1 python bench/engine.py [--rounds 3] [--epochs 10] [--cases train,dnw]
      [--database-url postgresql://...]   (default: a SQLite file in a temporary folder)
     OMP_NUM_THREADS=1 python bench/engine.py --worker --database-url postgresql://...

Other CPUs: the ratios move with the instruction set (elementwise mask work against the
matrix kernels). An x86 CPU without AVX-512 is approximated on one that has it by capping
every library the job uses: `ATEN_CPU_CAPABILITY=avx2` (torch's own kernels),
`MKL_ENABLE_INSTRUCTIONS=AVX2` (MKL's matrix products), `ONEDNN_MAX_CPU_ISA=AVX2` (oneDNN).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _data_dir import bench_data_dir  # noqa: E402
from _engine_breakdown import Breakdown, cpu_now  # noqa: E402
from _engine_grow_floor import grow_floor  # noqa: E402
from _engine_plain import dnw_floor, plain_graph, plain_mlp, prune_floor  # noqa: E402

from archsearch.core.data.loaders import Dataset, load_dataset, training_subset  # noqa: E402
from archsearch.core.float_mode import flush_denormals  # noqa: E402
from archsearch.core.methods import get_method  # noqa: E402
from archsearch.core.models.layers import ACTIVATIONS  # noqa: E402
from archsearch.jobs.domain.jobs.offer import Offer  # noqa: E402
from archsearch.jobs.domain.tables import Job  # noqa: E402
from archsearch.jobs.platform.db import transaction  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.services import Services  # noqa: E402
from archsearch.jobs.platform.settings import Settings  # noqa: E402
from archsearch.jobs.runtime.context import DbRunContext  # noqa: E402
from archsearch.jobs.runtime.data import load_job_dataset  # noqa: E402
from archsearch.jobs.runtime.executor import execute_next  # noqa: E402
from archsearch.jobs.runtime.warmup import freeze_heap  # noqa: E402
from archsearch.schemas.jobs import JobStatus  # noqa: E402
from archsearch.specs import DatasetRef, JobBase, parse_job_spec  # noqa: E402

DATA_DIRS = (bench_data_dir(),)
CPU = torch.device("cpu")


@dataclass
class Case:
    name: str
    spec: dict[str, Any]
    plain: str  # key of the plain loop it is compared with
    floor: str
    through_executor: bool = False
    floor_loop: str | None = None  # key of the method's own floor loop (`_engine_plain`)


def cases(args: argparse.Namespace) -> list[Case]:
    epochs, grow_subset, search_subset = args.epochs, args.grow_subset, args.search_subset
    mnist = {"name": "mnist"}
    training = {"epochs": epochs}
    return [
        Case("train", {"method": "train", "dataset": mnist, "training": training}, "mlp", "1.00"),
        Case(
            "job",
            {"method": "train", "dataset": mnist, "training": training},
            "mlp",
            "1.00 + dataset load",
            through_executor=True,
        ),
        Case(
            "prune learned",
            {"method": "prune", "dataset": mnist, "training": training, "density": 0.1},
            "mlp",
            "masked fwd/bwd + mask optimiser until frozen",
            floor_loop="prune",
        ),
        Case(
            "prune free",
            {"method": "prune", "dataset": mnist, "training": training, "weights": "free"},
            "mlp",
            "masked fwd/bwd + mask optimiser every step",
            floor_loop="prune",
        ),
        Case(
            "dnw",
            {
                "method": "search",
                "dataset": {"name": "mnist", "train_subset": search_subset},
                "training": {"epochs": args.search_epochs},
            },
            "graph",
            "top-k per step + admissible-edge gradient",
            floor_loop="dnw",
        ),
        Case(
            "grow",
            {
                "method": "grow",
                "dataset": {"name": "mnist", "train_subset": grow_subset},
                "training": {"epochs": 1},
                "growth": {"baseline": False},
            },
            "grown",
            "growth statistics, solves, line search",
            floor_loop="grow",
        ),
    ]


# ---------------------------------------------------------------- jobs
def bench_services(database_url: str | None, home: Path) -> Services:
    settings = Settings(
        home=home, database_url=database_url, broker_url=None, data_dir=DATA_DIRS[0]
    )
    settings.prepare_directories()
    upgrade(settings.resolved_database_url)
    return Services.from_settings(settings)


def new_job(services: Services, spec: dict[str, Any], queued: bool) -> uuid.UUID:
    # A job run directly is never queued: the executor case must find its own job next.
    status = JobStatus.queued if queued else JobStatus.running
    with transaction(services.sessions) as session:
        raw = parse_job_spec(spec).model_dump(mode="json")
        job = Job(method=spec["method"], spec=raw, status=status)
        session.add(job)
        session.flush()
        return job.id


def run_job(services: Services, case: Case, data: Dataset) -> dict[str, float]:
    spec = parse_job_spec(case.spec)
    job_id = new_job(services, case.spec, queued=case.through_executor)
    if case.through_executor:
        assert execute_next(services, Offer("cpu")) == job_id, "the bench's job runs next"
        return {}
    ctx = DbRunContext(services, job_id, CPU, threading.Event())
    result = get_method(spec.method)(spec, data, ctx)
    ctx.flush()
    with transaction(services.sessions) as session:  # no "running" row left behind
        job = session.get(Job, job_id)
        assert job is not None
        job.status = JobStatus.succeeded
    return result.metrics


def cpu_seconds(work: Callable[[], Any]) -> tuple[float, Any]:
    start = cpu_now()  # the job's export child included
    out = work()
    return cpu_now() - start, out


# ---------------------------------------------------------------- a real worker
def worker_start(args: argparse.Namespace, home: Path) -> None:
    """A Celery worker process from cold: seconds until it is listed in `workers` (it
    registers after its warm-up), then the same train job twice (first on the fresh worker,
    then warm), the pool process's peak resident memory, and its torch threads."""
    import subprocess

    from archsearch.jobs.platform.broker import CeleryEnqueuer

    env = {
        "ARCHSEARCH_DATABASE_URL": args.database_url,
        "ARCHSEARCH_BROKER_URL": args.broker_url,
        "ARCHSEARCH_QUEUE_NAME": f"bench-engine-{uuid.uuid4().hex[:8]}",
        "ARCHSEARCH_HOME": str(home),
        "ARCHSEARCH_DATA_DIR": str(DATA_DIRS[0]),
        "PYTHONPATH": str(REPO),
        "ARCHSEARCH_TORCH_THREADS": "1",  # as the in-process cases (older code: OMP_NUM_THREADS)
    }
    settings = Settings(
        **{
            k.removeprefix("ARCHSEARCH_").lower(): v
            for k, v in env.items()
            if k.startswith("ARCHSEARCH_")
        }
    )
    services = Services.from_settings(settings)
    spec = {"method": "train", "dataset": {"name": "mnist"}, "training": {"epochs": 1}}
    if hasattr(settings, "resolved_dataset_cache_dir"):  # the machine's cache, built before
        from archsearch.jobs.runtime.data import load_job_dataset

        load_job_dataset(services, parse_job_spec(spec))
    started = time.monotonic()
    log = open(home / "worker.log", "wb")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "archsearch.cli.main",
            "worker",
            "-n",
            f"bench-{uuid.uuid4().hex[:6]}@%h",
        ],
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        pid, ready = wait_listed(services, worker, started)
        runs = [run_on_worker(services, CeleryEnqueuer(settings), spec) for _ in range(2)]
        prune = {**spec, "method": "prune"}  # the default 235k-parameter MLP, masks learned
        pruned = run_on_worker(services, CeleryEnqueuer(settings), prune)
        status = proc_status(pid)
        memory = {k: int(status[k].split()[0]) / 1024 for k in ("VmHWM", "RssAnon", "RssFile")}
        memory.update(mapped_memory(pid, settings.resolved_dataset_cache_dir))
        parent = parent_memory(worker.pid)
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(30)
        services.engine.dispose()
    print(f"\nworker: cold start to listed (ready) {ready:.1f} s")
    for line in (home / "worker.log").read_text(errors="replace").splitlines():
        if "torch threads, warmed up in" in line:
            print("worker log:", line.split("] ", 1)[-1])
    print(
        f"train job (MLP, MNIST, 1 epoch): first {runs[0]:.2f} s, warm {runs[1]:.2f} s, "
        f"first/warm {runs[0] / runs[1]:.2f}x"
    )
    print(f"default prune job (learned masks, 1 epoch) after them: {pruned:.2f} s")
    print(
        f"pool process: peak resident (VmHWM) {memory['VmHWM']:.0f} MB; after the jobs "
        f"anonymous {memory['RssAnon']:.0f} MB + file-backed {memory['RssFile']:.0f} MB "
        "(shared libraries, mapped datasets)"
    )
    print(
        f"pool process: mapped dataset cache resident {memory['dataset']:.0f} MB; proportional "
        f"set size (Pss: pages shared with the worker's main process counted by share) "
        f"{memory['Pss']:.0f} MB"
    )
    print(
        f"worker main process (Celery parent, pid {worker.pid}): resident {parent['VmRSS']:.0f} "
        f"MB (peak {parent['VmHWM']:.0f} MB), proportional set size {parent['Pss']:.0f} MB "
        f"(its pages shared with the pool process counted by share), private "
        f"{parent['Private']:.0f} MB"
    )
    step = (
        "p = torch.nn.Parameter(torch.ones(1)); p.grad = p.detach(); torch.optim.Adam([p]).step()"
    )
    print(
        f"floor: a bare `import torch` peaks at {torch_floor(''):.0f} MB resident; with one "
        f"optimiser step (torch.optim imports torch._dynamo and sympy on first use) "
        f"{torch_floor(step):.0f} MB"
    )
    print("the pool's memory stage by stage, arms side by side: bench/worker_memory.py")


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":", 1) for line in lines)


def parent_memory(pid: int) -> dict[str, float]:
    """MB: the process's resident and peak resident set, and from smaps_rollup its Pss and
    private pages (what it alone holds)."""
    status = proc_status(pid)
    out = {k: int(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}
    rollup = dict(
        (line.split()[0].rstrip(":"), int(line.split()[1]))
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    )
    out["Pss"] = rollup["Pss"] / 1024
    out["Private"] = (rollup["Private_Clean"] + rollup["Private_Dirty"]) / 1024
    return out


def torch_floor(code: str) -> float:
    """Peak resident MB of a fresh interpreter that imports torch and runs `code`."""
    import subprocess

    probe = (
        f"import torch, pathlib; {code or 'pass'}; print([l for l in pathlib.Path("
        "'/proc/self/status').read_text().splitlines() if l.startswith('VmHWM')][0].split()[1])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) / 1024


def mapped_memory(pid: int, cache_dir: Path) -> dict[str, float]:
    """MB resident of the mapped dataset cache files, and the process's Pss."""
    dataset_kb, mapping = 0, ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            mapping = fields[5] if len(fields) > 5 else ""
        elif fields[0] == "Rss:" and mapping.startswith(str(cache_dir)):
            dataset_kb += int(fields[1])
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    pss_kb = next(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))
    return {"dataset": dataset_kb / 1024, "Pss": pss_kb / 1024}


def wait_listed(services: Services, worker: Any, started: float) -> tuple[int, float]:
    from archsearch.jobs.domain.tables import WorkerRecord

    while time.monotonic() - started < 300:
        assert worker.poll() is None, "the worker exited; see worker.log in its home"
        with services.sessions() as session:
            names = [r.name for r in session.query(WorkerRecord).all()]
        if names:
            return int(names[0].rsplit(":", 1)[1]), time.monotonic() - started
        time.sleep(0.1)
    raise TimeoutError("the worker never registered")


def run_on_worker(services: Services, enqueuer: Any, spec: dict[str, Any]) -> float:
    job_id = new_job(services, spec, queued=True)
    enqueuer.enqueue(job_id)
    while True:
        with services.sessions() as session:
            job = session.get(Job, job_id)
            assert job is not None
            if job.status.terminal:
                assert job.status is JobStatus.succeeded, job.error
                assert job.started_at and job.finished_at
                return (job.finished_at - job.started_at).total_seconds()
        time.sleep(0.1)


# ---------------------------------------------------------------- main
BROKEN_DOWN = {"train": "train", "prune learned": "prune", "prune free": "prune"}


def measure(
    args: argparse.Namespace, services: Services, breakdowns: dict[str, Breakdown]
) -> dict[str, list[float]]:
    full = load_dataset(DatasetRef(name="mnist"), DATA_DIRS)
    chosen = [c for c in cases(args) if c.name in args.cases]
    data = {c.name: subset(full, c) for c in chosen}
    # The plain loops hold the inputs as a user would: normalised float tensors in memory
    # (the job's raw uint8 rows, normalised per batch, cost it their conversion).
    floats = {name: as_floats(d) for name, d in data.items()}
    warm_up(services, chosen, data)
    # As a worker after its warm-up: what is alive now leaves the cyclic collector's walks
    # (without it, the executor's collection after each job walked the whole process).
    freeze_heap()
    times: dict[str, list[float]] = {}
    grown: dict[str, tuple[int, ...]] = {}
    for r in range(args.rounds):
        order = chosen[r % len(chosen) :] + chosen[: r % len(chosen)]
        for case in order:
            spec = parse_job_spec(case.spec)
            breakdown = breakdowns.get(case.name)
            timing = breakdown.timing() if breakdown else contextlib.nullcontext()
            with timing:
                seconds, metrics = cpu_seconds(partial(run_job, services, case, data[case.name]))
            if breakdown:
                breakdown.record(seconds)
            times.setdefault(case.name, []).append(seconds)
            if case.name == "grow":
                grown[case.name] = widths_of(metrics)
            for kind, fused in (("plain", False), ("fused", True)):
                plain = plain_runner(case, spec, floats[case.name], grown.get(case.name), fused)
                times.setdefault(f"{kind} {case.name}", []).append(cpu_seconds(plain)[0])
            if case.floor_loop is not None:
                floor = floor_runner(case, spec, floats[case.name], metrics)
                times.setdefault(f"floor {case.name}", []).append(cpu_seconds(floor)[0])
            print(f"round {r + 1}: {case.name:14s} done", file=sys.stderr, flush=True)
    return times


def warm_up(services: Services, chosen: list[Case], data: dict[str, Dataset]) -> None:
    """One untimed run of each job on 1,000 samples for one epoch: lazy imports and first-call
    caches are paid before any timing, as a warm worker has paid them (its first job is
    measured by --worker)."""
    for case in chosen:
        if case.through_executor:
            # The same method as "train"; a warm worker also holds the dataset it loaded.
            load_job_dataset(services, parse_job_spec(case.spec))
            continue
        short = replace(
            case, spec={**case.spec, "training": {**case.spec["training"], "epochs": 1}}
        )
        tiny = replace(
            data[case.name],
            x_train=data[case.name].x_train[:1000],
            y_train=data[case.name].y_train[:1000],
        )
        run_job(services, short, tiny)


def as_floats(data: Dataset) -> Dataset:
    return replace(data, x_train=data.x_train.normalised(), x_test=data.x_test.normalised())


def subset(full: Dataset, case: Case) -> Dataset:
    """The case's training samples, drawn as a worker draws them (raw rows stay raw)."""
    spec = parse_job_spec(case.spec)
    return training_subset(full, spec.dataset, seed=spec.training.seed)


def widths_of(metrics: dict[str, float]) -> tuple[int, ...]:
    return tuple(int(metrics[f"width_{i}"]) for i in range(8) if f"width_{i}" in metrics)


def plain_runner(
    case: Case, spec: JobBase, data: Dataset, widths: tuple[int, ...] | None, fused: bool
) -> Callable[[], None]:
    """The plain loop as a user writes it, or (`fused`) with the optimiser kernel the engine
    picks, so the engine's own overhead is job / fused."""
    if case.plain == "graph":
        return lambda: plain_graph(data, spec, fused)
    if case.plain == "grown":
        assert widths is not None, "the grow job ran first in its round"
        return lambda: plain_mlp(data, spec, widths, nn.SELU, fused)
    # The job's own network: its widths and activation (the weight-free prune's default MLP
    # is 784-128-10 with ELU).
    hidden = spec.model.hidden  # type: ignore[attr-defined]
    act = ACTIVATIONS[spec.model.activation]  # type: ignore[attr-defined]
    return lambda: plain_mlp(data, spec, hidden, act, fused)


def floor_runner(
    case: Case, spec: JobBase, data: Dataset, metrics: dict[str, float]
) -> Callable[[], None]:
    if case.floor_loop == "dnw":
        return lambda: dnw_floor(data, spec)
    if case.floor_loop == "grow":
        return lambda: grow_floor(data, spec, metrics, fused=True)
    frozen_at = int(metrics.get("masks_frozen_at_step", -1))  # the job's own freeze step
    return lambda: prune_floor(data, spec, frozen_at)


def ratio_cells(over: list[float], under: list[float]) -> tuple[float, str]:
    """Median of the per-round ratios (same round, side by side) and their min-max."""
    ratios = sorted(a / b for a, b in zip(over, under, strict=True))
    return statistics.median(ratios), f"{ratios[0]:.2f}-{ratios[-1]:.2f}"


def report(args: argparse.Namespace, times: dict[str, list[float]]) -> None:
    print(f"\nthreads {torch.get_num_threads()}, rounds {args.rounds}, MLP epochs {args.epochs}")
    print("CPU seconds (medians); ratios: median over rounds of the same round's ratio, spread")
    print(
        "plain: the loop as a user writes it (torch's default optimiser kernel); fused: the same "
        "loop with the fused kernel the engine picks; floor: the method's own extra work, plain"
    )
    print(
        f"{'case':14s} {'job s':>6s} {'plain s':>7s} {'job/plain':>9s} {'spread':>9s} "
        f"{'fused s':>7s} {'job/fused':>9s} {'spread':>9s} "
        f"{'floor s':>7s} {'job/floor':>9s} {'spread':>9s} {'floor/fused':>11s}  floor"
    )
    for case in cases(args):
        if case.name not in args.cases:
            continue
        job, plain, fused = (times[f"{k}{case.name}"] for k in ("", "plain ", "fused "))
        cells = [f"{statistics.median(job):6.2f}"]
        for under in (plain, fused):
            ratio, spread = ratio_cells(job, under)
            cells += [f"{statistics.median(under):7.2f}", f"{ratio:8.2f}x", f"{spread:>9s}"]
        floor = times.get(f"floor {case.name}")
        if floor is None:
            cells += [f"{'-':>7s}", f"{'-':>9s}", f"{'-':>9s}", f"{'-':>11s}"]
        else:
            over_floor, floor_spread = ratio_cells(job, floor)
            cells += [
                f"{statistics.median(floor):7.2f}",
                f"{over_floor:8.2f}x",
                f"{floor_spread:>9s}",
                f"{ratio_cells(floor, fused)[0]:10.2f}x",
            ]
        print(f"{case.name:14s} {' '.join(cells)}  {case.floor}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--epochs", type=int, default=10, help="epochs of the MNIST MLP cases (the specs' default)"
    )
    parser.add_argument("--grow-subset", type=int, default=10_000)
    parser.add_argument("--search-subset", type=int, default=60_000)
    parser.add_argument("--search-epochs", type=int, default=1, help="epochs of the dnw case")
    names = "train,job,prune learned,prune free,dnw,grow"
    parser.add_argument("--cases", default=names, type=lambda s: s.split(","))
    parser.add_argument("--database-url", default=None)
    parser.add_argument(
        "--worker",
        action="store_true",
        help="only the real worker's cold start (needs --database-url of PostgreSQL and Redis)",
    )
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/12")
    args = parser.parse_args()
    torch.set_num_threads(1)
    flush_denormals()  # as every thread that runs jobs does
    with tempfile.TemporaryDirectory(prefix="archsearch-bench-engine-") as home:
        if args.worker:
            bench_services(args.database_url, Path(home)).engine.dispose()
            worker_start(args, Path(home))
            return
        services = bench_services(args.database_url, Path(home))
        breakdowns = {
            name: Breakdown(method) for name, method in BROKEN_DOWN.items() if name in args.cases
        }
        times = measure(args, services, breakdowns)
        services.engine.dispose()
    report(args, times)
    for name, breakdown in breakdowns.items():
        breakdown.report(name, statistics.median(times[f"plain {name}"]))


if __name__ == "__main__":
    main()
