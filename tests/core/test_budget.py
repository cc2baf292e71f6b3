"""Budget accounting per method: a spec fitted to a step budget, run for real,
spends exactly the planned steps, never more than the budget and within its rounding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from archsearch.core.context import InMemoryContext, Result
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.errors import JobCancelled
from archsearch.core.methods import get_method
from archsearch.specs import JobBase, parse_job_spec
from archsearch.specs import budget as plan
from archsearch.specs.budget import fit_to_budget, planned_steps

SUBSET = {"name": "digits", "train_subset": 300}
MLP = {"name": "mlp", "hidden": [16]}
GRAPH = {"name": "neural_graph", "input_nodes": 4, "hidden_blocks": [8], "output_nodes": 8}


@pytest.fixture(scope="module")
def full_size(data_dirs: tuple[Path, ...]) -> int:
    return len(
        load_dataset(
            parse_job_spec({"method": "train", "dataset": {"name": "digits"}}).dataset, data_dirs
        ).x_train
    )


@pytest.fixture(scope="module")
def subset(data_dirs: tuple[Path, ...]) -> Dataset:
    return load_dataset(parse_job_spec({"method": "train", "dataset": SUBSET}).dataset, data_dirs)


def spec_of(**fields: Any) -> JobBase:
    return parse_job_spec({"dataset": SUBSET, **fields})


def run_fitted(
    spec: JobBase, budget: int, n: int, data: Dataset, **ctx: Any
) -> tuple[JobBase, Result]:
    fitted = fit_to_budget(spec, budget, n)
    result = get_method(fitted.method)(fitted, data, InMemoryContext(**ctx))
    return fitted, result


def per_epoch(spec: JobBase) -> int:
    return -(-300 // spec.training.batch_size)


# (spec fields, budget in steps); the subset is 300 samples
CASES = {
    "train": (dict(method="train", model=MLP, training={"batch_size": 64}), 23),
    "prune+finetune+imp+magnitude": (
        dict(
            method="prune",
            model=MLP,
            density=0.5,
            finetune_epochs=2,
            baselines=["imp", "magnitude", "random"],
            training={"epochs": 2, "batch_size": 100},
        ),
        31,
    ),
    "prune weight-free": (dict(method="prune", weights="free", training={"batch_size": 64}), 17),
    "search dnw": (dict(method="search", model=GRAPH, training={"batch_size": 64}), 16),
    "search lottery_one_shot": (
        dict(
            method="search",
            model=GRAPH,
            search={"strategy": "lottery_one_shot", "dense_epochs": 1},
            training={"batch_size": 64},
        ),
        21,
    ),
    "grow": (
        dict(
            method="grow",
            training={"batch_size": 32},
            growth={"initial_hidden": [2], "steps_between_growth": 8, "max_growth_steps": 2},
        ),
        45,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_method_spends_its_planned_steps_within_budget(
    name: str, full_size: int, subset: Dataset
) -> None:
    fields, budget = CASES[name]
    fitted, result = run_fitted(spec_of(**fields), budget, full_size, subset)
    planned = planned_steps(fitted, full_size)
    assert result.metrics["optimizer_steps"] == planned <= budget
    assert budget - planned < per_epoch(fitted)  # within one epoch's rounding
    # The second axis: every training batch's samples (whole epochs of the 300), plus the
    # statistics samples grow reads.
    metrics = result.metrics
    assert metrics["training_samples"] == planned // per_epoch(fitted) * 300
    assert metrics["samples_seen"] == metrics["training_samples"] + metrics["statistics_samples"]
    if fitted.method == "grow":  # statistics are counted apart, not charged to the budget
        assert result.metrics["statistics_batches"] == 2 * 1  # 2 growths x 1 hidden layer
        assert result.metrics["statistics_samples"] > 0
    else:
        assert result.metrics["statistics_batches"] == 0


def test_grow_timed_baseline_is_charged_too(full_size: int, subset: Dataset) -> None:
    fields = CASES["grow"][0]
    growth = {**fields["growth"], "baseline": True}
    spec = spec_of(**{**fields, "growth": growth, "training": {"batch_size": 32, "epochs": 1}})
    result = get_method("grow")(spec, subset, InMemoryContext())
    # The grow run's own epoch, then the final widths from scratch for its wall clock.
    assert result.metrics["optimizer_steps"] > per_epoch(spec)
    assert fit_to_budget(spec, 45, full_size).growth.baseline is False  # type: ignore[attr-defined]


def test_prune_phases_keep_their_ratio_and_imp_rounds_are_charged(full_size: int) -> None:
    fields = CASES["prune+finetune+imp+magnitude"][0]
    fitted = fit_to_budget(spec_of(**fields), 31, full_size)
    # 10 epochs of 3 steps: IMP to 0.5 is 4 rounds, magnitude 1, mask training 1: 6 x 1 + 4.
    assert (fitted.training.epochs, fitted.finetune_epochs) == (1, 4)  # type: ignore[attr-defined]
    assert len(plan.imp_schedule([0.5], plan.IMP_PRUNE_FRACTION)) == 4


def test_transfer_in_steps_and_in_epochs(full_size: int, subset: Dataset) -> None:
    source = spec_of(method="prune", model=MLP, density=0.3, training={"epochs": 1})
    source_ctx = InMemoryContext()
    get_method("prune")(source, subset, source_ctx)
    others = {"src": source_ctx.artifacts}
    for steps_field, budget in (({}, 57), ({"steps": None}, 40)):
        spec = spec_of(
            method="transfer", source_job="src", training={"batch_size": 32}, **steps_field
        )
        fitted, result = run_fitted(spec, budget, full_size, subset, other_jobs=others)
        assert result.metrics["optimizer_steps"] == planned_steps(fitted, full_size) <= budget
        assert budget - result.metrics["optimizer_steps"] < per_epoch(fitted) + 1


def test_compare_spectra_trains_nothing(full_size: int, subset: Dataset) -> None:
    others = {}
    for seed in (0, 1):
        ctx = InMemoryContext()
        get_method("prune")(
            spec_of(method="prune", model=MLP, training={"epochs": 1, "seed": seed}), subset, ctx
        )
        others[f"p{seed}"] = ctx.artifacts
    spec = spec_of(method="compare_spectra", jobs=["p0", "p1"])
    assert fit_to_budget(spec, 0, full_size) == spec and planned_steps(spec, full_size) == 0
    result = get_method("compare_spectra")(spec, subset, InMemoryContext(other_jobs=others))
    assert result.metrics["optimizer_steps"] == 0


# 6 reports an epoch (5 steps + its end); the fitted job has 2 mask epochs, then 3 fine-tuning.
@pytest.mark.parametrize("stop_after", [8, 21], ids=["in mask training", "in fine-tuning"])
def test_resumed_job_reports_the_steps_of_the_whole_run(
    stop_after: int, full_size: int, subset: Dataset
) -> None:
    fields = dict(
        method="prune", model=MLP, finetune_epochs=2, training={"epochs": 2, "batch_size": 64}
    )
    spec = fit_to_budget(spec_of(**fields), 25, full_size)
    assert (spec.training.epochs, spec.finetune_epochs) == (2, 3)  # type: ignore[attr-defined]
    interrupted = InMemoryContext(stop_after_reports=stop_after)
    with pytest.raises(JobCancelled):
        get_method("prune")(spec, subset, interrupted)
    assert interrupted.checkpoint is not None
    resumed = get_method("prune")(spec, subset, InMemoryContext(checkpoint=interrupted.checkpoint))
    # Steps redone after the interruption are not charged; steps before it are.
    assert resumed.metrics["optimizer_steps"] == planned_steps(spec, full_size) == 25


def test_fitting_errors_name_the_field(full_size: int) -> None:
    with pytest.raises(ValueError, match=r"training\.epochs"):
        fit_to_budget(spec_of(method="train", training={"batch_size": 64}), 4, full_size)
    with pytest.raises(ValueError, match="finetune_epochs"):
        fit_to_budget(
            spec_of(method="prune", finetune_epochs=1, training={"batch_size": 64}), 9, full_size
        )
    with pytest.raises(ValueError, match=r"search\.dense_epochs"):
        fit_to_budget(
            spec_of(method="search", search={"strategy": "fine_tune"}, training={"batch_size": 64}),
            5,
            full_size,
        )
    with pytest.raises(ValidationError, match=r"training\.epochs|epochs"):
        fit_to_budget(spec_of(method="train", training={"batch_size": 300}), 20_000, full_size)
    with pytest.raises(ValueError, match=r"growth\.baseline"):
        planned_steps(spec_of(method="grow"), full_size)
    few_shot = parse_job_spec(
        {"method": "train", "dataset": {"name": "digits", "samples_per_class": 5}}
    )
    with pytest.raises(ValueError, match=r"dataset\.samples_per_class"):
        planned_steps(few_shot, full_size)
    assert planned_steps(few_shot, full_size, num_classes=10) == 10  # 50 samples, 128 a batch


def test_units_and_epochs() -> None:
    assert plan.BUDGET_UNITS == ("steps", "epochs")
    assert plan.steps_for_epochs(3, 300, 64) == 15
    assert plan.steps_for_epochs(1.5, 300, 64) == 7
