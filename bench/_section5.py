"""The weight-free paper's own experiment ("Disentangling Neural Architectures and Weights",
section 5, Figure 4), run through the engine the way a worker runs an upload.

As the paper runs it: binary tasks between two groups of classes, a test set of 50 objects
per class (here per group), three small training-set sizes, I-dimensional unit-norm inputs
(images cropped by 2 pixels a side and mean-pooled over 3x3 windows: 8x8 = 64 values), the
network of eq. (11): two I x I layers with tanh, AUC of the score, median and quartiles over
seeds. Rows:

- bin: a `prune` job with `weights: free` (Algorithm 1; M_hard = infinity, the exact binary
  forward, M_soft = 5 as the paper's M_hard / 10), on that network;
- bin -> real: the same job's `finetune_epochs` (fresh real weights on the found support);
- real (R+): the same network with w = u^2 (non-negative, the paper's footnote 11), trained
  by the engine's `fit`;
- real: a `train` job of the same network (unconstrained weights; an extra row);
- random: w = u^2, u ~ N(0, 1), untrained;
- agnostic: the best (training loss) of random architectures B(u^2 - xi) at a random
  percentile xi, each with the best of a few shared weights u0 ~ N(0, 1).

Tuning: every trained row gets the same step-size sweep (`LRS`, the engine's defaults inside
it: Adam 1e-3 for real weights, 1e-2 for the mask logits): bin's `mask_lr` (with bin ->
real's fine-tuning lr, one prune job per value), real (R+)'s and real's Adam lr. Each row
keeps the value with the best AUC on a validation set of VAL_PER_GROUP objects per group
drawn apart from the training and test objects, and reports its test AUC.

Deviations, printed with the table: the engine's networks end in a (masked) linear layer to
two logits trained with cross-entropy, where eq. (11) sums the last layer's units into
softplus and minimises the linear loss (12); the score is logit_1 - logit_0 (AUC is invariant
to softplus, a monotone map). bin -> real trains unconstrained weights on the support (the
paper: R+). Class groups: MNIST {1,2,3} vs {4,5,6} (the paper's Figure 3), Fashion-MNIST
{0,2} (T-shirt, pullover) vs {4,6} (coat, shirt), and breast_cancer (benign vs malignant).
"""

from __future__ import annotations

import collections
import copy
import functools
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import roc_auc_score
from torch import nn
from torch.nn.utils import parametrize

from archsearch.core.context import InMemoryContext
from archsearch.core.data.catalog import find_idx_files
from archsearch.core.data.idx import read_idx
from archsearch.core.data.uploaded import uploaded_dataset, uploaded_info
from archsearch.core.export import load_model
from archsearch.core.methods import get_method
from archsearch.core.methods import prune as prune_method
from archsearch.core.methods import train as train_method
from archsearch.core.models import Architecture, create_model
from archsearch.core.training import fit, seed_everything
from archsearch.specs import DatasetRef, parse_job_spec
from archsearch.specs.common import TrainingSpec
from archsearch.specs.model_configs import MLPConfig

TASKS = {
    "mnist": ((1, 2, 3), (4, 5, 6)),
    "fashion_mnist": ((0, 2), (4, 6)),
    "breast_cancer": ((1,), (0,)),  # benign vs malignant
}
SIZES = (25, 50, 150)  # training objects per group
TEST_PER_GROUP = 50
VAL_PER_GROUP = 50  # fewer where the pool runs out (breast_cancer's 212 malignant at 150)
LRS = (1e-3, 3e-3, 1e-2, 3e-2)
TUNED_ROWS = ("bin", "bin->real", "real (R+)", "real")
ROWS = ("bin", "bin->real", "real (R+)", "real", "random", "agnostic")
EPOCHS = 40
TRAINING = {"epochs": EPOCHS, "batch_size": 32}
AGNOSTIC_ARCHITECTURES, AGNOSTIC_WEIGHTS = 20, 5


def paper_images(x: np.ndarray) -> np.ndarray:
    """28x28 -> crop 2 a side -> 24x24 -> mean of 3x3 windows -> 64 values, unit norm."""
    crop = x[:, 2:26, 2:26].astype(np.float64)
    pooled = crop.reshape(len(x), 8, 3, 8, 3).mean(axis=(2, 4)).reshape(len(x), 64)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


@functools.cache  # read once per process: reading the IDX files was a third of a cell
def _images(name: str, data_dirs: tuple[Path, ...], split: str) -> tuple[np.ndarray, np.ndarray]:
    files = find_idx_files(name, data_dirs)
    assert files is not None, f"{name} is not in {data_dirs}"
    images, labels = files[f"{split}_images"], files[f"{split}_labels"]
    return paper_images(read_idx(images)), read_idx(labels).astype(np.int64)


def _table(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = x[order], y[order]
    x = (x - x.mean(0)) / x.std(0)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x, y, x, y  # split by index below: disjoint picks from one pool


def _pick(y: np.ndarray, group: tuple[int, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    pool = np.flatnonzero(np.isin(y, group))
    return rng.choice(pool, size=n, replace=False)


@dataclass(frozen=True)
class Task:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray


Scores = tuple[float, float]  # (validation AUC, test AUC)


def make_task(dataset: str, size: int, seed: int, data_dirs: tuple[Path, ...]) -> Task:
    """`size` training and TEST_PER_GROUP test objects per group; label 1 = the first group."""
    rng = np.random.default_rng(seed)
    if dataset == "breast_cancer":
        x_tr, y_tr, x_te, y_te = _table(seed)
    else:
        (x_tr, y_tr), (x_te, y_te) = (_images(dataset, data_dirs, s) for s in ("train", "test"))
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("xa", "ya", "xb", "yb", "xv", "yv")}
    # The validation objects come from their own generator, so that the training and test
    # objects of a seed are the ones the untuned runs drew.
    val_rng = np.random.default_rng(seed + 1_000_003)
    for label, group in zip((1, 0), TASKS[dataset], strict=True):
        train = _pick(y_tr, group, size, rng)
        pool_test = np.flatnonzero(np.isin(y_te, group))
        if dataset == "breast_cancer":  # one pool: the test objects are the others
            pool_test = np.setdiff1d(pool_test, train)
        test = rng.choice(pool_test, size=TEST_PER_GROUP, replace=False)
        pool_val = np.setdiff1d(np.flatnonzero(np.isin(y_tr, group)), train)
        if dataset == "breast_cancer":
            pool_val = np.setdiff1d(pool_val, test)
        val = val_rng.choice(pool_val, size=min(VAL_PER_GROUP, len(pool_val)), replace=False)
        parts["xa"].append(x_tr[train]), parts["ya"].append(np.full(size, label))
        parts["xb"].append(x_te[test]), parts["yb"].append(np.full(TEST_PER_GROUP, label))
        parts["xv"].append(x_tr[val])
        parts["yv"].append(np.full(len(val), label))
    return Task(*(np.concatenate(parts[k]) for k in ("xa", "ya", "xb", "yb", "xv", "yv")))


def upload(task: Task, seed: int) -> Any:
    """The task as the worker loads an upload (already unit norm: mean 0, std 1 stored)."""
    features = task.x_train.shape[1]
    info = uploaded_info(
        "task", "section5", (features,), 2, len(task.y_train), len(task.y_test),
        [0.0] * features, [1.0] * features,
    )  # fmt: skip
    arrays = {
        "x": task.x_train.astype(np.float32), "y": task.y_train,
        "x_test": task.x_test.astype(np.float32), "y_test": task.y_test,
    }  # fmt: skip
    return uploaded_dataset(info, arrays, DatasetRef(name="task"), seed)


def network(width: int) -> dict[str, Any]:
    return {"name": "mlp", "hidden": [width, width], "activation": "tanh"}


def auc(model: nn.Module, data: Any) -> float:
    with torch.no_grad():
        logits = model.eval()(data.x_test[torch.arange(len(data.y_test))])
    return float(roc_auc_score(data.y_test.numpy(), (logits[:, 1] - logits[:, 0]).numpy()))


def val_and_test_auc(model: nn.Module, data: Any, task: Task) -> tuple[float, float]:
    with torch.no_grad():
        logits = model.eval()(torch.as_tensor(task.x_val, dtype=torch.float32))
    score = (logits[:, 1] - logits[:, 0]).numpy()
    return float(roc_auc_score(task.y_val, score)), auc(model, data)


def engine_rows(data: Any, task: Task, width: int, seed: int, lr: float) -> dict[str, Scores]:
    """bin and bin -> real (one prune job, mask_lr = fine-tuning lr = `lr`) and real (a train
    job at Adam `lr`), through the engine: (validation AUC, test AUC) per row."""
    training = {**TRAINING, "seed": seed, "optimizer": {"lr": lr}}
    prune = {
        "method": "prune", "weights": "free", "dataset": {"name": "task"},
        "model": network(width), "temperatures": {"t_hard": 50, "t_soft": 5},
        "finetune_epochs": EPOCHS, "training": training, "mask_lr": lr,
    }  # fmt: skip
    ctx = InMemoryContext()
    get_method("prune")(parse_job_spec(prune), data, ctx)
    art = ctx.artifacts
    finetuned = load_model(art["architecture-finetuned.json"], art["model-finetuned.safetensors"])
    out = {
        "bin": val_and_test_auc(
            load_model(art["architecture.json"], art["model.safetensors"]), data, task
        ),
        "bin->real": val_and_test_auc(finetuned, data, task),
    }
    train = {**prune, "method": "train"}
    for key in ("weights", "temperatures", "finetune_epochs", "mask_lr"):
        train.pop(key)
    ctx = InMemoryContext()
    get_method("train")(parse_job_spec(train), data, ctx)
    art = ctx.artifacts
    model = load_model(art["architecture.json"], art["model.safetensors"])
    out["real"] = val_and_test_auc(model, data, task)
    return out


class Square(nn.Module):
    """w = u^2: the paper's non-negative real weights (footnote 11)."""

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return u * u


def positive_network(data: Any, width: int, std: float | None) -> nn.Module:
    """The eq. (11) network with w = u^2; u ~ N(0, std) (None: 1/sqrt(fan_in)), no bias."""
    config = MLPConfig.model_validate(network(width))
    model = create_model(Architecture(config, data.input_shape, 2))
    for layer in (m for m in model.modules() if isinstance(m, nn.Linear)):
        with torch.no_grad():
            layer.weight.normal_(0.0, std or layer.in_features**-0.5)
            layer.bias.zero_()
        layer.bias.requires_grad_(False)
        parametrize.register_parametrization(layer, "weight", Square())
    return model


def real_positive(data: Any, task: Task, width: int, seed: int, lr: float) -> Scores:
    seed_everything(seed)
    model = positive_network(data, width, None)
    spec = TrainingSpec.model_validate({**TRAINING, "seed": seed, "optimizer": {"lr": lr}})
    params = [p for p in model.parameters() if p.requires_grad]
    fit(model, data, spec, InMemoryContext(), params=params)
    return val_and_test_auc(model, data, task)


def shared_weight_network(data: Any, width: int, mask_seed: torch.Generator) -> nn.Module:
    """A random architecture B(u^2 - xi), xi a random {10, ..., 100}th percentile of u^2."""
    config = MLPConfig.model_validate(network(width))
    model = create_model(Architecture(config, data.input_shape, 2))
    xi = float(torch.randint(1, 11, (), generator=mask_seed).item()) / 10
    with torch.no_grad():
        for layer in (m for m in model.modules() if isinstance(m, nn.Linear)):
            w = torch.randn(layer.weight.shape, generator=mask_seed) ** 2
            layer.weight.copy_((w >= torch.quantile(w, xi)).float())
            layer.bias.zero_()
    return model


def with_shared_weight(model: nn.Module, shared: float) -> nn.Module:
    out = copy.deepcopy(model)
    with torch.no_grad():
        for layer in (m for m in out.modules() if isinstance(m, nn.Linear)):
            layer.weight.mul_(shared)
    return out


def random_and_agnostic(data: Any, width: int, seed: int) -> dict[str, float]:
    """random: w = u^2 untrained; agnostic: the random architecture and shared weight u0 ~
    N(0, 1) with the lowest training loss."""
    torch.manual_seed(seed)
    random = auc(positive_network(data, width, 1.0), data)
    generator = torch.Generator().manual_seed(seed)
    x, y = data.x_train[torch.arange(len(data.y_train))], data.y_train
    candidates = []
    for _ in range(AGNOSTIC_ARCHITECTURES):
        architecture = shared_weight_network(data, width, generator)
        for _ in range(AGNOSTIC_WEIGHTS):
            model = with_shared_weight(architecture, float(torch.randn((), generator=generator)))
            with torch.no_grad():
                candidates.append((F.cross_entropy(model.eval()(x), y).item(), model))
    best = min(candidates, key=lambda pair: pair[0])[1]
    return {"random": random, "agnostic": auc(best, data)}


def skip_deployment() -> None:
    """The jobs' deployment step (ONNX export, latency repeats) does not change the model;
    on a shared 2-core machine it was most of a cell's time, so the bench leaves it out."""
    for module in (prune_method, train_method):
        module.write_deployment = lambda *args, **kwargs: {}  # type: ignore[attr-defined]


def tuned(by_lr: dict[float, dict[str, Scores]]) -> dict[str, float]:
    """Each tuned row's test AUC at its best validation AUC (the first lr on ties), and that
    lr as `lr <row>`."""
    out = {}
    for row in TUNED_ROWS:
        best = max(by_lr, key=lambda lr: by_lr[lr][row][0])
        out[row], out[f"lr {row}"] = by_lr[best][row][1], best
    return out


def one_cell(
    dataset: str, size: int, seed: int, data_dirs: tuple[Path, ...], lrs: tuple[float, ...] = LRS
) -> dict[str, float]:
    """Every row's test AUC for one (dataset, training size, seed), trained rows tuned."""
    torch.set_num_threads(1)
    skip_deployment()
    task = make_task(dataset, size, seed, data_dirs)
    data = upload(task, seed)
    width = task.x_train.shape[1]  # I: the network is I wide
    by_lr = {}
    for lr in lrs:
        by_lr[lr] = engine_rows(data, task, width, seed, lr)
        by_lr[lr]["real (R+)"] = real_positive(data, task, width, seed, lr)
    out = tuned(by_lr)
    out.update(random_and_agnostic(data, width, seed))
    return out


def quartiles(values: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{median:.3f} [{q1:.3f}, {q3:.3f}]"


def _cells(results: dict[tuple[str, int], list[dict[str, float]]]) -> list[tuple[str, int]]:
    return [(d, n) for d in TASKS for n in SIZES if (d, n) in results]


def best_rows(runs: list[dict[str, float]]) -> list[str]:
    """The rows whose median AUC is the highest of the cell (ties within 0.005 included)."""
    medians = {row: statistics.median(r[row] for r in runs) for row in ROWS}
    top = max(medians.values())
    return [row for row, value in medians.items() if value >= top - 0.005]


def print_table(
    results: dict[tuple[str, int], list[dict[str, float]]],
    seconds: float,
    lrs: tuple[float, ...] = LRS,
) -> None:
    seeds = len(next(iter(results.values())))
    print(
        "section 5 of the weight-free paper: test AUC, median [25th, 75th percentile] over "
        f"{seeds} seeds; {TEST_PER_GROUP} test objects per group; {EPOCHS} epochs, batch 32"
    )
    print(
        f"tuning: each of {', '.join(TUNED_ROWS)} swept over lr {list(lrs)} (bin: mask_lr; Adam lr "
        f"otherwise), best by AUC on {VAL_PER_GROUP} validation objects per group, test AUC shown"
    )
    print(
        "deviations: 2-logit linear head + cross-entropy (eq. 11-12: fixed sum, softplus, "
        "linear loss); bin->real unconstrained on the support (paper: R+); the jobs' "
        "deployment step (ONNX, latency) skipped"
    )
    header = f"{'task':22} {'n/group':>7} " + " ".join(f"{row:>22}" for row in ROWS)
    print(header)
    print("-" * len(header))
    wins = 0
    for dataset, size in _cells(results):
        runs = results[dataset, size]
        cells = " ".join(f"{quartiles([r[row] for r in runs]):>22}" for row in ROWS)
        best = best_rows(runs)
        wins += bool({"bin", "bin->real"} & set(best))
        print(f"{dataset:22} {size:>7} {cells}  best: {', '.join(best)}")
    total = len(_cells(results))
    print(f"claim 'bin or bin->real has the best AUC' (paper: all cells but one): {wins}/{total}")
    print_pairs(results)
    print_chosen_lrs(results)
    print(f"total {seconds:.0f} s")


def print_pairs(results: dict[tuple[str, int], list[dict[str, float]]]) -> None:
    """bin against real (R+), the paper's headline comparison: by median, and seed by seed."""
    ahead, lines = 0, []
    for dataset, size in _cells(results):
        runs = results[dataset, size]
        gap = statistics.median(r["bin"] - r["real (R+)"] for r in runs)
        seeds = sum(r["bin"] > r["real (R+)"] for r in runs)
        ahead += statistics.median(r["bin"] for r in runs) > statistics.median(
            r["real (R+)"] for r in runs
        )
        lines.append(
            f"  {dataset} n={size}: median gap {gap:+.3f}, bin ahead in {seeds}/{len(runs)}"
        )
    print(f"claim 'bin beats real (R+)': better median in {ahead}/{len(lines)} cells")
    print("\n".join(lines))


def print_chosen_lrs(results: dict[tuple[str, int], list[dict[str, float]]]) -> None:
    """How often each lr won the validation, per tuned row, over every cell and seed."""
    runs = [r for cell in results.values() for r in cell]
    for row in TUNED_ROWS:
        counts = collections.Counter(r[f"lr {row}"] for r in runs)
        chosen = ", ".join(f"{lr:g}: {n}" for lr, n in sorted(counts.items()))
        print(f"lr chosen for {row}: {chosen} (of {len(runs)} runs)")
