"""Per-arm aggregation against a table computed by hand."""

from __future__ import annotations

import pytest

from archsearch.jobs.domain.studies.aggregation import JobFacts, summarise


def job(arm: str, status: str = "succeeded", **metrics: float) -> JobFacts:
    wall = metrics.pop("wall", None)
    size = metrics.pop("bytes", None)
    return JobFacts(
        arm=arm,
        method=arm.split("-")[0],
        status=status,
        metrics=metrics,
        wall_clock_s=wall,
        compact_bytes=size,
    )


def test_mean_std_budget_flag_and_front_by_hand() -> None:
    jobs = [
        # train-w32: accuracies 0.90, 0.92, 0.94 -> mean 0.92, sample std 0.02
        job("train-w32", test_accuracy=0.90, parameters=1000, optimizer_steps=100, wall=10),
        job("train-w32", test_accuracy=0.92, parameters=1000, optimizer_steps=100, wall=12),
        job("train-w32", test_accuracy=0.94, parameters=1000, optimizer_steps=100, wall=14),
        # prune-d0.1: 0.80 and 0.84 (mean 0.82, std 0.028284), one failed; spent 120 > 100
        job("prune-d0.1", test_accuracy=0.80, parameters=200, optimizer_steps=100, bytes=4000),
        job(
            "prune-d0.1",
            test_accuracy=0.84,
            parameters=220,
            optimizer_steps=120,
            bytes=4400,
            latency_batch_64_compact_ms=2.0,
            latency_batch_1_compact_ms=0.5,
        ),
        job("prune-d0.1", status="failed"),
        # search-d0.1: 0.81 at 300 parameters: dominated by prune (0.82 at 210)
        job("search-d0.1", test_accuracy=0.81, parameters=300, optimizer_steps=90),
    ]
    arms, front = summarise(jobs, budget=100)
    by = {arm.label: arm for arm in arms}
    train, prune, search = by["train-w32"], by["prune-d0.1"], by["search-d0.1"]

    assert train.test_accuracy is not None and train.wall_clock_s is not None
    assert (train.test_accuracy.mean, train.test_accuracy.std) == pytest.approx((0.92, 0.02))
    assert (train.wall_clock_s.mean, train.wall_clock_s.std, train.wall_clock_s.n) == (12, 2, 3)
    assert not train.over_budget and train.counts == {"succeeded": 3}

    assert prune.test_accuracy is not None and prune.parameters is not None
    assert prune.test_accuracy.mean == pytest.approx(0.82)
    assert prune.test_accuracy.std == pytest.approx(0.0282843, rel=1e-5)
    assert (prune.parameters.mean, prune.test_accuracy.n) == (210, 2)
    assert prune.compact_bytes is not None and prune.compact_bytes.mean == 4200
    assert prune.latency_ms is not None and (prune.latency_ms.mean, prune.latency_ms.n) == (0.5, 1)
    assert prune.over_budget and prune.counts == {"succeeded": 2, "failed": 1}
    assert prune.jobs == 3 and prune.budget_steps == 100

    assert [p.label for p in front] == ["prune-d0.1", "train-w32"]
    assert (prune.on_front, train.on_front, search.on_front) == (True, True, False)
    assert search.latency_ms is None and search.compact_bytes is None


def test_an_arm_with_no_succeeded_job_has_no_figures_and_is_off_the_front() -> None:
    arms, front = summarise([job("grow-p10", status="failed")], budget=None)
    assert arms[0].test_accuracy is None and front == [] and not arms[0].over_budget


def test_the_front_is_chosen_on_validation_and_reported_on_test() -> None:
    # "lucky" tops the test split but not the rows held apart: test accuracy chooses nothing.
    jobs = [
        job("honest", test_accuracy=0.90, val_accuracy=0.93, parameters=1000),
        job("lucky", test_accuracy=0.92, val_accuracy=0.91, parameters=1000),
        job("small", test_accuracy=0.80, val_accuracy=0.82, parameters=100),
    ]
    arms, front = summarise(jobs, budget=None)
    assert [(p.label, p.test_accuracy, p.val_accuracy) for p in front] == [
        ("small", 0.80, 0.82),
        ("honest", 0.90, 0.93),
    ]
    assert [arm.label for arm in arms if arm.on_front] == ["honest", "small"]


def test_a_study_whose_jobs_held_no_rows_apart_is_ranked_on_test() -> None:
    jobs = [
        job("old-a", test_accuracy=0.90, parameters=1000),
        job("old-b", test_accuracy=0.92, val_accuracy=0.80, parameters=1000),
    ]
    _, front = summarise(jobs, budget=None)
    assert [point.label for point in front] == ["old-b"]


def test_an_arm_the_pruner_stopped_has_no_figures_even_with_a_seed_run_to_the_end() -> None:
    jobs = [
        job("train-a", test_accuracy=0.90, parameters=1000),
        job("train-a", test_accuracy=0.92, parameters=1000),
        job("train-b", status="pruned", test_accuracy=0.70, parameters=500),
        job("train-b", test_accuracy=0.95, parameters=500),  # ran beside its first seed
        job("train-b", status="pruned"),
    ]
    arms, front = summarise(jobs, budget=None)
    stopped = {arm.label: arm for arm in arms}["train-b"]
    assert stopped.test_accuracy is None and stopped.parameters is None
    assert stopped.counts == {"pruned": 2, "succeeded": 1} and not stopped.on_front
    assert [point.label for point in front] == ["train-a"]
