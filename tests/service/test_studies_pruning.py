"""A study with a pruner, through the real API and Celery worker on PostgreSQL: a hopeless
arm's first seed is stopped at an epoch boundary and ends `pruned` (its spend counted, its
model kept, never on the front, its Optuna trial PRUNED), and the arm's other seed ends
`pruned` without starting; bad pruner settings are 422s."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from archsearch.client import ArchsearchClient
from archsearch.client.errors import ApiError
from archsearch.jobs.domain.studies import adaptive

pytestmark = pytest.mark.service

# 400 samples at batch size 100: 4 steps an epoch; 24 steps is six epochs of every job.
BUDGET_STEPS = 24


def pruned_study(**fields: object) -> dict[str, object]:
    adam = {"name": "adam", "lr": 0.01}
    return {
        "name": "pruned",
        "dataset": {"name": "digits", "train_subset": 400},
        "base": {
            "method": "train",
            "model": {"name": "mlp", "hidden": [16]},
            "training": {"batch_size": 100},
        },
        "budget": {"steps": BUDGET_STEPS},
        "seeds": [0, 1],
        # Queued in this order, so the worker finishes the two good trials (the median's
        # startup) before the hopeless ones, whose learning rate leaves them at chance.
        "arms": [
            {"label": "good", "spec": {"training": {"optimizer": adam}}},
            {"label": "hopeless", "spec": {"training": {"optimizer": {**adam, "lr": 1e-9}}}},
        ],
        "pruner": {"name": "median", "startup_trials": 2, "warmup_epochs": 1},
        **fields,
    }


def test_hopeless_trials_end_pruned_and_count_as_spent(
    client: ArchsearchClient, pg_url: str
) -> None:
    submitted = client.submit_study(pruned_study())
    study = client.wait_study(submitted.id, timeout=150)
    assert (study.status, study.counts) == ("finished", {"succeeded": 2, "pruned": 2})
    arms = {arm.label: arm for arm in study.arms}
    assert arms["hopeless"].counts == {"pruned": 2} and arms["hopeless"].test_accuracy is None
    assert not arms["hopeless"].on_front and [p.label for p in study.pareto] == ["good"]

    jobs = client.list_jobs(study=study.id, limit=10).data
    first, later = sorted((job for job in jobs if job.status == "pruned"), key=lambda j: j.label)
    assert first.label.endswith("/seed0") and later.label.endswith("/seed1")
    spent = first.latest_metrics["optimizer_steps"]
    assert 4 <= spent < BUDGET_STEPS and spent % 4 == 0  # stopped at an epoch boundary
    assert first.step == spent < first.total_steps and first.error is None
    assert first.latest_metrics["test_accuracy"] < 0.3
    assert "pruned by its study's pruner" in client.events(first.id)[-1].reason
    assert "model.safetensors" in {a.name for a in client.artifacts(first.id)}
    # The arm was judged by its first seed; its second never started.
    assert (later.started_at, later.step, later.latest_metrics) == (None, 0, {})
    reason = client.events(later.id)[-1].reason
    assert reason == "not started: its arm's first seed (seed 0) was pruned"
    assert client.artifacts(later.id) == []
    spent_in_all = sum(job.latest_metrics.get("optimizer_steps", 0) for job in jobs)
    assert study.optimizer_steps_spent == spent_in_all > 2 * BUDGET_STEPS
    assert study.device_seconds > 0

    pruning = optuna.load_study(
        study_name=f"archsearch-{study.id.hex}-pruning", storage=adaptive.storage(pg_url)
    )
    states = sorted(t.state.name for t in pruning.get_trials(deepcopy=False))
    assert states == sorted([TrialState.COMPLETE.name] * 2 + [TrialState.PRUNED.name])


@pytest.mark.parametrize(
    ("pruner", "field"),
    [
        ({"name": "median", "warmup_epochs": -1}, "pruner.median.warmup_epochs"),
        ({"name": "asha", "warmup_epochs": 2}, "pruner.asha.warmup_epochs"),
        ({"name": "hyperband"}, "pruner.name"),
        ("sometimes", "pruner.name"),
    ],
)
def test_a_bad_pruner_is_refused_naming_its_field(
    client: ArchsearchClient, pruner: object, field: str
) -> None:
    with pytest.raises(ApiError) as caught:
        client.submit_study(pruned_study(pruner=pruner))
    assert caught.value.status == 422
    assert caught.value.detail[0].field == field  # type: ignore[union-attr]
