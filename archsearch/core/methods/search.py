"""The `search` method: Discovering Neural Wirings (Wortsman et al., 2019), Algorithm 1.

The wiring of a neural graph (its k real edges) is learned together with the weights: the
forward pass uses the top-k |w| admissible edges, the backward pass reaches every edge
(straight-through top-k, `core.nn.topk`). `search.strategy` selects DNW or one of the
paper's baselines (section 3.3). The result is saved as the full masked model and as a
compact model with dead nodes and their ops removed (section 2.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from archsearch.core import charts
from archsearch.core.context import Result, RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.deploy import Deployable, write_deployment
from archsearch.core.evaluation import evaluate, evaluate_predictions
from archsearch.core.export import count_parameters, json_bytes, save_model
from archsearch.core.models import Architecture, create_model
from archsearch.core.quality import prediction_check
from archsearch.core.search.compact import compact_architecture, compact_model, model_macs
from archsearch.core.search.report import adjacency_png, graph_json, mask_bytes, swaps_png
from archsearch.core.search.strategies import EdgeController, searchable_edges
from archsearch.core.training import TrainHooks, fit, seed_everything, steps_per_epoch
from archsearch.specs import SearchJob, TrainingSpec
from archsearch.specs.budget import DENSE_FIRST


@dataclass
class Wiring:
    """The training history, and whether its last test evaluation saw the final model."""

    history: list[dict[str, float]]
    evaluated: bool


def run(spec: SearchJob, data: Dataset, ctx: RunContext) -> Result:
    """Search the wiring of `spec.model` on `data`; save masks, graph, plots and models."""
    architecture = Architecture(spec.model, data.input_shape, data.num_classes)
    seed_everything(spec.training.seed)
    model = create_model(architecture).to(ctx.device)
    budgets = [layer.k for layer in searchable_edges(model)]
    if spec.search.strategy == "complete":
        budgets = [int(layer.admissible.sum()) for layer in searchable_edges(model)]
    wiring = train_wiring(model, spec, data, ctx, budgets)
    return finish(model, architecture, spec, data, ctx, wiring)


def train_wiring(
    model: nn.Module, spec: SearchJob, data: Dataset, ctx: RunContext, budgets: list[int]
) -> Wiring:
    """Train with the strategy's edge selection; returns the per-epoch history (and whether
    its last test evaluation still holds for the final model)."""
    strategy = spec.search.strategy
    per_epoch = steps_per_epoch(len(data.x_train), spec.training.batch_size)
    if strategy not in DENSE_FIRST:
        controller = EdgeController(
            model, spec.search, "search", per_epoch * spec.training.epochs, budgets
        )
        controller.setup()
        outcome = fit(model, data, spec.training, ctx, hooks=controller.hooks(), phase="search")
        return Wiring(outcome.history, evaluated=not controller.finish())
    return _dense_then_sparse(model, spec, data, ctx, budgets, per_epoch)


def _dense_then_sparse(
    model: nn.Module,
    spec: SearchJob,
    data: Dataset,
    ctx: RunContext,
    budgets: list[int],
    per_epoch: int,
) -> Wiring:
    """lottery_one_shot / fine_tune: train the complete graph, keep the top-k, retrain."""
    dense_epochs = spec.search.dense_epochs or spec.training.epochs
    dense_history: list[dict[str, float]] = []
    dense = EdgeController(model, spec.search, "dense", per_epoch * dense_epochs, budgets)
    dense.setup()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    saved = ctx.load_checkpoint()
    if not (saved is not None and saved.get("phase") == "sparse"):
        outcome = fit(
            model, data, spec.training, ctx, hooks=dense.hooks(), phase="dense", epochs=dense_epochs
        )
        dense_history = [{**row, "sparse_phase": 0.0} for row in outcome.history]
    sparse = EdgeController(model, spec.search, "sparse", per_epoch * spec.training.epochs, budgets)
    sparse.setup()  # the top-k of the dense weights
    training = _sparse_phase_training(model, spec, init)
    outcome = fit(model, data, training, ctx, hooks=_keeping(sparse, dense_history), phase="sparse")
    changed = sparse.finish()
    history = dense_history + [{**row, "sparse_phase": 1.0} for row in outcome.history]
    return Wiring(history, evaluated=not changed)


def _sparse_phase_training(
    model: nn.Module, spec: SearchJob, init: dict[str, torch.Tensor]
) -> TrainingSpec:
    """lottery_one_shot rewinds the weights (Frankle et al.); fine_tune lowers the rate."""
    training = spec.training
    if spec.search.strategy == "lottery_one_shot":
        # Rewind every weight to its initial value; the masks stay.
        model.load_state_dict(
            {k: v for k, v in init.items() if not k.endswith("edges.mask")}, strict=False
        )
        return training
    lr = spec.search.fine_tune_lr or spec.training.optimizer.lr / 10
    return training.model_copy(
        update={"optimizer": training.optimizer.model_copy(update={"lr": lr})}
    )


def _keeping(controller: EdgeController, dense_history: list[dict[str, float]]) -> TrainHooks:
    """The sparse phase's hooks, with the dense phase's history kept in its checkpoints."""
    hooks = controller.hooks()
    hooks.extra_state = lambda: {"dense_history": dense_history}

    def load_extra(state: dict[str, Any]) -> None:
        dense_history[:] = state.get("dense_history", [])

    hooks.load_extra_state = load_extra
    return hooks


def finish(
    model: nn.Module,
    architecture: Architecture,
    spec: SearchJob,
    data: Dataset,
    ctx: RunContext,
    wiring: Wiring,
) -> Result:
    """Evaluate, compact and save everything a user downloads."""
    history = wiring.history
    test_loss, test_acc = final_test(model, data, ctx, wiring)
    compact, compact_arch = compact_model(model, architecture)
    compact_loss, compact_acc, counts = evaluate_predictions(
        compact, data.x_test, data.y_test, ctx.device
    )
    _, keeps = compact_architecture(model, architecture)
    save_model(ctx, model, architecture)
    save_model(ctx, compact, compact_arch, suffix="-compact")
    deployable = Deployable(compact, compact_arch, model, architecture, compact_acc, "-compact")
    deployed = write_deployment(ctx, data, deployable, "search", spec)
    ctx.save_artifact("mask.safetensors", mask_bytes(model), "application/octet-stream")
    ctx.save_artifact(
        "graph.json", json_bytes(graph_json(model, keeps, spec.search.strategy)), "application/json"
    )
    ctx.save_artifact("adjacency.png", adjacency_png(model), "image/png")
    title = f"search ({spec.search.strategy})"
    ctx.save_artifact("swaps.png", swaps_png(history, title), "image/png")
    ctx.save_chart("curves.png", charts.curves(history, title))
    metrics = {
        "test_accuracy": test_acc,
        "test_loss": test_loss,
        "compact_test_accuracy": compact_acc,
        "compact_test_loss": compact_loss,
        **_graph_counts(model, compact, architecture, keeps),
    }
    # The compact model is the one a user deploys; it computes what the masked one does.
    quality, warnings = prediction_check(
        compact, data, ctx.device, compact_acc, compact_loss, counts
    )
    return Result(metrics={**metrics, **deployed, **quality}, history=history, warnings=warnings)


def _graph_counts(
    model: nn.Module, compact: nn.Module, architecture: Architecture, keeps: list[torch.Tensor]
) -> dict[str, float]:
    layers = searchable_edges(model)
    return {
        "real_edges": float(sum(layer.num_real() for layer in layers)),
        "admissible_edges": float(sum(int(layer.admissible.sum()) for layer in layers)),
        "parameters": float(count_parameters(compact)),
        "macs": float(model_macs(compact, architecture.input_shape)),
        "masked_model_macs": float(model_macs(model, architecture.input_shape)),
        "removed_nodes": float(sum(int((~k).sum()) for k in keeps)),
    }


def final_test(
    model: nn.Module, data: Dataset, ctx: RunContext, wiring: Wiring
) -> tuple[float, float]:
    """Test loss and accuracy of the masked model: the training loop's last evaluation when
    it saw this very model (no mask changed after it), else a new test pass."""
    last = wiring.history[-1] if wiring.history else {}
    if wiring.evaluated and "test_loss" in last and "test_accuracy" in last:
        return last["test_loss"], last["test_accuracy"]
    return evaluate(model, data.x_test, data.y_test, ctx.device)
