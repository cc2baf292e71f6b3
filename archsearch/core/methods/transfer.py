"""The `transfer` method: retrain a found architecture from scratch on another task.

"Differentiable Architecture Pruning for Transfer Learning", Appendix A.2: the binary mask
m* of a finished prune job is put on a freshly initialised parent network,
F(m* o theta_0), theta_0 random, and only the kept weights are trained on the new data
(few-shot with `dataset.samples_per_class`). `mask` picks the learned mask or a baseline
at the same density, so AP, random, IMP and reshuffle compare on the user's own data.

Appendix A.2 runs "T" gradient steps; a few-shot set of 500 images is 4 batches, so ten
epochs of it are 40 steps, far from converged (measured 0.41-0.74 against 0.82-0.90 with
enough steps). The budget is therefore `steps` optimiser steps whatever the set's size; the
small set is repeated within an epoch so that the test split is evaluated about
`EVALUATIONS` times rather than after every handful of steps.
"""

from __future__ import annotations

import dataclasses

import torch

from archsearch.core import charts
from archsearch.core.context import Result, RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.errors import UserError
from archsearch.core.export import tensors_from_bytes
from archsearch.core.models import Architecture, create_model
from archsearch.core.nn.masked_model import mask_model, prunable_layer_names, set_masks
from archsearch.core.pruning.baselines import random_masks, random_unit_masks, reshuffle_masks
from archsearch.core.pruning.build import density_report, mask_bytes, save_pruned, weight_params
from archsearch.core.pruning.units import as_unit_masks, as_weight_masks
from archsearch.core.quality import prediction_check
from archsearch.core.training import fit, seed_everything, steps_per_epoch
from archsearch.specs.budget import TRANSFER_EVALUATIONS, transfer_schedule
from archsearch.specs.common import TrainingSpec
from archsearch.specs.transfer import TransferJob

Masks = dict[str, torch.Tensor]

# Test-split evaluations (history rows) of a step-budgeted run.
EVALUATIONS = TRANSFER_EVALUATIONS


def source_masks(spec: TransferJob, ctx: RunContext) -> tuple[Architecture, Masks]:
    """The source job's architecture and the chosen mask (baselines drawn here if cheap)."""
    if spec.source_job is None:
        raise UserError("transfer needs 'source_job': the id of a finished prune job")
    source = Architecture.from_json(ctx.read_job_artifact(spec.source_job, "architecture.json"))
    learned = tensors_from_bytes(ctx.read_job_artifact(spec.source_job, "mask.safetensors"))
    if spec.first_layer == "dense":  # baselines match the density of the layers still masked
        learned = first_layer_as_asked(learned, source, spec, torch.Generator())
    generator = torch.Generator().manual_seed(spec.training.seed)
    if spec.mask == "learned":
        return source, learned
    if spec.mask in ("random", "reshuffle"):
        return source, drawn_masks(learned, source, spec.mask, generator)
    name = f"mask-{spec.mask}.safetensors"
    try:
        return source, tensors_from_bytes(ctx.read_job_artifact(spec.source_job, name))
    except UserError:
        raise UserError(
            f"job {spec.source_job} has no {name}; run the prune job with "
            f"baselines: ['{spec.mask}'] or use mask: learned / random / reshuffle"
        ) from None


def drawn_masks(
    learned: Masks, architecture: Architecture, kind: str, generator: torch.Generator
) -> Masks:
    """The `random` or `reshuffle` baseline of `learned`, drawn at its granularity.

    Masks from a unit-granularity job draw whole units, so the baseline is again a smaller
    dense network: reshuffle keeps each layer's unit count, random keeps the overall unit
    density in every layer (as the prune job's own random baseline does). Weight masks draw
    single connections: reshuffle per layer, random over all masked weights."""
    units = as_unit_masks(learned, architecture)
    like = learned if units is None else units
    if kind == "reshuffle":
        drawn = reshuffle_masks(like, generator)
    else:
        density = sum(int(m.sum()) for m in like.values()) / sum(m.numel() for m in like.values())
        draw = random_masks if units is None else random_unit_masks
        drawn = draw(like, density, generator)
    return drawn if units is None else as_weight_masks(drawn, architecture)


def first_layer_as_asked(
    masks: Masks, architecture: Architecture, spec: TransferJob, generator: torch.Generator
) -> Masks:
    """The first masked layer as `spec.first_layer` asks: as the mask has it, reshuffled at
    its own density (every input connected again), or left dense (dropped from the masks).

    An MNIST mask drops the inputs that are constant on MNIST (the border pixels); on another
    task those pixels carry signal, and a network that cannot see them is handicapped."""
    first = prunable_layer_names(create_model(architecture))[0]  # not the mask file's order
    if spec.first_layer == "masked" or first not in masks:
        return masks
    if spec.first_layer == "dense":
        return {name: mask for name, mask in masks.items() if name != first}
    return {**masks, first: reshuffle_masks({first: masks[first]}, generator)[first]}


def fresh_masked_model(architecture: Architecture, masks: Masks) -> torch.nn.Module:
    """A new random initialisation of the parent with `masks` fixed (layers not in the mask
    file were kept dense by the prune job)."""
    model = create_model(architecture)
    names = prunable_layer_names(model)
    unknown = sorted(set(masks) - set(names))
    if unknown:
        raise UserError(f"the mask names layers {unknown} that this model does not have")
    mask_model(model, keep_dense=tuple(n for n in names if n not in masks))
    shapes = {n: tuple(m.weight.shape) for n, m in model.named_modules() if n in masks}
    for name, mask in masks.items():
        if tuple(mask.shape) != shapes[name]:
            raise UserError(
                f"layer {name}: the mask is {tuple(mask.shape)} but this dataset needs "
                f"{shapes[name]}; when the number of classes or the input size differs, prune "
                "with keep_dense: ['first'] / ['last'] so those layers are not masked"
            )
    set_masks(model, {n: m.to(torch.bool) for n, m in masks.items()})
    return model


def step_budget(
    data: Dataset, training: TrainingSpec, steps: int | None
) -> tuple[Dataset, TrainingSpec]:
    """The training set and spec that make `fit` run about `steps` optimiser steps.

    A tiny set is repeated r times per epoch (each epoch still visits every sample equally
    often) so that the run has about `EVALUATIONS` epochs; `steps=None` keeps the epochs.
    """
    if steps is None:
        return data, training
    n = len(data.x_train)
    # An epoch of the repeated set is about steps / EVALUATIONS batches; the budget planner
    # uses the same rule (`specs.budget.transfer_schedule`).
    repeat, epochs = transfer_schedule(n, training.batch_size, steps)
    tiled = dataclasses.replace(
        data,
        x_train=data.x_train.repeat(repeat),
        y_train=data.y_train.repeat(repeat),
    )
    return tiled, training.model_copy(update={"epochs": epochs})


def run(spec: TransferJob, data: Dataset, ctx: RunContext) -> Result:
    """Train the source job's architecture, freshly initialised, on `data`."""
    source, masks = source_masks(spec, ctx)
    architecture = Architecture(source.config, data.input_shape, data.num_classes)
    generator = torch.Generator().manual_seed(spec.training.seed + 1)
    masks = first_layer_as_asked(masks, architecture, spec, generator)
    seed_everything(spec.training.seed)
    model = fresh_masked_model(architecture, masks).to(ctx.device)
    train_data, training = step_budget(data, spec.training, spec.steps)
    outcome = fit(model, train_data, training, ctx, params=weight_params(model), phase="transfer")
    ctx.save_artifact("mask.safetensors", mask_bytes(masks), "application/octet-stream")
    metrics = {
        "test_accuracy": outcome.test_accuracy,
        "test_loss": outcome.test_loss,
        "train_samples": float(len(data.x_train)),
        "train_steps": float(
            training.epochs * steps_per_epoch(len(train_data.x_train), training.batch_size)
        ),
        **density_report(model),
    }
    metrics.update(save_pruned(ctx, model, architecture))
    quality, warnings = prediction_check(
        model, data, ctx.device, outcome.test_accuracy, outcome.test_loss, outcome.predicted_counts
    )
    metrics.update(quality)
    ctx.save_chart("curves.png", charts.curves(outcome.history, f"transfer ({spec.mask})"))
    return Result(metrics=metrics, history=outcome.history, warnings=warnings)
