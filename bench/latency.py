"""A job's latency figures on a quiet machine and under a full 2-core burn, side by side.

Each case is the deployment step a job ends with (`core.deploy.write_deployment`: per-layer
forms, latencies at batch 1 and 64, the ONNX export and its onnxruntime latency) run on the
same model, round after round, alternately with the machine quiet and with `--burn` other
processes spinning (two: every core of a 2-core worker busy). Printed per figure: the median
over rounds quiet and burning and their ratio burn / quiet (goal: within 20%), the worst
single round's ratio, and the same for the wall-clock median measured beside it (what
latency meant before it was the fastest call's CPU time, `core.deploy.latency`). Cases:
`train` jobs' default MLP [256, 128] on digits (the 50k-weight model of the issue) and on
MNIST, and the MNIST MLP with 90% of its weights zero (a pruned model: sparse kernels in its
forms).

    PYTHONPATH=$PWD python bench/latency.py [--rounds 3] [--burn 2] [--cases digits,mnist]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data_dir import bench_data_dir  # noqa: E402

from archsearch.core.context import InMemoryContext  # noqa: E402
from archsearch.core.data.loaders import Dataset, load_dataset  # noqa: E402
from archsearch.core.deploy import registry_deployable, write_deployment  # noqa: E402
from archsearch.core.models import Architecture, create_model  # noqa: E402
from archsearch.specs import TrainJob, parse_job_spec  # noqa: E402

Figures = dict[str, float]  # "pytorch batch_1 dense" -> ms (CPU), "... wall" -> ms (wall)


def spin() -> None:
    while True:
        pass


@contextmanager
def burning(processes: int) -> Iterator[None]:
    """`processes` busy loops for the duration (the ones this bench started, ended by it)."""
    burners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(processes)]
    for burner in burners:
        burner.start()
    time.sleep(0.2)  # the scheduler has spread them over the cores
    try:
        yield
    finally:
        for burner in burners:
            burner.terminate()
            burner.join()


def sparsify(model: nn.Module, density: float) -> nn.Module:
    """Every Linear layer keeps a random `density` of its weights (the rest exactly zero)."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for layer in model.modules():
            if isinstance(layer, nn.Linear):
                layer.weight.mul_(torch.rand(layer.weight.shape, generator=generator) < density)
    return model


def case(name: str) -> tuple[TrainJob, Dataset, nn.Module, Architecture]:
    dataset = "digits" if name == "digits" else "mnist"
    spec = parse_job_spec({"method": "train", "dataset": {"name": dataset}})
    assert isinstance(spec, TrainJob)
    data = load_dataset(spec.dataset, (bench_data_dir(),))
    arch = Architecture(spec.model, data.input_shape, data.num_classes)
    torch.manual_seed(0)
    model = create_model(arch).eval()
    return spec, data, sparsify(model, 0.1) if name == "mnist-d0.1" else model, arch


def figures(deployment: dict) -> Figures:  # type: ignore[type-arg]
    """The latency figures of one deployment.json, in ms; variants measured once."""
    out: Figures = {}
    same = deployment["same_network"]
    for batch, row in deployment["latency"].items():
        for variant in ("dense", "compact", "sparse"):
            if variant not in same:
                out[f"pytorch {batch} {variant}"] = row[f"{variant}_s"] * 1e3
                out[f"pytorch {batch} {variant} wall"] = row[f"{variant}_wall_s"] * 1e3
    onnx = deployment["onnx"].get("latency", {})
    for batch in ("batch_1", "batch_64"):
        if f"{batch}_s" in onnx:
            out[f"onnx {batch}"] = onnx[f"{batch}_s"] * 1e3
            out[f"onnx {batch} wall"] = onnx[f"{batch}_wall_s"] * 1e3
    return out


def deploy_once(name: str) -> Callable[[], tuple[Figures, float]]:
    spec, data, model, arch = case(name)
    deployable = registry_deployable(model, arch, 0.0)

    def run() -> tuple[Figures, float]:
        ctx = InMemoryContext()
        start = time.perf_counter()
        write_deployment(ctx, data, deployable, "train", spec)
        took = time.perf_counter() - start
        return figures(json.loads(ctx.artifacts["deployment.json"])), took

    return run


def measure(name: str, rounds: int, burn: int) -> None:
    run = deploy_once(name)
    run()  # warm: first-call costs (the exporter's imports) are no figure's
    quiet: list[Figures] = []
    busy: list[Figures] = []
    took: list[float] = []
    for _ in range(rounds):
        figures_quiet, seconds = run()
        quiet.append(figures_quiet)
        took.append(seconds)
        with burning(burn):
            busy.append(run()[0])
    print(f"\n== {name}: write_deployment {statistics.median(took):.3f} s quiet (median) ==")
    print(f"{'figure':34} {'quiet ms':>10} {'burn ms':>10} {'burn/quiet':>10} {'worst round':>11}")
    for figure in quiet[0]:
        q = statistics.median(r[figure] for r in quiet)
        b = statistics.median(r[figure] for r in busy)
        ratios = [bb[figure] / qq[figure] for qq, bb in zip(quiet, busy, strict=True)]
        worst = max(ratios, key=lambda r: abs(r - 1))
        print(f"{figure:34} {q:10.4f} {b:10.4f} {b / q:10.2f} {worst:11.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burn", type=int, default=2, help="busy processes while burning")
    parser.add_argument("--cases", default="digits,mnist,mnist-d0.1")
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} torch threads in this process, "
        f"{multiprocessing.cpu_count()} CPUs; {args.rounds} rounds, {args.burn} burning; "
        "figures: the fastest call's thread CPU time (1 thread); "
        "'wall': the calls' median wall clock"
    )
    for name in args.cases.split(","):
        measure(name, args.rounds, args.burn)


if __name__ == "__main__":
    main()
