"""The device check: does the engine do on one GPU what it does on a CPU, and at what speed?

Four measurements, each side by side in this one run, on one device (`--device`, CUDA by
default) and printed as a table (and written as markdown with `--out docs/gpu.md`):

1. parity: every method's default job (train, search, prune, grow; every field the default
   but the epochs, `--parity-epochs`) on the device and on the CPU: the same spec, so the
   device runs `training.precision: auto` (bf16 on a GPU that supports it) where the CPU
   runs fp32. Goal: test accuracy within 1 point.
2. step time: the default train job (precision fp32, then bf16) against a plain PyTorch loop
   of the same model, data, batch size, optimiser, schedule and epochs on the same device
   (inputs as normalised float tensors already on the device, as a user writes it; the job
   moves each batch of raw rows there). Goal: job / plain <= 1.1x.
3. packing: K (`--slots`, 8) train jobs at once in K processes on the one device (each capped
   to 1/K of its memory, as a worker with `ARCHSEARCH_WORKER_SLOTS=K` does), started through
   the engine's entry point directly (no Celery), against one such job alone: the ratio of
   their training samples per second. Goal: >= 4x. Processes load their data and warm up
   first; the clock runs from a common start to the last one's end.
4. precision: the default train job's wall seconds in bf16 against fp32.

`--device cpu --quick` is the smoke run CI can afford (digits, one epoch, two slots): it
checks the script, not the goals. Run on a GPU machine (sized to fit in 8 minutes on one
GPU; not yet measured there):

    python bench/gpu.py --out docs/gpu.md
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import torch
import torch.nn.functional as F
from _data_dir import bench_data_dir
from _device_jobs import METHODS, JobRun, job_spec, load, run_job

from archsearch.core.data.loaders import Dataset
from archsearch.core.models import Architecture, create_model
from archsearch.core.training import lr_factor
from archsearch.specs import JobBase, TrainJob

PRECS = ("fp32", "bf16")


@dataclass(frozen=True)
class Options:
    device: torch.device
    dataset: str
    parity_epochs: int
    train_epochs: int
    slots: int
    methods: tuple[str, ...]
    out: Path | None = None


def options(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--quick", action="store_true", help="smoke run: digits, 1 epoch, K=2")
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--parity-epochs", type=int, default=3)
    parser.add_argument("--train-epochs", type=int, default=3, help="step time, packing")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--out", type=Path, help="also write the results as markdown here")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device here; --device cpu --quick runs the smoke test")
    methods = tuple(args.methods.split(","))
    if unknown := set(methods) - set(METHODS):
        parser.error(f"unknown methods {sorted(unknown)}; choose from {', '.join(METHODS)}")
    device = torch.device(args.device)
    if args.quick:
        return Options(device, "digits", 1, 1, 2, methods, args.out)
    epochs = (args.parity_epochs, args.train_epochs)
    return Options(device, args.dataset, *epochs, args.slots, methods, args.out)


def with_epochs(method: str, dataset: str, epochs: int, **training: object) -> JobBase:
    overrides: dict[str, object] = {"training": {"epochs": epochs, **training}}
    if method == "grow":  # its from-scratch baseline trains for a wall clock, not epochs
        overrides["growth"] = {"baseline": False}
    return job_spec(method, dataset, overrides)


def parity(opts: Options, data_dir: Path) -> list[str]:
    lines = ["| method | device accuracy | CPU accuracy | difference (points) | within 1 |"]
    lines.append("|---|---|---|---|---|")
    for method in opts.methods:
        spec = with_epochs(method, opts.dataset, opts.parity_epochs)
        data = load(spec, data_dir)
        on_device = run_job(spec, data, opts.device)
        on_cpu = run_job(spec, data, torch.device("cpu"))
        diff = 100 * (on_device.test_accuracy - on_cpu.test_accuracy)
        lines.append(
            f"| {method} | {on_device.test_accuracy:.4f} | {on_cpu.test_accuracy:.4f} | "
            f"{diff:+.2f} | {'yes' if abs(diff) <= 1 else 'NO'} |"
        )
    return lines


def plain_train(spec: TrainJob, data: Dataset, device: torch.device) -> tuple[float, float]:
    """The train job written as a user writes it; (wall seconds, test accuracy)."""
    torch.manual_seed(spec.training.seed)
    x, y = data.x_train.normalised().to(device), data.y_train.to(device)
    x_test, y_test = data.x_test.normalised().to(device), data.y_test.to(device)
    arch = Architecture(spec.model, data.input_shape, data.num_classes)
    model = create_model(arch).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=spec.training.optimizer.lr)
    batch, epochs = spec.training.batch_size, spec.training.epochs
    factor = lr_factor(spec.training.schedule, epochs, math.ceil(len(x) / batch))
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    _sync(device)
    start, correct = time.perf_counter(), 0
    for _ in range(epochs):
        model.train()
        for index in torch.randperm(len(x), device=device).split(batch):
            loss = F.cross_entropy(model(x[index]), y[index])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            scheduler.step()
        model.eval()
        with torch.no_grad():
            correct = sum(
                int((model(xb).argmax(1) == yb).sum())
                for xb, yb in zip(x_test.split(512), y_test.split(512), strict=True)
            )
    _sync(device)
    return time.perf_counter() - start, correct / len(y_test)


def step_time(opts: Options, data_dir: Path) -> tuple[list[str], dict[str, JobRun]]:
    """Job against plain loop (fp32 both), and the job's bf16 against its fp32."""
    jobs = {p: with_epochs("train", opts.dataset, opts.train_epochs, precision=p) for p in PRECS}
    data = load(jobs["fp32"], data_dir)
    fp32 = jobs["fp32"]
    assert isinstance(fp32, TrainJob), "the train method's spec"
    plain_train(fp32, data, opts.device)  # warm-up: kernels chosen, caches filled
    for spec in jobs.values():
        run_job(spec, data, opts.device)
    plain_seconds, plain_accuracy = plain_train(fp32, data, opts.device)
    runs = {p: run_job(spec, data, opts.device) for p, spec in jobs.items()}
    job = runs["fp32"]
    ratio = job.seconds / plain_seconds
    lines = [
        "| run | wall s | ms per step | test accuracy |",
        "|---|---|---|---|",
        f"| plain PyTorch loop (fp32) | {plain_seconds:.2f} | "
        f"{1000 * plain_seconds / max(1, job.steps):.3f} | {plain_accuracy:.4f} |",
    ]
    for p, run in runs.items():
        ms = 1000 * run.seconds / max(1, run.steps)
        lines.append(
            f"| train job ({p}) | {run.seconds:.2f} | {ms:.3f} | {run.test_accuracy:.4f} |"
        )
    lines.append("")
    lines.append(f"job (fp32) / plain: **{ratio:.2f}x** (goal <= 1.1x)")
    return lines, runs


def _packed_job(
    opts: Options, slots: int, threads: int, ready: Barrier, results: Queue[tuple[float, ...]]
) -> None:
    """One slot's process: load, warm up, wait until every slot is ready, run; puts
    (start, end, training samples) on `results`."""
    torch.set_num_threads(threads)
    if opts.device.type == "cuda" and slots > 1:  # as a worker's pool process caps itself
        torch.cuda.set_per_process_memory_fraction(1 / slots, 0)
    spec = with_epochs("train", opts.dataset, opts.train_epochs)
    data = load(spec, bench_data_dir())
    run_job(with_epochs("train", opts.dataset, 1), data, opts.device)  # warm-up
    ready.wait()
    start = time.time()
    run = run_job(spec, data, opts.device)
    results.put((start, time.time(), float(run.steps * spec.training.batch_size)))


def packed_throughput(opts: Options, slots: int) -> float:
    """Training samples per second of `slots` train jobs run at once, one per process."""
    threads = max(1, (os.cpu_count() or 1) // slots)
    spawn = mp.get_context("spawn")
    ready, results = spawn.Barrier(slots), spawn.Queue()
    procs = [
        spawn.Process(target=_packed_job, args=(opts, slots, threads, ready, results))
        for _ in range(slots)
    ]
    for proc in procs:
        proc.start()
    measured = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0, f"a slot's process failed (exit code {proc.exitcode})"
    starts, ends, samples = zip(*measured, strict=True)
    return sum(samples) / (max(ends) - min(starts))


def packing(opts: Options) -> list[str]:
    alone = packed_throughput(opts, 1)
    packed = packed_throughput(opts, opts.slots)
    return [
        "| jobs at once | samples per second (all jobs) |",
        "|---|---|",
        f"| 1 | {alone:,.0f} |",
        f"| {opts.slots} | {packed:,.0f} |",
        "",
        f"{opts.slots} packed / 1 alone: **{packed / alone:.2f}x** (goal >= 4x)",
    ]


def precision_lines(runs: dict[str, JobRun]) -> list[str]:
    ratio = runs["bf16"].seconds / runs["fp32"].seconds
    diff = 100 * (runs["bf16"].test_accuracy - runs["fp32"].test_accuracy)
    return [f"train job bf16 / fp32 wall time: **{ratio:.2f}x**; accuracy {diff:+.2f} points"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def describe(device: torch.device) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return f"device {device} ({name}), torch {torch.__version__}, {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> None:
    opts = options(argv)
    data_dir = bench_data_dir()
    began = time.perf_counter()
    sections = [f"# Device check\n\n{describe(opts.device)}, dataset {opts.dataset}\n"]
    sections.append("## Parity with the CPU\n\n" + "\n".join(parity(opts, data_dir)))
    lines, runs = step_time(opts, data_dir)
    sections.append("## Step time against plain PyTorch\n\n" + "\n".join(lines))
    sections.append("## Packing\n\n" + "\n".join(packing(opts)))
    sections.append("## bf16 against fp32\n\n" + "\n".join(precision_lines(runs)))
    sections.append(f"Total: {time.perf_counter() - began:.0f} s.")
    text = "\n\n".join(sections) + "\n"
    print(text)
    if opts.out is not None:
        opts.out.write_text(text)


if __name__ == "__main__":
    main()
