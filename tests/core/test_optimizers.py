"""The engine's optimisers against torch.optim's classes: the same parameters bit for bit
after many steps (with a schedule, gradient clipping and a resume in between), the same
checkpoint format both ways, and no torch._dynamo in a process that ran whole jobs."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import archsearch
from archsearch.core.optimizers import FunctionalOptimizer, LambdaSchedule
from archsearch.core.training import lr_factor
from archsearch.specs.common import ScheduleSpec

STEPS, RESUME_AT, PER_EPOCH = 30, 13, 5
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "sgd momentum nesterov decay": (
        "sgd",
        {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3},
    ),
    "sgd momentum": ("sgd", {"lr": 0.05, "momentum": 0.9}),
    "sgd plain": ("sgd", {"lr": 0.1}),
    "adam": ("adam", {"lr": 3e-3}),
    "adam decay": ("adam", {"lr": 3e-3, "weight_decay": 1e-2}),
    "adamw": ("adamw", {"lr": 3e-3, "weight_decay": 5e-2}),
}
TORCH_CLASSES = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
FACTOR = lr_factor(ScheduleSpec(name="cosine", warmup_epochs=1), STEPS // PER_EPOCH, PER_EPOCH)


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    return [
        (torch.randn(8, 12, generator=generator), torch.randint(0, 3, (8,), generator=generator))
        for _ in range(STEPS)
    ]


def ours(kind: str, hyper: dict[str, Any], net: nn.Module, fused: bool) -> tuple[Any, Any]:
    optimizer = FunctionalOptimizer(kind, net.parameters(), fused=fused, **hyper)  # type: ignore[arg-type]
    return optimizer, LambdaSchedule(optimizer, FACTOR)


def torchs(kind: str, hyper: dict[str, Any], net: nn.Module, fused: bool) -> tuple[Any, Any]:
    optimizer = TORCH_CLASSES[kind](net.parameters(), fused=fused, **hyper)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, FACTOR)


Maker = Callable[[str, dict[str, Any], nn.Module, bool], tuple[Any, Any]]


def through_bytes(state: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint as the engine stores it (`core.context.checkpoint_to_bytes`)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)  # type: ignore[no-any-return]


def train(config: str, fused: bool, first: Maker, resumed: Maker) -> tuple[nn.Module, dict, dict]:
    """STEPS steps; at RESUME_AT, model, optimiser and schedule go through a checkpoint into
    fresh objects made by `resumed`. Returns the model and both final state dicts."""
    kind, hyper = CONFIGS[config]
    net = model()
    optimizer, schedule = first(kind, hyper, net, fused)
    for step, (x, y) in enumerate(batches()):
        if step == RESUME_AT:
            saved = through_bytes(
                {
                    "model": net.state_dict(),
                    "opt": optimizer.state_dict(),
                    "lr": schedule.state_dict(),
                }
            )
            net = model()
            net.load_state_dict(saved["model"])
            optimizer, schedule = resumed(kind, hyper, net, fused)
            optimizer.load_state_dict(saved["opt"])
            schedule.load_state_dict(saved["lr"])
        optimizer.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        nn.utils.clip_grad_norm_(net.parameters(), 0.5)
        optimizer.step()
        schedule.step()
    return net, optimizer.state_dict(), schedule.state_dict()


def assert_same_state(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for index, values in a["state"].items():
        assert values.keys() == b["state"][index].keys()
        for key, value in values.items():
            other = b["state"][index][key]
            assert value.dtype == other.dtype and value.device == other.device, key
            assert torch.equal(value, other), (index, key)


@pytest.mark.parametrize("fused", [False, True], ids=["per-tensor", "fused"])
@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize(
    "first, resumed",
    [(torchs, torchs), (ours, ours), (torchs, ours), (ours, torchs)],
    ids=["torch", "ours", "torch checkpoint resumed by ours", "ours resumed by torch"],
)
def test_updates_and_checkpoints_are_torch_optims(
    config: str, fused: bool, first: Maker, resumed: Maker
) -> None:
    reference, reference_state, reference_lr = train(config, fused, torchs, torchs)
    net, state, lr = train(config, fused, first, resumed)
    for (name, p), q in zip(net.named_parameters(), reference.parameters(), strict=True):
        assert torch.equal(p, q), f"{name} differs from torch.optim after {STEPS} steps"
    assert_same_state(state, reference_state)
    assert lr == reference_lr


def test_the_schedule_sets_the_rates_lambda_lr_sets() -> None:
    rates = {}
    for name, make in (("ours", ours), ("torch", torchs)):
        optimizer, schedule = make("adam", {"lr": 0.01}, model(), False)
        rates[name] = [optimizer.param_groups[0]["lr"]]
        for _ in range(STEPS):
            optimizer.step()  # no gradients: nothing moves, but LambdaLR wants a step first
            schedule.step()
            rates[name].append(optimizer.param_groups[0]["lr"])
    assert rates["ours"] == rates["torch"]
    assert rates["ours"][0] == 0.01 * FACTOR(0) != rates["ours"][PER_EPOCH]


def test_a_checkpoint_of_another_shape_is_refused_as_torch_refuses_it() -> None:
    optimizer = FunctionalOptimizer("adam", model().parameters())
    other = FunctionalOptimizer("adam", nn.Linear(2, 2).parameters())
    with pytest.raises(ValueError, match="doesn't match the size"):
        optimizer.load_state_dict(other.state_dict())


NO_DYNAMO_JOBS = """
import sys
from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.methods import get_method
from archsearch.specs import parse_job_spec

for method in ("train", "prune", "grow"):
    spec = parse_job_spec(
        {"method": method, "dataset": {"name": "digits", "train_subset": 300},
         "training": {"epochs": 1}}
    )
    result = get_method(method)(spec, load_dataset(spec.dataset, ()), InMemoryContext())
    print(method, "ran;", "torch._dynamo" in sys.modules)
"""


@pytest.mark.slow
def test_whole_jobs_never_import_torch_dynamo() -> None:
    """torch.optim's classes import torch._dynamo and sympy (about 80 MB resident in every
    worker); the engine's optimisers must not, nor anything else a job runs."""
    root = str(Path(archsearch.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", NO_DYNAMO_JOBS], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines == ["train ran; False", "prune ran; False", "grow ran; False"], lines
