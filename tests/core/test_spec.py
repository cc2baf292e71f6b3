"""Job specs: minimal jobs are valid, everything else is strict."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from archsearch.specs import METHOD_NAMES, OptimizerSpec, TrainJob, parse_job_spec


@pytest.mark.parametrize("method", METHOD_NAMES)
def test_method_and_dataset_alone_make_a_job(method: str) -> None:
    spec = parse_job_spec({"method": method, "dataset": {"name": "digits"}})
    assert spec.method == method
    # A spec survives its own JSON (what the database stores and spec.json holds).
    assert parse_job_spec(spec.model_dump(mode="json")) == spec


def test_specs_are_frozen_and_strict() -> None:
    spec = parse_job_spec({"method": "train", "dataset": {"name": "digits"}})
    assert isinstance(spec, TrainJob)
    with pytest.raises(ValidationError):
        spec.training = spec.training  # type: ignore[misc]
    with pytest.raises(ValidationError, match="Extra inputs"):
        parse_job_spec({"method": "train", "dataset": {"name": "digits"}, "lr": 0.1})


def test_dataset_needs_exactly_one_source() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        parse_job_spec({"method": "train", "dataset": {}})
    with pytest.raises(ValidationError, match="exactly one"):
        parse_job_spec({"method": "train", "dataset": {"name": "digits", "id": "abc"}})


def _method_defaults(method: str) -> dict[str, object]:
    spec = parse_job_spec({"method": method, "dataset": {"name": "digits"}})
    return spec.model_dump(mode="json")["training"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("method", METHOD_NAMES)
def test_partial_training_merges_over_the_method_defaults(method: str) -> None:
    defaults = _method_defaults(method)
    spec = parse_job_spec(
        {"method": method, "dataset": {"name": "digits"}, "training": {"seed": 7}}
    )
    # The effective spec (what spec.json holds) differs from the defaults only in the seed.
    assert spec.model_dump(mode="json")["training"] == {**defaults, "seed": 7}


@pytest.mark.parametrize("method", METHOD_NAMES)
def test_partial_nested_optimizer_keeps_the_method_optimizer(method: str) -> None:
    defaults = _method_defaults(method)
    optimizer = defaults["optimizer"]
    assert isinstance(optimizer, dict)
    spec = parse_job_spec(
        {"method": method, "dataset": {"name": "digits"}, "training": {"optimizer": {"lr": 0.02}}}
    )
    expected = {**defaults, "optimizer": {**optimizer, "lr": 0.02}}
    assert spec.model_dump(mode="json")["training"] == expected


def test_search_defaults_survive_a_seed_and_another_optimizer_starts_fresh() -> None:
    seeded = parse_job_spec(
        {"method": "search", "dataset": {"name": "digits"}, "training": {"seed": 1}}
    )
    assert (seeded.training.optimizer.name, seeded.training.optimizer.lr) == ("sgd", 0.1)
    assert (seeded.training.epochs, seeded.training.batch_size) == (8, 64)
    # Naming another optimiser drops SGD's lr 0.1 (it would be absurd for Adam).
    adam = parse_job_spec(
        {
            "method": "search",
            "dataset": {"name": "digits"},
            "training": {"optimizer": {"name": "adam"}},
        }
    )
    assert adam.training.optimizer == OptimizerSpec(name="adam")
    assert adam.training.epochs == 8
