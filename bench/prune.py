"""Benchmark of the prune / transfer methods printed as tables.

1. Temperature ablation of "Differentiable Architecture Pruning" (Figure 1, section 4.1) at
   the engine's defaults: t_soft in {t_hard, t_hard/10, t_hard/100}, density 0.1, on digits
   and an MNIST subset, 3 seeds; then at the paper's setting (SGD, t_hard = 1000, logistic
   regression on MNIST 0 vs 1).
2. Prune on MNIST, transfer to Fashion-MNIST few-shot: AP vs random vs IMP vs reshuffle at
   densities 0.5 / 0.1 / 0.05 over seeds (long: only with --only 2).
3. Weight-free ("Disentangling Neural Architectures and Weights"): `weights: free` at its
   defaults (bin) against the same MLP with real weights (real), 10 classes, 3 seeds, on
   digits, MNIST and Fashion-MNIST subsets; and the binarisation gap of the old relaxed
   forward against the binary one.
4. Granularity at equal parameters: the default MLP and the CNN pruned on an MNIST subset at
   weight granularity (density 0.1) and at unit granularity, the unit density chosen so the
   compact model has as many parameters as the weight-pruned model has nonzero ones (both
   counts printed), 3 seeds (--only 4, a few minutes).

5. RigL (dynamic sparse training) against the learned mask at equal density and epochs, with
   a static random sparse network beside them (`bench/_rigl.py`; only with --only 5). Every
   arm swept alike over `--lr-factors` (0.3x, 1x, 3x the prune job's documented lr), chosen
   per seed on 10% of the training images held apart; `--lr-factors 1`: the untuned run.

Run: python bench/prune.py [--quick] [--only 1|2|3|4|5] [--lr-factors 1]
(default: sections 1 and 3, minutes)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _data_dir import bench_data_dir  # noqa: E402
from _rigl import rigl_benchmark  # noqa: E402  (beside this script)
from _tuning import LR_FACTORS  # noqa: E402

from archsearch.core.context import InMemoryContext  # noqa: E402
from archsearch.core.data.loaders import Dataset, load_dataset  # noqa: E402
from archsearch.core.evaluation import evaluate  # noqa: E402
from archsearch.core.export import load_model, tensors_to_bytes  # noqa: E402
from archsearch.core.float_mode import flush_denormals  # noqa: E402
from archsearch.core.methods import prune, train, transfer  # noqa: E402
from archsearch.core.models import Architecture, create_model  # noqa: E402
from archsearch.core.nn.masked_model import hard_masks, mask_model, set_masks  # noqa: E402
from archsearch.core.pruning.baselines import iterative_magnitude_pruning  # noqa: E402
from archsearch.core.pruning.build import (  # noqa: E402
    build_masked_model,
    plain_model,  # noqa: E402
    weight_params,
)
from archsearch.core.pruning.compact import compact_model  # noqa: E402
from archsearch.core.pruning.units import unit_plan  # noqa: E402
from archsearch.core.training import seed_everything  # noqa: E402
from archsearch.specs import DatasetRef, parse_job_spec  # noqa: E402

DATA_DIRS = (bench_data_dir(),)


def mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f}±{statistics.stdev(values):.3f}"


def two_class(data: Dataset, negative: set[int], positive: set[int]) -> Dataset:
    """Keep the classes of `negative` (label 0) and `positive` (label 1)."""

    def pick(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keep = torch.tensor([int(v) in negative | positive for v in y])
        return x[keep], torch.tensor([int(int(v) in positive) for v in y[keep]])

    x_tr, y_tr = pick(data.x_train, data.y_train)
    x_te, y_te = pick(data.x_test, data.y_test)
    return replace(
        data,
        info=replace(data.info, num_classes=2),
        x_train=x_tr,
        y_train=y_tr,
        x_test=x_te,
        y_test=y_te,
    )


# ---------------------------------------------------------------- 1. temperatures
RATIOS = (("t_hard", 1.0), ("t_hard/10", 10.0), ("t_hard/100", 100.0))


def subset(name: str, seed: int, train: int, test: int) -> tuple[dict[str, Any], Dataset]:
    ref: dict[str, Any] = (
        {"name": name} if name == "digits" else {"name": name, "train_subset": train}
    )
    data = load_dataset(DatasetRef(**ref), DATA_DIRS, seed=seed)
    return ref, replace(data, x_test=data.x_test[:test], y_test=data.y_test[:test])


def ablation_at_defaults(quick: bool) -> None:
    seeds = [0, 1] if quick else [0, 1, 2]
    train_size = 2000
    print(
        "\n## 1a. Temperature ablation at the defaults (t_hard = 100, Adam on the logits, cap, "
        f"adaptive penalty), density 0.1, MLP 256-128, 10 epochs; test accuracy over seeds {seeds}"
    )
    print(f"{'dataset':>14} | " + " | ".join(f"{'t_soft=' + label:>17}" for label, _ in RATIOS))
    for name in ("digits", "mnist"):
        cells = []
        for _, ratio in RATIOS:
            accs = []
            for seed in seeds:
                ref, data = subset(name, seed, train_size, 2000)
                spec = parse_job_spec(
                    {
                        "method": "prune",
                        "dataset": ref,
                        "temperatures": {"t_hard": 100.0, "t_soft": 100.0 / ratio},
                        "training": {"seed": seed},
                    }
                )
                accs.append(prune.run(spec, data, InMemoryContext()).metrics["test_accuracy"])
            cells.append(mean_std(accs))
        label = name if name == "digits" else f"mnist ({train_size})"
        print(f"{label:>14} | " + " | ".join(f"{c:>17}" for c in cells))


def temperature_ablation(quick: bool) -> None:
    data = two_class(load_dataset(DatasetRef(name="mnist"), DATA_DIRS), {0}, {1})
    data = replace(data, x_train=data.x_train[:3000], y_train=data.y_train[:3000])
    gamma = 1e-3
    print(
        "\n## 1b. The paper's setting (Figure 1): logistic regression, MNIST 0 vs 1, t_hard = 1000"
    )
    print(
        f"   SGD on masks (lr 1.0) and weights (lr 0.05), penalty gamma = {gamma} (constant), "
        f"no target, {len(data.x_train)} train images, 2 epochs"
    )
    print(
        f"{'t_soft':>12} | {'objective':>9} | {'train CE':>8} | {'density':>7} | "
        f"{'kept':>5} | {'test acc':>8}"
    )
    for label, t_soft in (("t_hard", 1000.0), ("t_hard/100", 10.0), ("t_hard/1000", 1.0)):
        spec = parse_job_spec(
            {
                "method": "prune",
                "dataset": {"name": "mnist"},
                "density": None,
                "model": {"name": "mlp", "hidden": []},
                "temperatures": {"t_hard": 1000.0, "t_soft": t_soft},
                "penalty": {"schedule": "constant", "gamma": gamma},
                "logit_init": 0.05,
                "mask_optimizer": "sgd",
                "mask_lr": 1.0,
                "training": {
                    "epochs": 2,
                    "batch_size": 64,
                    "schedule": {"name": "constant"},
                    "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.0},
                },
            }
        )
        ctx = InMemoryContext()
        result = prune.run(spec, data, ctx)
        model = load_model(ctx.artifacts["architecture.json"], ctx.artifacts["model.safetensors"])
        train_ce, _ = evaluate(model, data.x_train, data.y_train, torch.device("cpu"))
        kept = result.metrics["density"] * 784 * 2
        objective = train_ce + gamma * kept
        print(
            f"{label:>12} | {objective:9.4f} | {train_ce:8.4f} | "
            f"{result.metrics['density']:7.3f} | {kept:5.0f} | "
            f"{result.metrics['test_accuracy']:8.4f}"
        )


# ---------------------------------------------------------------- 2. transfer
PARENT = {"name": "mlp", "hidden": [300, 100]}
PENALTY: dict[str, Any] = {}


class TimedContext(InMemoryContext):
    """Records when the first and the last progress report arrive: the training span."""

    def report(self, step: int, total: int, **metrics: float) -> None:
        now = time.perf_counter()
        self.first = getattr(self, "first", now)
        self.last = now
        super().report(step, total, **metrics)


def ap_job(density: float, seed: int, epochs: int, subset: int) -> tuple[dict[str, bytes], float]:
    """A prune job; returns its artifacts and its training time (first to last report)."""
    spec = parse_job_spec(
        {
            "method": "prune",
            "dataset": {"name": "mnist", "train_subset": subset},
            "model": PARENT,
            "density": density,
            "penalty": PENALTY,
            "training": {"epochs": epochs, "seed": seed},
        }
    )
    data = load_dataset(spec.dataset, DATA_DIRS, seed=seed)
    ctx = TimedContext()
    prune.run(spec, data, ctx)
    return ctx.artifacts, ctx.last - ctx.first


def imp_jobs(
    densities: list[float],
    seed: int,
    epochs: int,
    subset: int,
    ap_artifacts: dict[float, dict[str, bytes]],
):
    spec = parse_job_spec(
        {
            "method": "prune",
            "dataset": {"name": "mnist", "train_subset": subset},
            "model": PARENT,
            "training": {"epochs": epochs, "seed": seed},
        }
    )
    data = load_dataset(spec.dataset, DATA_DIRS, seed=seed)
    seed_everything(seed)
    model = build_masked_model(spec, Architecture(spec.model, data.input_shape, data.num_classes))
    result = iterative_magnitude_pruning(
        model, data, spec.training, InMemoryContext(), densities, params=weight_params(model)
    )
    jobs = {}
    for d in densities:
        masks = {k: v.to(torch.bool) for k, v in result.masks[d].items()}
        jobs[d] = {**ap_artifacts[d], "mask-imp.safetensors": tensors_to_bytes(masks)}
    return jobs, result


def transfer_accuracy(
    job: dict[str, bytes], mask: str, target: tuple[str, int], seed: int, test_size: int
) -> float:
    dataset, shots = target
    epochs = {10: 60, 50: 25, 500: 6}.get(shots, 10)
    spec = parse_job_spec(
        {
            "method": "transfer",
            "source_job": "src",
            "mask": mask,
            "dataset": {"name": dataset, "samples_per_class": shots},
            "training": {"epochs": epochs, "batch_size": 64, "seed": seed},
        }
    )
    data = load_dataset(spec.dataset, DATA_DIRS, seed=seed)
    data = replace(data, x_test=data.x_test[:test_size], y_test=data.y_test[:test_size])
    result = transfer.run(spec, data, InMemoryContext(other_jobs={"src": job}))
    return result.metrics["test_accuracy"]


def transfer_benchmark(quick: bool) -> None:
    densities = [0.1] if quick else [0.5, 0.1, 0.05]
    seeds = [0] if quick else [0, 1, 2]
    shots_list = [10, 50] if quick else [10, 50, 500]
    # The last row is an in-domain control: new MNIST samples (the few-shot subset is drawn
    # with the transfer seed, so mostly other images than the pruning subset).
    targets = [("fashion_mnist", shots) for shots in shots_list] + [("mnist", 10)]
    epochs, subset, test_size = (2, 6000, 2000) if quick else (4, 12000, 5000)
    masks = ["learned", "random", "imp", "reshuffle"]
    acc: dict[tuple[float, str, tuple[str, int]], list[float]] = {}
    costs: dict[float, dict[str, list[float]]] = {
        d: {"ap_s": [], "imp_s": [], "imp_rounds": []} for d in densities
    }
    for seed in seeds:
        ap = {}
        for d in densities:
            ap[d], seconds = ap_job(d, seed, epochs, subset)
            costs[d]["ap_s"].append(seconds)
        jobs, imp = imp_jobs(densities, seed, epochs, subset, ap)
        for d in densities:
            costs[d]["imp_s"].append(imp.seconds[d])
            costs[d]["imp_rounds"].append(imp.rounds[d])
            for mask in masks:
                for target in targets:
                    acc.setdefault((d, mask, target), []).append(
                        transfer_accuracy(jobs[d], mask, target, seed, test_size)
                    )
        print(f"   (seed {seed} done)", flush=True)
    print(
        "\n## 2. Prune on MNIST (MLP 784-300-100-10, "
        f"{subset} images, {epochs} epochs per training), transfer to Fashion-MNIST few-shot"
    )
    print(
        f"   test accuracy on {test_size} test images of the target, mean±std over seeds {seeds}; "
        "AP = two-temperature pruning (learned mask)"
    )
    header = f"{'density':>7} | {'target':>13} | {'shots/class':>11} | " + " | ".join(
        f"{m if m != 'learned' else 'AP':>11}" for m in masks
    )
    print(header)
    for d in densities:
        for target in targets:
            row = " | ".join(f"{mean_std(acc[(d, m, target)]):>11}" for m in masks)
            print(f"{d:7.2f} | {target[0]:>13} | {target[1]:11d} | {row}")
    print("\n   Training cost of finding the mask (AP: one pass; IMP: one training per round)")
    print(
        f"{'density':>7} | {'AP epochs':>9} | {'IMP rounds':>10} | {'IMP epochs':>10} | "
        f"{'epoch ratio AP/IMP':>18} | "
        f"{'AP train s':>10} | {'IMP s':>7} | {'time ratio AP/IMP':>17}"
    )
    for d in densities:
        c = costs[d]
        rounds = statistics.mean(c["imp_rounds"])
        ap_s, imp_s = statistics.mean(c["ap_s"]), statistics.mean(c["imp_s"])
        print(
            f"{d:7.2f} | {epochs:9d} | {rounds:10.0f} | {rounds * epochs:10.0f} | "
            f"{epochs / (rounds * epochs):18.3f} | "
            f"{ap_s:10.1f} | {imp_s:7.1f} | {ap_s / imp_s:17.3f}"
        )


# ---------------------------------------------------------------- 3. weight-free
REAL_MLP = {"name": "mlp", "hidden": [128], "activation": "relu"}  # the weight-free default


def weight_free_benchmark(quick: bool) -> None:
    seeds = [0, 1] if quick else [0, 1, 2]
    train_size, test_size = 2000, 2000
    print(
        "\n## 3. Weight-free networks at their defaults (bin) vs the same MLP 128 (relu) with "
        f"real weights (real), 10 classes, 10 epochs, test accuracy over seeds {seeds}"
    )
    print(
        f"{'dataset':>20} | {'bin':>11} | {'real':>11} | {'bin - real':>10} | {'bin density':>11}"
    )
    for name in ("digits", "mnist", "fashion_mnist"):
        scores: dict[str, list[float]] = {"bin": [], "real": [], "density": []}
        for seed in seeds:
            ref, data = subset(name, seed, train_size, test_size)
            common = {"dataset": ref, "training": {"seed": seed}}
            free = parse_job_spec({"method": "prune", "weights": "free", **common})
            result = prune.run(free, data, InMemoryContext())
            scores["bin"].append(result.metrics["test_accuracy"])
            scores["density"].append(result.metrics["density"])
            real = parse_job_spec({"method": "train", "model": REAL_MLP, **common})
            scores["real"].append(train.run(real, data, InMemoryContext()).metrics["test_accuracy"])
        gap = statistics.mean(scores["bin"]) - statistics.mean(scores["real"])
        label = name if name == "digits" else f"{name} ({train_size})"
        print(
            f"{label:>20} | {mean_std(scores['bin']):>11} | {mean_std(scores['real']):>11} | "
            f"{gap:10.3f} | {statistics.mean(scores['density']):11.3f}"
        )
    print("\n   Binarisation gap (test accuracy as trained minus after 1[w > 0]), digits, seed 0")
    ref, data = subset("digits", 0, train_size, test_size)
    for forward, init in (("relaxed", "uniform"), ("binary", "normal")):
        spec = parse_job_spec(
            {
                "method": "prune",
                "weights": "free",
                "dataset": ref,
                "forward": forward,
                "mask_init": init,
            }
        )
        metrics = prune.run(spec, data, InMemoryContext()).metrics
        print(
            f"   forward {forward:>7} (mask_init {init:>7}): "
            f"gap {metrics['binarisation_gap']:+.3f}, "
            f"final accuracy {metrics['test_accuracy']:.3f}"
        )


# ---------------------------------------------------------------- 4. granularity
WEIGHT_DENSITY = 0.1
GRANULARITY_MODELS: dict[str, dict[str, Any]] = {
    "mlp 256-128": {"name": "mlp"},
    "cnn 16-32, 64": {"name": "cnn"},
}


def unit_parameters(architecture: Architecture, unit_density: float) -> int:
    """Parameters of the compact model that keeps `unit_density` of every layer's units
    (as the trainer's per-layer threshold does; which units does not change the count)."""
    model = create_model(architecture)
    mask_model(model, units=unit_plan(architecture))
    masks = {}
    for name, like in hard_masks(model).items():
        keep = torch.zeros(like.numel(), dtype=torch.bool)
        keep[: max(1, round(unit_density * like.numel()))] = True
        masks[name] = keep.view(like.shape)
    set_masks(model, masks)
    compacted = compact_model(plain_model(model, architecture).state_dict(), architecture)
    assert compacted is not None, "the unit families compact"
    return sum(p.numel() for p in compacted[0].parameters())


def matching_unit_density(architecture: Architecture, parameters: float) -> float:
    """The unit density (to 1e-3) whose compact parameter count is closest to `parameters`."""
    low, high = 0.001, 1.0
    while high - low > 1e-3:  # the count grows with the unit density
        middle = (low + high) / 2
        if unit_parameters(architecture, middle) < parameters:
            low = middle
        else:
            high = middle
    return min((low, high), key=lambda u: abs(unit_parameters(architecture, u) - parameters))


def granularity_run(
    model: dict[str, Any], granularity: str, density: float, seed: int
) -> tuple[dict[str, float], Architecture, dict[str, Any]]:
    """A prune job's metrics, the architecture it pruned and its compact model's config."""
    ref, data = subset("mnist", seed, 2000, 2000)
    spec = parse_job_spec(
        {
            "method": "prune",
            "dataset": ref,
            "model": model,
            "density": density,
            "granularity": granularity,
            "training": {"seed": seed},
        }
    )
    ctx = InMemoryContext()
    metrics = prune.run(spec, data, ctx).metrics
    compact = json.loads(ctx.artifacts["architecture-compact.json"])["model"]
    return metrics, Architecture(spec.model, data.input_shape, data.num_classes), compact


def dense_run(model: dict[str, Any], seed: int) -> dict[str, float]:
    """A train job of `model` (dense, from scratch) on the same data as `granularity_run`."""
    ref, data = subset("mnist", seed, 2000, 2000)
    spec = parse_job_spec(
        {"method": "train", "dataset": ref, "model": model, "training": {"seed": seed}}
    )
    return train.run(spec, data, InMemoryContext()).metrics


def granularity_rows(model: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """Per arm (weight, unit, dense at the unit job's compact widths): metrics per seed."""
    rows: dict[str, Any] = {"weight": [], "unit": [], "dense": []}
    for seed in seeds:
        metrics, arch, _ = granularity_run(model, "weight", WEIGHT_DENSITY, seed)
        rows["weight"].append(metrics)
        rows["unit_density"] = matching_unit_density(arch, metrics["parameters"])
        unit, _, compact = granularity_run(model, "unit", rows["unit_density"], seed)
        rows["unit"].append(unit)
        rows["dense"].append(dense_run(compact, seed) | {"parameters_compact": float("nan")})
        rows["compact"] = compact
    return rows


def granularity_benchmark(quick: bool) -> None:
    seeds = [0, 1] if quick else [0, 1, 2]
    print(
        "\n## 4. Weight vs unit granularity at equal parameters, MNIST (2000 train / 2000 "
        f"test images), 10 epochs, test accuracy mean±sd over seeds {seeds}; weight density "
        f"{WEIGHT_DENSITY}, unit density matched so the unit job's compact parameters = the "
        "weight job's nonzero ones; dense: the unit job's compact architecture trained alone"
    )
    print(
        f"{'model':>14} | {'arm':>22} | {'density':>7} | {'parameters':>10} | "
        f"{'compact params':>14} | {'MACs':>9} | {'test acc':>11}"
    )
    for label, model in GRANULARITY_MODELS.items():
        rows = granularity_rows(model, seeds)
        widths = [w for key in ("channels", "hidden") for w in rows["compact"].get(key, [])]
        arms = (
            ("weight granularity", "weight", WEIGHT_DENSITY),
            ("unit granularity", "unit", rows["unit_density"]),
            (f"dense {'-'.join(map(str, widths))}", "dense", 1.0),
        )
        for arm, key, density in arms:
            runs = rows[key]
            print(
                f"{label:>14} | {arm:>22} | {density:7.3f} | {runs[0]['parameters']:10,.0f} | "
                f"{runs[0]['parameters_compact']:14,.0f} | {runs[0]['macs']:9,.0f} | "
                f"{mean_std([r['test_accuracy'] for r in runs]):>11}",
                flush=True,
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run (minutes)")
    parser.add_argument("--only", choices=["1", "2", "3", "4", "5"], default=None)
    parser.add_argument("--adapt-rate", type=float, default=None, help="AP penalty controller")
    parser.add_argument(
        "--lr-factors",
        type=float,
        nargs="+",
        default=LR_FACTORS,
        help="--only 5: every arm at these multiples of the prune job's documented lr, chosen "
        "per seed on held-out training rows (1: the untuned run)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the machine is shared
    flush_denormals()  # as every thread that runs jobs does
    if args.adapt_rate is not None:
        PENALTY["adapt_rate"] = args.adapt_rate
    start = time.perf_counter()
    print(f"# bench/prune.py {'--quick' if args.quick else '(full)'}  torch {torch.__version__}")
    if args.only in (None, "1"):
        ablation_at_defaults(args.quick)
        temperature_ablation(args.quick)
    if args.only in (None, "3"):
        weight_free_benchmark(args.quick)
    if args.only == "2":
        transfer_benchmark(args.quick)
    if args.only == "4":
        granularity_benchmark(args.quick)
    if args.only == "5":
        rigl_benchmark(DATA_DIRS, args.quick, tuple(args.lr_factors))
    print(f"\ntotal time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
