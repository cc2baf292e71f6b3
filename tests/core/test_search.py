"""The `search` method end to end: defaults, strategies, artifacts, resume (DNW, Algorithm 1)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.errors import JobCancelled
from archsearch.core.export import load_model, tensors_from_bytes
from archsearch.core.methods import get_method
from archsearch.core.models import Architecture, create_model
from archsearch.core.search.strategies import EdgeController, anneal_k, searchable_edges
from archsearch.core.training import fit, seed_everything, steps_per_epoch
from archsearch.specs import SearchJob, parse_job_spec
from archsearch.specs.graph_model_configs import NeuralGraphConfig


@pytest.fixture(scope="module")
def digits(data_dirs: tuple[Path, ...]) -> Dataset:
    return load_dataset(
        parse_job_spec({"method": "search", "dataset": {"name": "digits"}}).dataset, data_dirs
    )


def _job(**overrides: object) -> SearchJob:
    spec = parse_job_spec({"method": "search", "dataset": {"name": "digits"}, **overrides})
    assert isinstance(spec, SearchJob)
    return spec


def test_default_job_beats_chance_and_returns_a_runnable_compact_model(
    digits: Dataset,
) -> None:
    torch.set_num_threads(1)
    spec = _job()
    ctx = InMemoryContext()
    result = get_method("search")(spec, digits, ctx)  # its speed is bench/search.py's business
    metrics = result.metrics
    assert metrics["test_accuracy"] > 0.8  # chance is 0.1
    assert isinstance(spec.model, NeuralGraphConfig)
    budget = spec.model.edge_budget(digits.input_shape)
    assert metrics["real_edges"] == budget
    assert metrics["compact_test_accuracy"] == pytest.approx(metrics["test_accuracy"])
    assert metrics["macs"] < metrics["masked_model_macs"] or metrics["removed_nodes"] == 0
    for name in (
        "mask.safetensors",
        "graph.json",
        "adjacency.png",
        "swaps.png",
        "model.safetensors",
        "architecture.json",
        "model-compact.safetensors",
        "architecture-compact.json",
    ):
        assert name in ctx.artifacts, name
    masks = tensors_from_bytes(ctx.artifacts["mask.safetensors"])
    assert int(masks["graphs.0.edges.mask"].sum()) == budget
    graph = json.loads(ctx.artifacts["graph.json"])["graphs"][0]
    assert graph["real_edges"] == budget == len(graph["edges"])
    assert all(r["real_edges"] == budget for r in result.history)
    assert result.history[0]["edges_entered"] > 0  # DNW swaps edges ...
    assert (
        result.history[-1]["edges_entered"] < result.history[0]["edges_entered"]
    )  # ... less and less
    # Both downloads rebuild through the registry and agree on every test image.
    full = load_model(ctx.artifacts["architecture.json"], ctx.artifacts["model.safetensors"])
    compact = load_model(
        ctx.artifacts["architecture-compact.json"], ctx.artifacts["model-compact.safetensors"]
    )
    with torch.no_grad():
        torch.testing.assert_close(
            compact(digits.x_test), full(digits.x_test), rtol=1e-4, atol=1e-4
        )
        accuracy = (full(digits.x_test).argmax(1) == digits.y_test).float().mean().item()
    assert accuracy == pytest.approx(metrics["test_accuracy"])


STRATEGIES = ["dnw", "random_graph", "no_update", "l1_anneal", "targeted_dropout", "complete"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_real_edge_count_is_exact_after_every_step(strategy: str, digits: Dataset) -> None:
    spec = _job(search={"strategy": strategy}, training={"epochs": 2, "batch_size": 128})
    seed_everything(0)
    model = create_model(Architecture(spec.model, digits.input_shape, digits.num_classes))
    layers = searchable_edges(model)
    budgets = [layer.k for layer in layers]
    initial = [layer.mask.clone() for layer in layers]
    total = 2 * steps_per_epoch(len(digits.x_train), 128)
    controller = EdgeController(model, spec.search, "search", total, budgets)
    controller.setup()
    hooks = controller.hooks()
    inner = hooks.after_step
    assert inner is not None
    swaps = 0

    def checked_step(step: int) -> None:
        nonlocal swaps
        inner(step)
        for layer, k, first in zip(layers, budgets, initial, strict=True):
            real = layer.mask.bool()
            assert not bool((real & ~layer.admissible).any()), "an inadmissible edge is real"
            expected = {
                "complete": int(layer.admissible.sum()),
                "l1_anneal": anneal_k(k, int(layer.admissible.sum()), (step + 1) / (0.5 * total)),
                "targeted_dropout": None,
            }.get(strategy, k)
            if expected is not None:
                assert layer.num_real() == expected, f"step {step}"
            if strategy == "random_graph":
                assert torch.equal(layer.mask, first), "a random graph never rewires"
            swaps += int((real != first.bool()).sum())

    hooks.after_step = checked_step
    fit(model, digits, spec.training, InMemoryContext(), hooks=hooks, phase="search")
    # Only targeted dropout changes a mask at the end (its pruning to the top-k): for the
    # others the job reuses the last epoch's test evaluation of this very model.
    assert controller.finish() == (strategy == "targeted_dropout")
    if strategy != "complete":
        assert [layer.num_real() for layer in layers] == budgets
    if strategy in ("dnw", "no_update"):
        assert swaps > 0


def _losses(result_history: list[dict[str, float]]) -> list[float]:
    return [row["train_loss"] for row in result_history]


@pytest.mark.parametrize("strategy, stop_epoch", [("dnw", 1), ("lottery_one_shot", 3)])
def test_resume_reproduces_the_remaining_epoch_losses(
    strategy: str, stop_epoch: int, digits: Dataset
) -> None:
    spec = _job(
        search={"strategy": strategy, "dense_epochs": 2},
        training={"epochs": 3, "batch_size": 64, "optimizer": {"name": "sgd", "lr": 0.05}},
    )
    data = replace(digits, x_train=digits.x_train[:400], y_train=digits.y_train[:400])
    run = get_method("search")
    full = run(spec, data, InMemoryContext())
    per_epoch = steps_per_epoch(400, 64) + 1  # step reports plus the end-of-epoch report
    interrupted = InMemoryContext(stop_after_reports=per_epoch * stop_epoch + 2)
    with pytest.raises(JobCancelled):
        run(spec, data, interrupted)
    resumed = run(spec, data, InMemoryContext(checkpoint=interrupted.checkpoint))
    assert len(resumed.history) == len(full.history)
    torch.testing.assert_close(
        torch.tensor(_losses(resumed.history)), torch.tensor(_losses(full.history))
    )
    assert resumed.metrics["test_accuracy"] == pytest.approx(full.metrics["test_accuracy"])
