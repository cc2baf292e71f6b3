"""The `grow` method: "Spotting expressivity bottlenecks and fixing them optimally".

Starts from a tiny MLP (or a previous job's MLP) and adds, every interval of training, the
neurons of Prop. 3.2 with line-searched amplitudes (section 3.3) where the expressivity
bottleneck is. Artifacts: `growth.json` (widths, lambda_k, predicted vs measured loss
decrease, time and parameters per growth step), `model.safetensors` + `architecture.json`
(an ordinary `mlp` with the grown widths), `growth.png` (accuracy against time and against
parameters, beside the same widths trained from scratch for the same time, Figure 6).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from archsearch.core.context import Result, RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.deploy import registry_deployable, write_deployment
from archsearch.core.errors import IncompatibleModelError
from archsearch.core.evaluation import evaluate_predictions, validation_metrics
from archsearch.core.export import (
    count_macs,
    count_parameters,
    figure_png,
    json_bytes,
    kept_figure,
    save_model,
    tensors_from_bytes,
)
from archsearch.core.growth.loop import run_growth
from archsearch.core.growth.schedule import GrowState, architecture_for, hidden_widths
from archsearch.core.growth.timed import train_for_seconds
from archsearch.core.models import Architecture, create_model
from archsearch.core.quality import prediction_check
from archsearch.core.training import seed_everything
from archsearch.specs.grow import GROW_ACTIVATIONS, GrowJob
from archsearch.specs.model_configs import MLPConfig


def run(spec: GrowJob, data: Dataset, ctx: RunContext) -> Result:
    """Grow, train, and save the grown model, its growth log and plots."""
    seed_everything(spec.training.seed)
    model = start_model(spec, data, ctx)
    model, state, final = run_growth(model, data, spec, ctx)
    widths = hidden_widths(model)
    save_model(ctx, model, architecture_for(widths, spec, data))
    # The loop's last row measured these weights already; a second test pass would repeat it.
    test_loss, test_acc, counts = final or evaluate_predictions(
        model, data.x_test, data.y_test, ctx.device
    )
    metrics: dict[str, float] = {
        "test_accuracy": test_acc,
        "test_loss": test_loss,
        "parameters": float(count_parameters(model)),
        "macs": float(count_macs(model, data.input_shape)),
        "growth_steps": float(state.growth_steps),
        "seconds": state.seconds,
        **{f"width_{i}": float(w) for i, w in enumerate(widths)},
        **validation_metrics(model, data, ctx.device),  # a study's trial: what ranks it
    }
    deployable = registry_deployable(model, architecture_for(widths, spec, data), test_acc)
    metrics.update(write_deployment(ctx, data, deployable, "grow", spec))
    quality, warnings = prediction_check(model, data, ctx.device, test_acc, test_loss, counts)
    metrics.update(quality)
    baseline: list[dict[str, float]] = []
    if spec.growth.baseline:
        baseline = _baseline(spec, data, ctx, widths, state.seconds)
        metrics["baseline_test_accuracy"] = baseline[-1]["test_accuracy"]
    ctx.save_artifact(
        "growth.json", json_bytes(_growth_json(spec, state, widths, baseline)), "application/json"
    )
    ctx.save_artifact("growth.png", growth_png(state, baseline), "image/png")
    return Result(metrics=metrics, history=state.history, warnings=warnings)


def start_model(spec: GrowJob, data: Dataset, ctx: RunContext) -> nn.Module:
    """A fresh MLP of `initial_hidden` widths (a CNN of `initial_channels` + `initial_hidden`
    for family 'cnn'), or the MLP saved by job `spec.from_job`."""
    g = spec.growth
    if g.family == "cnn":
        return _start_cnn(spec, data)
    if spec.from_job is None:
        return create_model(architecture_for(list(g.initial_hidden), spec, data))
    arch = Architecture.from_json(ctx.read_job_artifact(spec.from_job, "architecture.json"))
    config = arch.config
    if not isinstance(config, MLPConfig):
        raise IncompatibleModelError(
            f"job {spec.from_job} saved a {getattr(config, 'name', '?')!r} model; grow can only "
            "continue an 'mlp' (or leave from_job empty to start from a tiny MLP)"
        )
    if config.activation not in GROW_ACTIVATIONS or config.activation != spec.growth.activation:
        raise IncompatibleModelError(
            f"job {spec.from_job}'s MLP uses activation {config.activation!r}; set "
            f"growth.activation to the same value, one of {', '.join(GROW_ACTIVATIONS)}"
        )
    if arch.input_shape != data.input_shape or arch.num_classes != data.num_classes:
        raise IncompatibleModelError(
            f"job {spec.from_job}'s model takes {arch.input_shape} -> {arch.num_classes} classes, "
            f"but this dataset is {data.input_shape} -> {data.num_classes}; use the same dataset"
        )
    if not config.bias or config.dropout > 0:
        raise IncompatibleModelError("grow needs an MLP with bias=true and dropout=0")
    model = create_model(arch)
    model.load_state_dict(
        tensors_from_bytes(ctx.read_job_artifact(spec.from_job, "model.safetensors"))
    )
    return model


def _start_cnn(spec: GrowJob, data: Dataset) -> nn.Module:
    if spec.from_job is not None:
        raise IncompatibleModelError(
            "growth.family 'cnn' starts from growth.initial_channels; from_job can only "
            "continue an 'mlp' (leave from_job empty or use family 'mlp')"
        )
    if len(data.input_shape) != 3:
        raise IncompatibleModelError(
            f"growth.family 'cnn' needs image inputs (C, H, W); this dataset's are "
            f"{data.input_shape}: use family 'mlp'"
        )
    g = spec.growth
    return create_model(architecture_for([*g.initial_channels, *g.initial_hidden], spec, data))


def _baseline(
    spec: GrowJob, data: Dataset, ctx: RunContext, widths: list[int], seconds: float
) -> list[dict[str, float]]:
    """Figure 6: the final widths trained from scratch for the same wall clock."""
    seed_everything(spec.training.seed + 1)
    model = create_model(architecture_for(widths, spec, data))
    curve = train_for_seconds(model, data, spec.training, max(seconds, 0.1), ctx.device)
    for row in curve:
        row["parameters"] = float(count_parameters(model))
    return curve


def _growth_json(
    spec: GrowJob, state: GrowState, widths: list[int], baseline: list[dict[str, float]]
) -> dict[str, Any]:
    return {
        "activation": spec.growth.activation,
        "neurons": spec.growth.neurons,
        "family": spec.growth.family,
        "initial_hidden": list(spec.growth.initial_hidden),
        "initial_channels": list(spec.growth.initial_channels)
        if spec.growth.family == "cnn"
        else None,
        "from_job": spec.from_job,
        "final_widths": widths,
        "stop_reason": state.stop_reason,
        "stopped_at_step": state.stopped_at,
        "seconds": state.seconds,
        "steps": state.log,
        "baseline_curve": baseline,
    }


def growth_png(state: GrowState, baseline: list[dict[str, float]]) -> bytes:
    """Test accuracy against time and against parameters, grown vs fixed baseline."""
    with kept_figure("growth", ncols=2) as (fig, axes):
        return _draw_growth(fig, axes, state, baseline)


def _draw_growth(fig: Any, axes: Any, state: GrowState, baseline: list[dict[str, float]]) -> bytes:
    time_ax, param_ax = axes[0]
    rows = state.history
    time_ax.plot(
        [r["seconds"] for r in rows], [r["test_accuracy"] for r in rows], marker=".", label="grown"
    )
    param_ax.plot(
        [r["parameters"] for r in rows],
        [r["test_accuracy"] for r in rows],
        marker=".",
        label="grown",
    )
    if baseline:
        time_ax.plot(
            [r["seconds"] for r in baseline],
            [r["test_accuracy"] for r in baseline],
            marker=".",
            label="final widths from scratch",
        )
        param_ax.scatter(
            [baseline[-1]["parameters"]],
            [baseline[-1]["test_accuracy"]],
            color="tab:orange",
            label="final widths from scratch",
            zorder=3,
        )
    time_ax.set(xlabel="seconds", ylabel="test accuracy", title="accuracy vs time")
    param_ax.set(
        xlabel="parameters", ylabel="test accuracy", title="accuracy vs parameters", xscale="log"
    )
    time_ax.legend()
    param_ax.legend()
    return figure_png(fig)
