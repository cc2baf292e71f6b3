"""Expansion of a study into jobs: arms x grid x seeds, budgets, invalid arms named."""

from __future__ import annotations

import pytest

from archsearch.jobs.domain.studies import expansion, preset
from archsearch.jobs.domain.studies.expansion import InvalidStudy
from archsearch.schemas.studies import StudyArm, StudyCreate
from archsearch.specs.budget import planned_steps


def study(**fields: object) -> StudyCreate:
    return StudyCreate.model_validate({"name": "s", "dataset": {"name": "digits"}, **fields})


def test_arms_times_grid_times_seeds() -> None:
    request = study(
        base={"method": "prune", "training": {"epochs": 2}},
        arms=[
            {"label": "relaxed", "spec": {}},
            {"label": "binary", "spec": {"forward": "binary"}},
        ],
        grid={"density": [0.5, 0.1], "mask_lr": [0.01, 0.1, 1.0]},
        seeds=[0, 1],
    )
    jobs = list(expansion.expand(request, request.arms))
    assert len(jobs) == 2 * 6 * 2 == expansion.planned_count(request, request.arms)
    labels = {job.arm for job in jobs}
    assert "binary,density=0.1,mask_lr=1.0" in labels and len(labels) == 12
    first = jobs[0].spec
    assert (first.method, first.density, first.mask_lr) == ("prune", 0.5, 0.01)  # type: ignore[attr-defined]
    assert [job.spec.training.seed for job in jobs[:2]] == [0, 1]
    assert {job.spec.training.epochs for job in jobs} == {2}  # the base's, kept by every arm
    binary = {job.spec.forward for job in jobs if job.arm.startswith("binary")}  # type: ignore[attr-defined]
    assert binary == {"binary"}


def test_a_grid_alone_labels_arms_by_its_values() -> None:
    request = study(base={"method": "train"}, grid={"training.optimizer.lr": [0.1, 0.01]})
    jobs = list(expansion.expand(request, [StudyArm(label="base")]))
    assert [job.arm for job in jobs[::3]] == ["lr=0.1", "lr=0.01"]
    assert jobs[-1].spec.training.optimizer.lr == 0.01


def test_an_invalid_arm_is_named_with_its_field() -> None:
    request = study(
        base={"method": "prune"},
        arms=[{"label": "ok", "spec": {}}, {"label": "bad", "spec": {"density": 3}}],
    )
    with pytest.raises(InvalidStudy) as caught:
        list(expansion.expand(request, request.arms))
    assert caught.value.field == "arms[bad].density"
    assert "arm 'bad'" in str(caught.value) and "less than or equal to 1" in str(caught.value)


def test_an_unknown_field_of_an_arm_is_named() -> None:
    request = study(arms=[{"label": "typo", "spec": {"method": "train", "epochz": 3}}])
    with pytest.raises(InvalidStudy) as caught:
        list(expansion.expand(request, request.arms))
    assert caught.value.field == "arms[typo].epochz"


@pytest.mark.parametrize("method", ["train", "prune", "search", "grow"])
def test_every_arm_is_fitted_to_the_budget(method: str) -> None:
    request = study(arms=[{"label": method, "spec": {"method": method}}], budget={"steps": 300})
    (job,) = [j for j in expansion.expand(request, request.arms) if j.seed == 0]
    fitted = expansion.fit_budget(job, 300, 1437, 10)
    spent = planned_steps(fitted.spec, 1437, 10)
    per_epoch = -(-1437 // fitted.spec.training.batch_size)
    assert 300 - per_epoch < spent <= 300


def test_a_budget_too_small_names_the_arm() -> None:
    request = study(arms=[{"label": "tiny", "spec": {"method": "train"}}])
    (job, *_) = expansion.expand(request, request.arms)
    with pytest.raises(InvalidStudy) as caught:
        expansion.fit_budget(job, 3, 1437, 10)
    assert caught.value.field == "arms[tiny].budget"


def test_epochs_budget_counts_at_the_base_batch_size() -> None:
    request = study(base={"training": {"batch_size": 100}}, budget={"epochs": 2})
    assert expansion.budget_steps(request, 1437, 10) == 2 * 15


def test_preset_arms_are_valid_jobs_and_grow_matches_prune_sizes() -> None:
    arms = preset.best_small_model(64, 10, densities=(0.5, 0.1))
    request = study(arms=[a.model_dump() for a in arms], seeds=[0])
    jobs = list(expansion.expand(request, arms))
    assert {j.spec.method for j in jobs} == {"train", "prune", "search", "grow"}
    assert len(jobs) == 3 + 2 * 7
    grow = [j for j in jobs if j.spec.method == "grow"]
    assert [g.spec.growth.max_parameters for g in grow] == [  # type: ignore[attr-defined]
        preset.mlp_parameters(64, preset.PRUNE_WIDTH, 10, d) for d in (0.5, 0.1)
    ]
    assert {j.arm for j in jobs if j.spec.method == "search"} == {
        "search-d0.5",
        "random_graph-d0.5",
        "magnitude-d0.5",
        "search-d0.1",
        "random_graph-d0.1",
        "magnitude-d0.1",
    }
    rigl = [j for j in jobs if j.arm.startswith("rigl-")]
    assert [(j.spec.algorithm, j.spec.density) for j in rigl] == [  # type: ignore[attr-defined]
        ("rigl", 0.5),
        ("rigl", 0.1),
    ]


def test_preset_unit_arms_match_the_weight_pruned_parameter_counts() -> None:
    arms = preset.best_small_model(64, 10, densities=(0.5, 0.05))
    request = study(arms=[a.model_dump() for a in arms], seeds=[0])
    units = {j.arm: j.spec for j in expansion.expand(request, arms) if j.arm.startswith("prune-u")}
    assert set(units) == {"prune-units-d0.5", "prune-units-d0.05"}
    for density in (0.5, 0.05):
        spec = units[f"prune-units-d{density:g}"]
        assert spec.granularity == "unit"  # type: ignore[attr-defined]
        kept = round(spec.density * preset.PRUNE_WIDTH)  # type: ignore[attr-defined]
        compact = kept * (64 + 1 + 10) + 10  # the compact MLP 64-kept-10
        weight_pruned = preset.mlp_parameters(64, preset.PRUNE_WIDTH, 10, density)
        assert abs(compact - weight_pruned) <= (64 + 1 + 10) / 2  # within half a neuron


def test_a_unit_granularity_arm_expands_and_a_family_without_units_is_named() -> None:
    request = study(
        base={"method": "prune", "density": 0.25},
        arms=[
            {"label": "weights", "spec": {}},
            {"label": "units", "spec": {"granularity": "unit", "model": {"name": "cnn"}}},
        ],
        seeds=[0],
    )
    jobs = {job.arm: job.spec for job in expansion.expand(request, request.arms)}
    assert jobs["weights"].granularity == "weight"  # type: ignore[attr-defined]
    assert (jobs["units"].granularity, jobs["units"].model.name) == ("unit", "cnn")  # type: ignore[attr-defined]
    graphs = {"granularity": "unit", "model": {"name": "neural_graph"}}
    bad = study(base={"method": "prune"}, arms=[{"label": "graph", "spec": graphs}])
    with pytest.raises(InvalidStudy, match="granularity") as caught:
        list(expansion.expand(bad, bad.arms))
    assert caught.value.field.startswith("arms[graph].")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sampler": "tpe"}, "needs 'space' and 'n_trials'"),
        ({"n_trials": 3}, "need a 'sampler'"),
        ({"preset": "best-small-model", "arms": [{"label": "a"}]}, "builds its own arms"),
        ({"arms": [{"label": "a"}, {"label": "a"}]}, "unique"),
        ({"budget": {"steps": 10, "epochs": 1}}, "exactly one"),
    ],
)
def test_contradictory_requests_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        study(**fields)


def lr(value: float) -> dict[str, object]:
    return {"training": {"optimizer": {"lr": value}}}


def test_a_knob_swept_for_one_arm_is_swept_for_the_baseline_too() -> None:
    request = study(
        base={"method": "prune", "training": {"epochs": 2}},
        arms=[
            {"label": "free-lr1e-3", "spec": {"weights": "free", **lr(1e-3)}},
            {"label": "free-lr1e-2", "spec": {"weights": "free", **lr(1e-2)}},
            {"label": "real", "spec": {"weights": "learned"}},
            {"label": "pinned", "spec": {"method": "train", **lr(3e-3)}},
        ],
        seeds=[0, 1],
    )
    assert expansion.tuned_knobs(request.arms) == {"training.optimizer.lr": [1e-3, 1e-2, 3e-3]}
    jobs = list(expansion.expand(request, request.arms))
    assert len(jobs) == (2 + 3 + 1) * 2 == expansion.planned_count(request, request.arms)
    lrs = {job.arm: job.spec.training.optimizer.lr for job in jobs}
    real = {label: lr for label, lr in lrs.items() if label.startswith("real")}
    assert real == {"real,lr=0.001": 1e-3, "real,lr=0.01": 1e-2, "real,lr=0.003": 3e-3}
    assert lrs["pinned"] == 3e-3 and lrs["free-lr1e-2"] == 1e-2  # set by the arm: kept
    assert {job.spec.training.epochs for job in jobs} == {2}


def test_comparison_axes_and_seeds_are_not_tuning_knobs() -> None:
    arms = [
        StudyArm(label="d1", spec={"method": "prune", "density": 0.1, "training": {"seed": 1}}),
        StudyArm(label="d5", spec={"method": "prune", "density": 0.5, "training": {"seed": 2}}),
        StudyArm(label="train", spec={"method": "train"}),
    ]
    assert expansion.tuned_knobs(arms) == {}
    assert [arm.label for arm in expansion.equally_tuned(arms)] == ["d1", "d5", "train"]
    assert expansion.equally_tuned(preset.best_small_model(64, 10)) == preset.best_small_model(
        64, 10
    )
