"""The transfer method: the source mask on a fresh initialisation, and baseline masks."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.errors import UserError
from archsearch.core.export import tensors_from_bytes
from archsearch.core.methods import prune, transfer
from archsearch.core.models import Architecture, create_model
from archsearch.core.pruning.baselines import (
    _imp_steps,
    magnitude_masks,
    random_masks,
    reshuffle_masks,
)
from archsearch.specs import parse_job_spec

SMALL = {"name": "mlp", "hidden": [32, 16]}


@pytest.fixture(scope="module")
def source(data_dirs: tuple[Path, ...]):
    spec = parse_job_spec(
        {
            "method": "prune",
            "dataset": {"name": "digits"},
            "model": SMALL,
            "density": 0.2,
            "training": {"epochs": 3},
            "baselines": ["magnitude"],
        }
    )
    data = load_dataset(spec.dataset, data_dirs)
    ctx = InMemoryContext()
    prune.run(spec, data, ctx)
    return ctx.artifacts


def transfer_spec(**fields):
    return parse_job_spec(
        {
            "method": "transfer",
            "source_job": "src",
            "dataset": {"name": "digits", "samples_per_class": 5},
            **fields,
        }
    )


def test_transfer_uses_mask_and_fresh_initialisation(source, data_dirs) -> None:
    spec = transfer_spec(
        first_layer="masked",
        training={"epochs": 1, "seed": 7, "optimizer": {"name": "sgd", "lr": 1e-9, "momentum": 0}},
    )
    assert spec.referenced_jobs() == ["src"]
    data = load_dataset(spec.dataset, data_dirs, seed=7)
    assert len(data.x_train) == 50, "few-shot: 5 samples per class"
    ctx = InMemoryContext(other_jobs={"src": source})
    transfer.run(spec, data, ctx)
    masks = tensors_from_bytes(source["mask.safetensors"])
    new = tensors_from_bytes(ctx.artifacts["model.safetensors"])
    old = tensors_from_bytes(source["model.safetensors"])
    torch.manual_seed(7)  # the transfer job's seed: an independent fresh init of the parent
    fresh = create_model(Architecture.from_json(source["architecture.json"])).state_dict()
    for name, mask in masks.items():
        w = new[f"{name}.weight"]
        assert torch.equal(w != 0, mask), "the support is exactly the source mask"
        assert torch.allclose(w, fresh[f"{name}.weight"] * mask, atol=1e-6), (
            "fresh init, not old weights"
        )
        assert not torch.allclose(w, old[f"{name}.weight"]), "the source's weights are not reused"


@pytest.mark.parametrize("mask", ["random", "reshuffle", "magnitude"])
def test_transfer_baseline_masks_have_the_same_density(source, data_dirs, mask: str) -> None:
    spec = transfer_spec(mask=mask, training={"epochs": 2})
    ctx = InMemoryContext(other_jobs={"src": source})
    result = transfer.run(spec, load_dataset(spec.dataset, data_dirs), ctx)
    learned = tensors_from_bytes(source["mask.safetensors"])
    used = tensors_from_bytes(ctx.artifacts["mask.safetensors"])
    total = sum(m.numel() for m in learned.values())
    assert sum(int(m.sum()) for m in used.values()) == pytest.approx(
        sum(int(m.sum()) for m in learned.values()), abs=1
    )
    assert result.metrics["density"] == pytest.approx(0.2, abs=1 / total + 1e-9)
    if mask == "reshuffle":
        for name in learned:
            assert int(used[name].sum()) == int(learned[name].sum()), (
                "reshuffle keeps layer densities"
            )
            assert not torch.equal(used[name], learned[name])


def test_transfer_without_baseline_artifact_explains(source, data_dirs) -> None:
    spec = transfer_spec(mask="imp")
    with pytest.raises(UserError, match="baselines"):
        transfer.run(
            spec, load_dataset(spec.dataset, data_dirs), InMemoryContext(other_jobs={"src": source})
        )
    with pytest.raises(UserError, match="source_job"):
        transfer.run(
            parse_job_spec({"method": "transfer", "dataset": {"name": "digits"}}),
            load_dataset(spec.dataset, data_dirs),
            InMemoryContext(),
        )


def test_baseline_mask_functions() -> None:
    generator = torch.Generator().manual_seed(0)
    like = {"a": torch.zeros(10, 20, dtype=torch.bool), "b": torch.zeros(5, 10, dtype=torch.bool)}
    rnd = random_masks(like, 0.1, generator)
    assert sum(int(m.sum()) for m in rnd.values()) == 25
    weights = {"a": torch.randn(10, 20), "b": 10 * torch.randn(5, 10)}
    mag = magnitude_masks(weights, 0.2)
    flat = torch.cat([w.abs().flatten() for w in weights.values()])
    threshold = flat.sort(descending=True).values[49]
    for name, w in weights.items():
        assert torch.equal(mag[name], w.abs() >= threshold), "global magnitude: the 50 largest |w|"
    shuffled = reshuffle_masks(mag, generator)
    assert all(int(shuffled[n].sum()) == int(mag[n].sum()) for n in mag)
    steps = _imp_steps([0.5, 0.1], 0.2)
    assert steps[:4] == pytest.approx([0.8, 0.64, 0.512, 0.5]) and steps[-1] == 0.1
    assert all(b >= 0.8 * a - 1e-12 for a, b in zip(steps, steps[1:], strict=False)), (
        "at most 20% per round"
    )


def test_default_budget_is_steps_and_mask_is_the_learned_one(source, data_dirs) -> None:
    spec = transfer_spec()
    assert spec.steps == 1000 and spec.first_layer == "masked"
    assert transfer_spec(training={"epochs": 3}).steps is None, "explicit epochs win"
    data = load_dataset(spec.dataset, data_dirs)
    ctx = InMemoryContext(other_jobs={"src": source})
    result = transfer.run(spec, data, ctx)
    assert result.metrics["train_steps"] == pytest.approx(1000, rel=0.1)
    assert len(result.history) <= 2 * transfer.EVALUATIONS
    learned = tensors_from_bytes(source["mask.safetensors"])
    used = tensors_from_bytes(ctx.artifacts["mask.safetensors"])
    assert set(used) == set(learned)
    for name in learned:
        assert torch.equal(used[name], learned[name]), "mask: learned is the learned mask"
    assert result.metrics["predicted_classes"] == 10 and result.warnings == []


def test_reshuffled_first_layer_is_an_explicit_option(source, data_dirs) -> None:
    spec = transfer_spec(first_layer="reshuffled", training={"epochs": 1})
    ctx = InMemoryContext(other_jobs={"src": source})
    transfer.run(spec, load_dataset(spec.dataset, data_dirs), ctx)
    learned = tensors_from_bytes(source["mask.safetensors"])
    used = tensors_from_bytes(ctx.artifacts["mask.safetensors"])
    assert int(used["layers.0"].sum()) == int(learned["layers.0"].sum())
    assert not torch.equal(used["layers.0"], learned["layers.0"])
    assert torch.equal(used["layers.1"], learned["layers.1"])


@pytest.fixture(scope="module")
def mnist_source(data_dirs: tuple[Path, ...]):
    spec = parse_job_spec(
        {
            "method": "prune",
            "dataset": {"name": "mnist", "train_subset": 2000},
            "model": SMALL,
            "density": 0.2,
            "training": {"epochs": 3},
        }
    )
    ctx = InMemoryContext()
    prune.run(spec, load_dataset(spec.dataset, data_dirs), ctx)
    return ctx.artifacts


@pytest.mark.parametrize(
    ("name", "first_layer", "least"),
    [("mnist", None, 0.7), ("fashion_mnist", None, 0.6), ("digits", "dense", 0.7)],
)
def test_default_transfer_learns_on_every_dataset(
    mnist_source, data_dirs, name: str, first_layer: str | None, least: float
) -> None:
    fields = {} if first_layer is None else {"first_layer": first_layer}  # digits: 8x8 inputs
    spec = parse_job_spec(
        {
            "method": "transfer",
            "source_job": "src",
            "dataset": {"name": name, "samples_per_class": 20},
            **fields,
        }
    )
    data = load_dataset(spec.dataset, data_dirs)
    result = transfer.run(spec, data, InMemoryContext(other_jobs={"src": mnist_source}))
    assert math.isfinite(result.metrics["test_loss"])
    assert result.metrics["test_accuracy"] >= least, "a collapsed model scores about 0.1"
    assert result.warnings == []
