"""Per-step metrics reach the context as means over windows of REPORT_EVERY steps (and
the epoch's last, shorter window), while progress is still reported at every step; prune's
density pass and logit step stop once its masks froze."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.methods import prune
from archsearch.core.models import Architecture, create_model
from archsearch.core.nn.masked_model import mask_logits
from archsearch.core.training import REPORT_EVERY, TrainHooks, fit, steps_per_epoch
from archsearch.specs import DatasetRef, parse_job_spec
from archsearch.specs.common import TrainingSpec
from archsearch.specs.model_configs import MLPConfig


def test_hook_metrics_are_window_means_and_progress_is_per_step() -> None:
    data = load_dataset(DatasetRef(name="digits"), ())
    data = replace(data, x_train=data.x_train[:1200], y_train=data.y_train[:1200])
    spec = TrainingSpec(epochs=2, batch_size=10)
    model = create_model(Architecture(MLPConfig(hidden=(16,)), data.input_shape, 10))
    ctx = InMemoryContext()
    fit(model, data, spec, ctx, hooks=TrainHooks(after_step=lambda step: {"value": step * 1.0}))
    per_epoch = steps_per_epoch(1200, 10)  # 120: windows of 50, 50 and the last 20
    series = ctx.metric_series("value")
    ends = [50, 100, 120, 170, 220, 240]
    assert [step for step, _ in series] == ends
    starts = [0, 50, 100, 120, 170, 220]
    expected = [sum(range(a, b)) / (b - a) for a, b in zip(starts, ends, strict=True)]
    assert [value for _, value in series] == expected
    progress = [step for step, _, metrics in ctx.reports if "test_accuracy" not in metrics]
    assert progress == list(range(1, 2 * per_epoch + 1)) and REPORT_EVERY == 50


def test_prune_reports_fewer_rows_and_stops_the_mask_work_once_frozen() -> None:
    data = load_dataset(DatasetRef(name="digits"), ())
    spec = parse_job_spec(
        {
            "method": "prune",
            "dataset": {"name": "digits"},
            "training": {"epochs": 4, "batch_size": 16},
            "density": 0.3,
        }
    )
    ctx = InMemoryContext()
    result = prune.run(spec, data, ctx)  # type: ignore[arg-type]
    density = ctx.metric_series("density")
    total = 4 * steps_per_epoch(len(data.x_train), spec.training.batch_size)
    assert len(density) <= total // REPORT_EVERY + 2 * 4  # windows and epoch ends, not steps
    frozen_at = int(result.metrics["masks_frozen_at_step"])
    assert 0 <= frozen_at < total - REPORT_EVERY, "the default schedule freezes early"
    after = [value for step, value in density if step > frozen_at + REPORT_EVERY]
    assert after and after == pytest.approx([result.metrics["density"]] * len(after), rel=1e-12)


def test_frozen_trainer_leaves_the_logits_and_their_optimiser_alone() -> None:
    from archsearch.core.pruning.build import build_masked_model
    from archsearch.core.pruning.trainer import MaskSchedule, MaskTrainer, finalize_to_density

    spec = parse_job_spec({"method": "prune", "dataset": {"name": "digits"}, "density": 0.3})
    model = build_masked_model(spec, Architecture(MLPConfig(hidden=(16,)), (1, 8, 8), 10))  # type: ignore[arg-type]
    trainer = MaskTrainer(model, MaskSchedule(target=0.3, total_steps=100))
    finalize_to_density(model, 0.3)
    before = [p.detach().clone() for p in mask_logits(model)]
    first = trainer.after_step(0)
    assert trainer.frozen_density == first["density"]
    for p in mask_logits(model):
        p.grad = torch.ones_like(p)  # would move the logits if the optimiser still stepped
    trainer.after_step(1)
    assert all(torch.equal(a, p) for a, p in zip(before, mask_logits(model), strict=True))
