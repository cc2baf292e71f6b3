"""The `prune` method: learn a binary mask over a parent network (two temperatures).

"Differentiable Architecture Pruning for Transfer Learning", Algorithm A.1 with the
sparsity penalty of appendix A.3 (`weights: learned`: masks and weights trained jointly),
and "Disentangling Neural Architectures and Weights", Algorithm 1 (`weights: free`: weights
fixed to one, only the masks are trained; `finetune_epochs` > 0 then trains fresh real
weights on the found support, the paper's bin -> real).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from archsearch.core import charts
from archsearch.core.context import Result, RunContext, RunWarning
from archsearch.core.data.loaders import Dataset
from archsearch.core.deploy import pruned_deployable, write_deployment
from archsearch.core.evaluation import evaluate, evaluate_predictions, validation_metrics
from archsearch.core.export import json_bytes
from archsearch.core.models import Architecture
from archsearch.core.nn.masked_model import freeze_masks, hard_masks, masks_frozen, set_masks
from archsearch.core.pruning.baselines import (
    iterative_magnitude_pruning,
    random_masks,
    random_unit_masks,
    reshuffle_masks,
)
from archsearch.core.pruning.build import (
    build_masked_model,
    density_report,
    mask_bytes,
    save_pruned,
    save_spectrum,
    weight_params,
)
from archsearch.core.pruning.rigl import RigL, RigLSchedule
from archsearch.core.pruning.trainer import MaskSchedule, MaskTrainer, finalize_to_density
from archsearch.core.pruning.units import units_kept
from archsearch.core.quality import prediction_check
from archsearch.core.training import FitResult, TrainHooks, fit, seed_everything, steps_per_epoch
from archsearch.specs.budget import IMP_PRUNE_FRACTION
from archsearch.specs.prune import PruneJob, rigl_updates

Evaluation = tuple[float, float, torch.Tensor]  # test loss, accuracy, predicted-class counts


def mask_schedule(spec: PruneJob, data: Dataset) -> MaskSchedule:
    p = spec.penalty
    return MaskSchedule(
        target=spec.density,
        total_steps=spec.training.epochs
        * steps_per_epoch(len(data.x_train), spec.training.batch_size),
        adaptive=p.schedule == "adaptive",
        penalised=p.schedule != "none",
        gamma=p.gamma,
        reach_fraction=p.reach_fraction,
        adapt_rate=p.adapt_rate,
        mask_lr=spec.mask_lr,
        mask_optimizer=spec.mask_optimizer,
        logit_cap=spec.logit_init if spec.density is not None and spec.cap_logits else None,
        clipped=spec.training.max_grad_norm is not None,
    )


def train_masks(
    spec: PruneJob,
    data: Dataset,
    ctx: RunContext,
    architecture: Architecture,
    checkpoint: dict[str, Any] | None,
) -> tuple[torch.nn.Module, MaskTrainer, list[dict[str, float]], Evaluation | None]:
    """Phase 1: masks (and, when learned, weights). Returns the model with frozen masks, and
    its test evaluation (loss, accuracy, predicted-class counts) when training's last test
    pass saw exactly that model (None: evaluate it again)."""
    seed_everything(spec.training.seed)
    model = build_masked_model(spec, architecture).to(ctx.device)
    trainer = MaskTrainer(model, mask_schedule(spec, data))
    if spec.algorithm == "rigl":
        return model, trainer, train_rigl(spec, data, ctx, model), None
    if checkpoint is not None and checkpoint.get("phase") == "finetune":
        # Phase 1 finished before the interruption: its result travels in phase 2's state.
        pruned = checkpoint["extra"]["pruned"]
        model.load_state_dict(pruned["model"])
        trainer.load_extra_state(pruned["trainer"])
        return model, trainer, list(pruned["history"]), None
    outcome = fit(
        model,
        data,
        spec.training,
        ctx,
        params=weight_params(model),
        hooks=trainer.hooks(),
        phase="prune",
    )
    return model, trainer, outcome.history, _binarised(spec, data, ctx, model, trainer, outcome)


def _binarised(
    spec: PruneJob,
    data: Dataset,
    ctx: RunContext,
    model: torch.nn.Module,
    trainer: MaskTrainer,
    outcome: FitResult,
) -> Evaluation | None:
    """Freeze the masks if training did not; the test evaluation of the frozen model when
    training's last test pass already saw it."""
    last: Evaluation | None = None
    if outcome.predicted_counts is not None:  # the last epoch's test pass saw this model
        last = (outcome.test_loss, outcome.test_accuracy, outcome.predicted_counts)
    trainer.relaxed_accuracy = float("nan")
    if not masks_frozen(model):
        # No target reached during training (constant penalty, or no target at all): the
        # network trained so far is the relaxed one; binarising must not change what it does.
        relaxed = last or evaluate_predictions(model, data.x_test, data.y_test, ctx.device)
        trainer.relaxed_accuracy, last = relaxed[1], None  # binarising changes the model
        if spec.density is not None:
            finalize_to_density(model, spec.density)
        elif spec.forward == "binary":
            # Binary forward and no density to meet: the masks already were 1[w > 0], so
            # freezing them changes no output and the relaxed test pass stands.
            last = relaxed
        freeze_masks(model)
    return last


def rigl_schedule(spec: PruneJob, data: Dataset) -> RigLSchedule:
    assert spec.density is not None, "validated: rigl needs a density"
    r = spec.rigl
    total_steps = spec.training.epochs * steps_per_epoch(
        len(data.x_train), spec.training.batch_size
    )
    return RigLSchedule(
        density=spec.density,
        total_steps=total_steps,
        interval=r.interval_for(total_steps),
        drop_fraction=r.drop_fraction,
        end_fraction=r.end_fraction,
        distribution=r.distribution,
    )


def rigl_metrics(spec: PruneJob, data: Dataset) -> dict[str, float]:
    """`rigl_updates` (drop/grow updates made) and `rigl_update_interval` (the interval that
    ran). Counted from the schedule: a run that ends takes every step of it (one stopped
    early fails), and the count then holds across a resume, which a live counter would not."""
    schedule = rigl_schedule(spec, data)
    updates = rigl_updates(schedule.interval, schedule.end_fraction, schedule.total_steps)
    return {"rigl_updates": float(updates), "rigl_update_interval": float(schedule.interval)}


def train_rigl(
    spec: PruneJob, data: Dataset, ctx: RunContext, model: torch.nn.Module, phase: str = "prune"
) -> list[dict[str, float]]:
    """RigL at `spec.density` for `training.epochs` (the masks end frozen, in the model)."""
    rigl = RigL(
        model, data, rigl_schedule(spec, data), spec.training.batch_size, spec.training.seed
    )
    outcome = fit(
        model,
        data,
        spec.training,
        ctx,
        params=weight_params(model),
        hooks=rigl.hooks(),
        phase=phase,
    )
    return outcome.history


def finetune(
    spec: PruneJob,
    data: Dataset,
    ctx: RunContext,
    architecture: Architecture,
    pruned: dict[str, Any],
) -> tuple[torch.nn.Module, list[dict[str, float]]]:
    """Phase 2 (bin -> real): fresh real weights trained on the found support."""
    masks = {k: v.to(torch.bool) for k, v in pruned["masks"].items()}
    seed_everything(spec.training.seed + 1)
    model = build_masked_model(spec, architecture, weights="learned").to(ctx.device)
    set_masks(model, masks)
    hooks = TrainHooks(extra_state=lambda: {"pruned": pruned}, load_extra_state=lambda state: None)
    outcome = fit(
        model,
        data,
        spec.training,
        ctx,
        params=weight_params(model),
        hooks=hooks,
        phase="finetune",
        epochs=spec.finetune_epochs,
    )
    return model, outcome.history


def baseline_masks(
    spec: PruneJob,
    data: Dataset,
    ctx: RunContext,
    architecture: Architecture,
    learned: dict[str, torch.Tensor],
    metrics: dict[str, float] | None = None,
) -> dict[str, dict[str, torch.Tensor]]:
    """The requested baselines at the learned mask's density (section 3.2-3.3; RigL's
    test accuracy, the one baseline that trains its weights to the end, into `metrics`)."""
    if not spec.baselines:
        return {}
    assert spec.density is not None, "validated: baselines need a density"
    generator = torch.Generator().manual_seed(spec.training.seed)
    out: dict[str, dict[str, torch.Tensor]] = {}
    if "random" in spec.baselines:
        draw = random_unit_masks if spec.granularity == "unit" else random_masks
        out["random"] = draw(learned, spec.density, generator)
    if "reshuffle" in spec.baselines:
        out["reshuffle"] = reshuffle_masks(learned, generator)
    # One-shot magnitude pruning is IMP with a single round (prune everything at once).
    for name, prune_fraction in (("imp", IMP_PRUNE_FRACTION), ("magnitude", 1.0)):
        if name in spec.baselines:
            seed_everything(spec.training.seed)
            model = build_masked_model(spec, architecture, weights="learned").to(ctx.device)
            imp = iterative_magnitude_pruning(
                model,
                data,
                spec.training,
                ctx,
                [spec.density],
                params=weight_params(model),
                prune_fraction=prune_fraction,
            )
            out[name] = imp.masks[spec.density]
    if "rigl" in spec.baselines:
        out["rigl"] = _rigl_baseline(spec, data, ctx, architecture, metrics)
    return out


def _rigl_baseline(
    spec: PruneJob,
    data: Dataset,
    ctx: RunContext,
    architecture: Architecture,
    metrics: dict[str, float] | None,
) -> dict[str, torch.Tensor]:
    """RigL trained at the same density and epochs; its accuracy goes in `metrics`."""
    seed_everything(spec.training.seed)
    model = build_masked_model(spec, architecture, weights="learned").to(ctx.device)
    train_rigl(spec, data, ctx, model, phase="rigl")
    if metrics is not None:
        loss, accuracy = evaluate(model, data.x_test, data.y_test, ctx.device)
        metrics.update(rigl_test_accuracy=accuracy, rigl_test_loss=loss)
        metrics.update(rigl_metrics(spec, data))
    return {k: v.cpu() for k, v in hard_masks(model).items()}


def run(spec: PruneJob, data: Dataset, ctx: RunContext) -> Result:
    """Prune `spec.model` on `data`; save masks, masked and compact models, plots."""
    architecture = Architecture(spec.model, data.input_shape, data.num_classes)
    checkpoint = ctx.load_checkpoint()
    model, trainer, history, last = train_masks(spec, data, ctx, architecture, checkpoint)
    masks = {k: v.cpu() for k, v in hard_masks(model).items()}
    test_loss, test_acc, counts = last or evaluate_predictions(
        model, data.x_test, data.y_test, ctx.device
    )
    metrics = _mask_metrics(spec, model, trainer, test_acc, test_loss)
    metrics.update(validation_metrics(model, data, ctx.device))  # the frozen model's
    if spec.algorithm == "rigl":
        metrics.update(rigl_metrics(spec, data))
    quality, warnings = prediction_check(model, data, ctx.device, test_acc, test_loss, counts)
    metrics.update(quality)
    _save_baselines(ctx, model, {"": masks})
    units = {"units": units_kept(model)} if spec.granularity == "unit" else {}
    ctx.save_artifact("density.json", json_bytes(density_report(model) | units), "application/json")
    metrics.update(save_pruned(ctx, model, architecture))
    deployable = pruned_deployable(model, architecture, test_acc)
    metrics.update(write_deployment(ctx, data, deployable, "prune", spec))
    save_spectrum(ctx, model, architecture)
    _save_logit_plot(ctx, trainer, spec, data)
    if spec.finetune_epochs > 0:
        pruned = {
            "model": model.state_dict(),
            "trainer": trainer.extra_state(),
            "history": history,
            "masks": masks,
        }
        tuned, tuned_history = finetune(spec, data, ctx, architecture, pruned)
        loss, acc, counts = evaluate_predictions(tuned, data.x_test, data.y_test, ctx.device)
        metrics.update(finetune_test_accuracy=acc, finetune_test_loss=loss)
        warnings += _finetuned_check(tuned, data, ctx, (acc, loss, counts), metrics)
        save_pruned(ctx, tuned, architecture, suffix="-finetuned")
        history = history + [{**row, "phase_finetune": 1.0} for row in tuned_history]
    _save_baselines(ctx, model, baseline_masks(spec, data, ctx, architecture, masks, metrics))
    if history:
        ctx.save_chart("curves.png", charts.curves(history, "prune"))
    return Result(metrics=metrics, history=history, warnings=warnings)


def _mask_metrics(
    spec: PruneJob, model: torch.nn.Module, trainer: MaskTrainer, accuracy: float, loss: float
) -> dict[str, float]:
    metrics = {
        "test_accuracy": accuracy,
        "test_loss": loss,
        "masks_frozen_at_step": float(trainer.frozen_at_step),
        **density_report(model),
    }
    if spec.density is not None:
        metrics["target_density"] = spec.density
    if math.isfinite(trainer.relaxed_accuracy):
        # Accuracy lost by binarising the relaxed network at the end (absent when the masks
        # froze during training and the weights trained on the binary mask afterwards).
        metrics["binarisation_gap"] = trainer.relaxed_accuracy - accuracy
    return metrics


def _save_baselines(
    ctx: RunContext, model: torch.nn.Module, masks: dict[str, dict[str, torch.Tensor]]
) -> None:
    """`mask.safetensors` (name "") and `mask-<baseline>.safetensors`, shaped like the
    weights at either granularity: `transfer` and users read one format."""
    for name, mask in masks.items():
        file = f"mask-{name}.safetensors" if name else "mask.safetensors"
        ctx.save_artifact(file, mask_bytes(mask, model), "application/octet-stream")


def _save_logit_plot(ctx: RunContext, trainer: MaskTrainer, spec: PruneJob, data: Dataset) -> None:
    if not trainer.histograms:
        return  # RigL learns no logits
    frozen_epoch = _frozen_epoch(trainer, spec, data)
    chart = charts.mask_logits(trainer.histograms, trainer.hist_range, frozen_epoch)
    ctx.save_chart("mask-logits.png", chart)


def _finetuned_check(
    model: torch.nn.Module,
    data: Dataset,
    ctx: RunContext,
    evaluation: tuple[float, float, torch.Tensor],
    metrics: dict[str, float],
) -> list[RunWarning]:
    """The collapse check on the bin -> real model too; its metrics get a `finetune_` prefix."""
    accuracy, loss, counts = evaluation
    quality, warnings = prediction_check(model, data, ctx.device, accuracy, loss, counts)
    metrics.update({f"finetune_{k}": v for k, v in quality.items()})
    return [RunWarning(w.code, f"fine-tuned model (bin -> real): {w.message}") for w in warnings]


def _frozen_epoch(trainer: MaskTrainer, spec: PruneJob, data: Dataset) -> int | None:
    if trainer.frozen_at_step < 0:
        return None
    return trainer.frozen_at_step // steps_per_epoch(len(data.x_train), spec.training.batch_size)
