"""RigL (dynamic sparse training): exact density through every update, grown weights start at
zero, a job learns on digits, a short job still rewires (and says how often), and the spec
refuses what RigL cannot run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.methods import prune
from archsearch.core.models import Architecture, create_model
from archsearch.core.nn.masked_model import mask_model
from archsearch.core.pruning.rigl import RigL, RigLSchedule, layer_densities
from archsearch.specs import parse_job_spec
from archsearch.specs.errors import problem_field, problem_message
from archsearch.specs.prune import (
    MIN_RIGL_UPDATES,
    PAPER_UPDATE_INTERVAL,
    PruneJob,
    RigLSpec,
    rigl_updates,
)

SMALL = {"name": "mlp", "hidden": [64]}


def _masked_small(data_dirs: tuple[Path, ...]):  # type: ignore[no-untyped-def]
    data = load_dataset(
        parse_job_spec({"method": "train", "dataset": {"name": "digits"}}).dataset, data_dirs
    )
    spec = parse_job_spec({"method": "prune", "dataset": {"name": "digits"}, "model": SMALL})
    torch.manual_seed(0)
    model = create_model(Architecture(spec.model, data.input_shape, data.num_classes))
    mask_model(model, logit_init=0.05, t_hard=100.0, t_soft=10.0)
    return model, data


def test_every_update_keeps_each_layers_count_and_grows_weights_at_zero(
    data_dirs: tuple[Path, ...],
) -> None:
    model, data = _masked_small(data_dirs)
    rigl = RigL(model, data, RigLSchedule(density=0.2, total_steps=1000), 64, seed=0)
    counts = {n: int(m.sum()) for n, m in rigl.masks().items()}
    assert abs(sum(counts.values()) - 0.2 * sum(m.numel() for m in rigl.masks().values())) <= 2
    for _ in range(3):
        with torch.no_grad():  # as training would: every weight moves, kept or not
            for layer in rigl.layers.values():
                layer.weight.add_(0.01)
        before = rigl.masks()
        rigl.update(0.3)
        after = rigl.masks()
        assert {n: int(m.sum()) for n, m in after.items()} == counts
        for name, layer in rigl.layers.items():
            grown = after[name] & ~before[name]
            assert grown.any(), f"{name}: the update swapped nothing"
            assert torch.all(layer.weight[grown] == 0)
            assert torch.all(layer.weight[~after[name]] == 0)
    assert rigl.updates == 3


def test_erk_densities_total_the_target_and_cap_small_layers_at_one() -> None:
    shapes = {"a": torch.Size([256, 784]), "b": torch.Size([10, 256])}
    densities = layer_densities(shapes, 0.1, "erk")
    kept = sum(densities[n] * s.numel() for n, s in shapes.items())
    assert kept == pytest.approx(0.1 * sum(s.numel() for s in shapes.values()))
    assert densities["b"] > densities["a"]
    assert max(layer_densities(shapes, 0.5, "erk").values()) == 1.0
    assert layer_densities(shapes, 0.3, "uniform") == {"a": 0.3, "b": 0.3}


def test_schedule_decays_by_cosine_and_stops_at_end_fraction() -> None:
    schedule = RigLSchedule(density=0.1, total_steps=1000, drop_fraction=0.3, end_fraction=0.5)
    assert schedule.fraction_at(0) == pytest.approx(0.3)
    assert schedule.fraction_at(250) == pytest.approx(0.15)
    assert schedule.fraction_at(500) == 0.0


@pytest.mark.slow  # about 20 s at a load of 15 on 2 cores
def test_a_rigl_prune_job_learns_digits_at_its_density(data_dirs: tuple[Path, ...]) -> None:
    spec = parse_job_spec(
        {
            "method": "prune",
            "dataset": {"name": "digits"},
            "model": SMALL,
            "algorithm": "rigl",
            "density": 0.2,
            "training": {"epochs": 20},
            "rigl": {"update_interval": 10},
        }
    )
    result = prune.run(spec, load_dataset(spec.dataset, data_dirs), InMemoryContext())  # type: ignore[arg-type]
    assert result.metrics["density"] == pytest.approx(0.2, abs=1e-3)
    # Chance is 0.10; measured 0.80 (a static random mask at this density: 0.79).
    assert result.metrics["test_accuracy"] > 0.7


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"rigl": {"drop_fraction": 1.5}}, "rigl.drop_fraction", "less than 1"),
        ({"rigl": {"distribution": "gaussian"}}, "rigl.distribution", "erk"),
        ({"density": None}, "body", "density: rigl trains at a fixed density"),
        ({"weights": "free", "density": 0.1}, "body", "weights 'learned'"),
        ({"granularity": "unit"}, "body", "granularity 'weight'"),
    ],
)
def test_the_spec_refuses_what_rigl_cannot_run(
    fields: dict[str, object], field: str, words: str
) -> None:
    job = {"method": "prune", "dataset": {"name": "digits"}, "algorithm": "rigl", **fields}
    with pytest.raises(ValidationError) as caught:
        parse_job_spec(job)
    (error,) = caught.value.errors()
    assert problem_field(error) == field
    assert words in problem_message(error)


def test_rigl_as_a_baseline_counts_its_training_round() -> None:
    spec = parse_job_spec({"method": "prune", "dataset": {"name": "digits"}, "baselines": ["rigl"]})
    assert spec.planned_epochs() == 2 * spec.training.epochs  # type: ignore[attr-defined]


def test_a_short_job_shortens_the_interval_to_make_updates() -> None:
    # The study preset's 126 steps: at the paper's interval no update at all.
    assert rigl_updates(PAPER_UPDATE_INTERVAL, 0.75, 126) == 0
    assert RigLSpec().interval_for(126) == 9
    assert rigl_updates(9, 0.75, 126) == MIN_RIGL_UPDATES
    assert RigLSpec().interval_for(100_000) == PAPER_UPDATE_INTERVAL
    assert RigLSpec(update_interval=100).interval_for(126) == 100  # the user's value runs
    for steps in range(2, 3000):
        interval = RigLSpec().interval_for(steps)
        most = math.ceil(0.75 * steps) - 1  # an update after every step before the end
        assert 1 <= interval <= PAPER_UPDATE_INTERVAL
        assert rigl_updates(interval, 0.75, steps) >= min(MIN_RIGL_UPDATES, most), steps


def test_the_counted_updates_are_those_the_hooks_make(data_dirs: tuple[Path, ...]) -> None:
    model, data = _masked_small(data_dirs)
    schedule = RigLSchedule(density=0.2, total_steps=126, interval=RigLSpec().interval_for(126))
    rigl = RigL(model, data, schedule, 64, seed=0)
    for step in range(126):
        rigl.after_step(step)
    assert rigl.updates == rigl_updates(schedule.interval, schedule.end_fraction, 126) == 10


def test_a_126_step_rigl_job_rewires_and_reports_its_updates(data_dirs: tuple[Path, ...]) -> None:
    spec = parse_job_spec(
        {
            "method": "prune",
            # 224 samples in batches of 16: 14 steps an epoch, 9 epochs = 126 steps.
            "dataset": {"name": "digits", "train_subset": 224},
            "model": SMALL,
            "algorithm": "rigl",
            "density": 0.2,
            "training": {"epochs": 9, "batch_size": 16},
        }
    )
    data = load_dataset(spec.dataset, data_dirs)
    result = prune.run(spec, data, InMemoryContext())  # type: ignore[arg-type]
    assert len(data.x_train) == 224  # 126 steps
    assert result.metrics["rigl_update_interval"] == 9
    assert result.metrics["rigl_updates"] == MIN_RIGL_UPDATES


def test_an_explicit_interval_that_makes_no_update_is_a_problem_naming_the_field() -> None:
    job = {
        "method": "prune",
        "dataset": {"name": "digits"},
        "density": 0.2,
        "training": {"epochs": 9, "batch_size": 16},
    }
    explicit = parse_job_spec({**job, "algorithm": "rigl", "rigl": {"update_interval": 100}})
    assert isinstance(explicit, PruneJob)
    n = 224  # 14 steps an epoch, 126 in all
    (problem,) = explicit.schedule_problems(n).items()
    assert problem[0] == "rigl.update_interval"
    assert "make no RigL update" in problem[1] and "leave it out" in problem[1]
    assert explicit.schedule_problems(100 * n).items() == {}.items()
    scaled = parse_job_spec({**job, "algorithm": "rigl"})
    assert scaled.schedule_problems(n) == {}
    as_baseline = parse_job_spec({**job, "baselines": ["rigl"], "rigl": {"update_interval": 100}})
    assert "rigl.update_interval" in as_baseline.schedule_problems(n)
