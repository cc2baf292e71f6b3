"""bf16 autocast against fp32 training, speed and accuracy side by side in one run.

Each method's default job (`training.precision` set to fp32, then bf16; every other field
the default) runs in this process through the worker's entry point on one device, once
untimed as a warm-up, then in rounds that alternate the two precisions so drift and
neighbours' load hit both alike.
Printed per method: the median wall seconds of each precision, their ratio (bf16 / fp32:
under 1 is a speed-up), and the test accuracy of each (the same seed: the runs differ only
by precision). This is the measurement behind `training.precision: auto` (bf16 on a CUDA
device that supports it, fp32 on CPU): see `docs/gpu.md`.

Run: OMP_NUM_THREADS=1 python bench/precision.py [--device cpu|cuda] [--dataset digits]
     [--methods train,prune] [--rounds 3] [--epochs N]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from _data_dir import bench_data_dir
from _device_jobs import METHODS, JobRun, job_spec, load, run_job


def measure(
    method: str, dataset: str, device: torch.device, rounds: int, epochs: int | None
) -> dict[str, list[JobRun]]:
    runs: dict[str, list[JobRun]] = {"fp32": [], "bf16": []}
    specs = {}
    for precision in runs:
        training: dict[str, object] = {"precision": precision}
        if epochs is not None:
            training["epochs"] = epochs
        specs[precision] = job_spec(method, dataset, {"training": training})
    data = load(specs["fp32"], bench_data_dir())
    for spec in specs.values():  # untimed warm-up: first-call kernel selection and caches
        run_job(spec, data, device)
    for _ in range(rounds):
        for precision, spec in specs.items():
            runs[precision].append(run_job(spec, data, device))
    return runs


def line(method: str, runs: dict[str, list[JobRun]]) -> str:
    fp32 = statistics.median(r.seconds for r in runs["fp32"])
    bf16 = statistics.median(r.seconds for r in runs["bf16"])
    acc32, acc16 = runs["fp32"][-1].test_accuracy, runs["bf16"][-1].test_accuracy
    return (
        f"{method:<7} fp32 {fp32:7.2f}s  bf16 {bf16:7.2f}s  bf16/fp32 {bf16 / fp32:5.2f}x  "
        f"accuracy fp32 {acc32:.4f}  bf16 {acc16:.4f}  diff {100 * (acc16 - acc32):+.2f} points"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--methods", default="train,prune")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=None, help="default: each method's own")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"device {device}, torch threads {torch.get_num_threads()}, dataset {args.dataset}")
    for method in args.methods.split(","):
        assert method in METHODS, f"unknown method {method!r}; one of {', '.join(METHODS)}"
        print(line(method, measure(method, args.dataset, device, args.rounds, args.epochs)))


if __name__ == "__main__":
    main()
