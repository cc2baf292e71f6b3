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
real use. The goal (VmHWM) is an RSS figure: sharing does not lower it. The pool's children
(each job's ONNX export process) are reported apart: their CPU seconds and the highest peak
resident set among them (`RUSAGE_CHILDREN`; it counts the pages they share with the pool).
Pss has no kernel high-water mark, so a thread of the pool process reads smaps_rollup every
50 ms: its highest Pss is the peak a machine really pays for that process (a sample, so it
can miss a peak shorter than the interval), and the stack of the job's thread at its highest
sampled RSS says what the job was doing at the peak.

Arms:
- before: CLI parent: the main process also holds what it held before it became a fresh
  interpreter (`archsearch worker` execs `python -m archsearch.worker`) and before Optuna,
  Alembic and the webhook client left its imports: the command line, the API, uvicorn.
- as built: the worker as the code stands.
- arena 2: MALLOC_ARENA_MAX=2 (glibc keeps two heaps for all threads, not eight per core).
- no warm_up: the pool process skips `warm_up` (the first job then pays its imports and
  first calls; `bench/engine.py --worker` prints that job's time against a warm one).
- (gone) no dynamo: torch.optim's classes imported torch._dynamo and sympy (71 MB, see the
  floors); the engine now steps torch's functional kernels (`core.optimizers`) and no job
  imports it (`tests/core/test_optimizers.py`), so the stub arm has nothing left to measure.
- no export (floor): `write_deployment` (the deployment artifacts: TorchScript and ONNX
  export, the ONNX Runtime check, the latency measurements) replaced by a no-op in the pool
  process, warm-up included. The ONNX export, check and latency now run in a child process
  forked per job (`core.deploy.forked`), so "as built" should sit on this floor; the rest of
  `write_deployment` (sizes, layer forms, PyTorch latency) still runs in the pool.
- no spectrum (floor): the prune job skips its Laplacian spectra (`save_spectrum`).
- mmap over 128k: glibc serves every allocation over 128 kB by its own mapping, returned
  to the system when freed (by default the threshold rises to the largest block freed, up
  to 32 MB, and freed blocks stay in the heap); "pool CPU s" shows what the faults cost.
- dataset read: the job's inputs read from the cache files by one `pread` per row taken
  (`ReadRowsInputs`, a bench-only `Inputs`) instead of touching their mapping: what the pool
  holds when the dataset's pages stay in the page cache only (the machine still holds them
  there, counted in no process's RSS or Pss); "pool CPU s" shows what the reads cost.
- both: no export and the dataset read.
- `--compare-with DIR` adds an arm "code of DIR": the same replay importing archsearch from
  another checkout (e.g. main), to compare a change against it in one run.

Floors, each a fresh interpreter: bare `import torch`, then one import each on top of it.

Run: PYTHONPATH=$PWD ARCHSEARCH_DATA_DIR=/work/shared/datasets python bench/worker_memory.py
     --database-url postgresql://postgres@127.0.0.1:5432/<an empty database> [--rounds 2]
     [--arms "as built,dataset read"] [--compare-with ../main]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import traceback
import types
import uuid
from pathlib import Path
from typing import Any

from _data_dir import bench_data_dir

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = bench_data_dir()
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
    "no export (floor)": {"NO_EXPORT": "1"},
    "no spectrum (floor)": {"NO_SPECTRUM": "1"},
    "mmap over 128k": {"MALLOC_MMAP_THRESHOLD_": "131072"},
    "dataset read": {"READ_ROWS": "1"},
    "both": {"NO_EXPORT": "1", "READ_ROWS": "1"},
}
# Run unless `--arms` names others: the worker as built and what each lever would give. The
# earlier arms (CLI parent, arena 2, no warm_up, mmap over 128k) were measured and settled.
DEFAULT_ARMS = "as built,no spectrum (floor),no export (floor),dataset read,both"
SAMPLE_SECONDS = 0.05  # the Pss sampler's interval
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


def rollup(pid: int | str) -> dict[str, int]:
    """kB by field from /proc/<pid>/smaps_rollup."""
    rows = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    return {row.split()[0].rstrip(":"): int(row.split()[1]) for row in rows}


def pss(pid: int | str = "self") -> dict[str, float]:
    """MB from smaps_rollup: Pss and the private (unshared) part."""
    kb = rollup(pid)
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


def stub_end_of_job() -> None:
    """The floor arms only: the methods skip their deployment artifacts or spectra."""
    import archsearch.core.methods.prune as prune_method
    import archsearch.core.methods.train as train_method

    if os.environ.get("NO_EXPORT"):
        for module in (prune_method, train_method):
            module.write_deployment = lambda *args, **kwargs: {}  # type: ignore[attr-defined]
    if os.environ.get("NO_SPECTRUM"):
        prune_method.save_spectrum = lambda *args, **kwargs: None  # type: ignore[attr-defined]


def read_dataset_rows() -> None:
    """The 'dataset read' arm only: cached datasets come as `ReadRowsInputs`."""
    import dataclasses

    from archsearch.jobs.runtime import data as runtime_data

    mapped_read = runtime_data.DatasetCache._read

    def read(cache: Any, key: str, info: Any) -> Any:
        data = mapped_read(cache, key, info)
        if data is None:
            return None
        folder, read_rows = cache.root / key, read_rows_class()
        inputs = {
            name: read_rows(folder / f"{name}.npy", getattr(data, name).stats)
            for name in ("x_train", "x_test")
        }
        return dataclasses.replace(data, **inputs)

    runtime_data.DatasetCache._read = read  # type: ignore[method-assign]


def read_rows_class() -> type:
    """`Inputs` whose rows are read from an .npy file by `os.preadv`, one call per row of an
    index (contiguous slices in one call); its mapping is never touched."""
    import numpy as np
    import torch

    from archsearch.core.data.inputs import Inputs

    class ReadRowsInputs(Inputs):
        def __init__(self, path: Path, stats: dict[str, Any]) -> None:
            header = np.load(path, mmap_mode="c")  # shape, dtype and offset only
            super().__init__(torch.from_numpy(header), **stats)
            self.fd, self.offset = os.open(path, os.O_RDONLY), header.offset
            self.row_bytes = header[0].nbytes

        def __getitem__(self, index: Any) -> torch.Tensor:
            if isinstance(index, slice) and index.step in (None, 1):
                start, stop, _ = index.indices(len(self))
                return self._normalise(self._rows([start], stop - start))
            batch = isinstance(index, torch.Tensor) and index.dim() == 1
            if batch and index.dtype in (torch.int64, torch.int32):
                return self._normalise(self._rows(index.tolist(), 1))
            return super().__getitem__(index)

        def _rows(self, starts: list[int], count: int) -> torch.Tensor:
            out = bytearray(len(starts) * count * self.row_bytes)
            view, size = memoryview(out), count * self.row_bytes
            for k, start in enumerate(starts):
                os.preadv(
                    self.fd, [view[k * size : (k + 1) * size]], self.offset + start * self.row_bytes
                )
            rows = torch.frombuffer(out, dtype=self.stored.dtype) if out else self.stored[:0]
            return rows.view(len(starts) * count, *self.stored.shape[1:])

    return ReadRowsInputs


class PssSampler(threading.Thread):
    """Reads this process's smaps_rollup every `SAMPLE_SECONDS`: the highest Pss, and the
    job thread's innermost archsearch frames when the sampled Rss was highest."""

    def __init__(self) -> None:
        super().__init__(name="pss-sampler", daemon=True)
        self.job_thread = threading.get_ident()
        self.peak_pss = self.peak_rss = 0.0
        self.at_peak: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_SECONDS):
            kb = rollup("self")
            self.peak_pss = max(self.peak_pss, kb["Pss"] / 1024)
            if kb["Rss"] / 1024 > self.peak_rss:
                self.peak_rss = kb["Rss"] / 1024
                self.at_peak = archsearch_frames(sys._current_frames().get(self.job_thread))


def archsearch_frames(frame: types.FrameType | None) -> list[str]:
    """The innermost three archsearch frames of a stack, innermost last."""
    stack = traceback.extract_stack(frame) if frame is not None else []
    ours = [f for f in stack if "/archsearch/" in f.filename]
    return [f"{Path(f.filename).stem}.{f.name}:{f.lineno}" for f in ours[-3:]]


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
    from archsearch.jobs.domain.tables import Job
    from archsearch.jobs.platform.db import transaction
    from archsearch.schemas.jobs import JobStatus
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
    stub_end_of_job()
    if os.environ.get("READ_ROWS"):
        read_dataset_rows()
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
        sampler = PssSampler()
        sampler.start()
        pool_process(settings, stages)
        sampler.done.set()
        sampler.join()
        cpu = os.times()
        end = {**status(), **pss(), "peak Pss": sampler.peak_pss, "CPU s": cpu.user + cpu.system}
        end["children CPU s"] = cpu.children_user + cpu.children_system
        end["children peak RSS"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        out = {"stages": stages, "end": end}
        out["at_peak"] = sampler.at_peak
        out["end"]["dataset"] = mapped_dataset(settings.resolved_dataset_cache_dir)
        out["end"]["dynamo"] = float("torch._dynamo" in sys.modules)  # 71 MB when imported
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
def chosen_arms(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """The arms to run, by name: the environment each one adds."""
    names = (args.arms or DEFAULT_ARMS).split(",")
    unknown = sorted(set(names) - set(ARMS))
    assert not unknown, f"unknown arms {unknown}; known: {list(ARMS)}"
    arms = {name: {"PYTHONPATH": str(REPO), **ARMS[name]} for name in names}
    if args.compare_with:
        other = Path(args.compare_with).resolve()
        arms = {f"code of {other}": {"PYTHONPATH": str(other)}, **arms}
    return arms


def arm_output(args: argparse.Namespace, arm: dict[str, str], home: str) -> dict[str, Any]:
    env = {**os.environ, **arm, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "--arm", "1", "--home", home]
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
    print(f"{'stage (pool process VmRSS / VmHWM)':36s}" + "".join(f"{a[-19:]:>20s}" for a in arms))
    first = results[arms[0]][0]["stages"]
    for i, (stage, _) in enumerate(first):
        cells = []
        for arm in arms:
            rss = median([r["stages"][i][1]["VmRSS"] for r in results[arm]])
            hwm = median([r["stages"][i][1]["VmHWM"] for r in results[arm]])
            cells.append(f"{rss:8.0f} / {hwm:6.0f}")
        print(f"{stage:36s}" + "".join(f"{c:>20s}" for c in cells))
    keys = ("RssAnon", "RssFile", "dataset", "Pss", "Private", "peak Pss", "CPU s")
    keys += ("children CPU s", "children peak RSS", "dynamo")
    for key in keys:
        row = [median([r["end"][key] for r in results[a]]) for a in arms]
        print(f"{'pool at the end: ' + key:36s}" + "".join(f"{v:20.1f}" for v in row))
    for key in ("VmRSS", "Pss", "Private"):
        row = [median([r["parent"][key] for r in results[a]]) for a in arms]
        print(f"{'parent at the end: ' + key:36s}" + "".join(f"{v:20.0f}" for v in row))
    # What the machine pays for the two processes: shared pages counted once, not twice.
    row = [median([r["end"]["Pss"] + r["parent"]["Pss"] for r in results[a]]) for a in arms]
    print(f"{'pool + parent at the end: Pss':36s}" + "".join(f"{v:20.0f}" for v in row))
    row = [median([r["end"]["VmRSS"] + r["parent"]["VmRSS"] for r in results[a]]) for a in arms]
    print(f"{'pool + parent at the end: VmRSS':36s}" + "".join(f"{v:20.0f}" for v in row))
    print("\nthe job thread at the pool's highest sampled Rss (innermost last), per round:")
    for arm in arms:
        for r, result in enumerate(results[arm]):
            print(f"  {arm}, round {r + 1}: {' > '.join(result['at_peak']) or '-'}")


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--arms", help=f"comma-separated, of: {', '.join(ARMS)} (default: {DEFAULT_ARMS})"
    )
    parser.add_argument("--compare-with", help="another checkout to replay as an arm too")
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        run_arm(args)
        return
    print(f"load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="archsearch-worker-memory-") as home:
        prepare(args, home)
        arms = chosen_arms(args)
        results: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
        for r in range(args.rounds):
            for arm in list(arms)[r % len(arms) :] + list(arms)[: r % len(arms)]:
                results[arm].append(arm_output(args, arms[arm], home))
                print(f"round {r + 1}: {arm} done", file=sys.stderr, flush=True)
        report(results)
    print(f"\nfloors (peak resident, fresh interpreter; load {os.getloadavg()[0]:.1f})")
    bare = floor("pass")
    print(f"  bare `import torch`: {bare:.0f} MB")
    for name, code in FLOORS.items():
        print(f"  + {name}: +{floor(code) - bare:.0f} MB")


if __name__ == "__main__":
    main()
