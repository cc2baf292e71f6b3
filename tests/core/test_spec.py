"""Job specs: minimal jobs are valid, everything else is strict."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from archsearch.core.spec import METHOD_NAMES, TrainJob, parse_job_spec


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
