"""Submit refuses a schedule that would do nothing on the job's dataset: a RigL interval the
user fixed that makes no drop/grow update is a 422 naming `rigl.update_interval`, while the
interval left out is shortened to the job's steps and accepted."""

from __future__ import annotations

import pytest

from archsearch.core.errors import UserError
from archsearch.jobs.domain.jobs.validation import validate_submission
from archsearch.jobs.platform.services import Services
from archsearch.specs import parse_job_spec

# digits on 224 samples in batches of 16 for 9 epochs: 126 steps, the study preset's arm.
SHORT_RIGL = {
    "method": "prune",
    "dataset": {"name": "digits", "train_subset": 224},
    "algorithm": "rigl",
    "density": 0.1,
    "training": {"epochs": 9, "batch_size": 16},
}


def test_an_interval_that_makes_no_update_is_refused_naming_the_field(services: Services) -> None:
    spec = parse_job_spec({**SHORT_RIGL, "rigl": {"update_interval": 100}})
    with services.sessions() as session:
        with pytest.raises(UserError, match="100 steps make no RigL update") as caught:
            validate_submission(session, spec, services.settings)
    assert caught.value.field == "rigl.update_interval"


def test_the_interval_left_out_or_short_enough_is_accepted(services: Services) -> None:
    with services.sessions() as session:
        for rigl in ({}, {"update_interval": 90}):
            spec = parse_job_spec({**SHORT_RIGL, "rigl": rigl})
            assert validate_submission(session, spec, services.settings) == spec
