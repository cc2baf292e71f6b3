"""The `train` method: a dense model trained with the spec's optimiser and schedule.

This is the baseline against which every search, prune and grow result is compared.
"""

from __future__ import annotations

from torch import nn

from archsearch.core import charts
from archsearch.core.context import Result, RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.deploy import registry_deployable, write_deployment
from archsearch.core.errors import TrialPruned
from archsearch.core.export import count_macs, count_parameters, save_model
from archsearch.core.models import Architecture, create_model
from archsearch.core.quality import prediction_check
from archsearch.core.training import fit, seed_everything
from archsearch.specs import TrainJob


def run(spec: TrainJob, data: Dataset, ctx: RunContext) -> Result:
    """Train `spec.model` on `data` and save the model, its architecture and curves."""
    architecture = Architecture(spec.model, data.input_shape, data.num_classes)
    seed_everything(spec.training.seed)
    model = create_model(architecture)
    try:
        outcome = fit(model, data, spec.training, ctx)
    except TrialPruned as pruned:  # a study's pruner stopped it: keep the model it reached
        save_model(ctx, model, architecture)
        pruned.metrics.update(_size(model, architecture))
        raise
    save_model(ctx, model, architecture)
    ctx.save_chart("curves.png", charts.curves(outcome.history, "train"))
    metrics = {
        "test_accuracy": outcome.test_accuracy,
        "test_loss": outcome.test_loss,
        **_size(model, architecture),
    }
    deployable = registry_deployable(model, architecture, outcome.test_accuracy)
    metrics.update(write_deployment(ctx, data, deployable, "train", spec))
    quality, warnings = prediction_check(
        model, data, ctx.device, outcome.test_accuracy, outcome.test_loss, outcome.predicted_counts
    )
    return Result(metrics={**metrics, **quality}, history=outcome.history, warnings=warnings)


def _size(model: nn.Module, architecture: Architecture) -> dict[str, float]:
    return {
        "parameters": float(count_parameters(model)),
        "macs": float(count_macs(model, architecture.input_shape)),
    }
