"""Jobs that would fail in their first seconds are refused at submit, 422 naming the field:
a transfer whose mask cannot fit the new dataset or whose baseline mask was never saved, a
grow job continuing a model grow cannot continue, spectra compared of jobs that are not
prune jobs. The jobs built on are recorded straight into the database, as a worker ends them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.jobs.states import transition
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.jobs import JobStatus
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service


def succeeded_job(sessions: sessionmaker[Session], spec: dict[str, Any]) -> str:
    """A succeeded job of team alpha with `spec` (no artifacts: nothing here reads them)."""
    with transaction(sessions) as session:
        team_id = account_repo.team_by_name(session, "alpha").id
        placement = jobs.Placement(actor="alice", team_id=team_id)
        job = jobs.create_job(session, spec["method"], spec, None, placement)
        transition(job, JobStatus.running, "started", "w")
        transition(job, JobStatus.succeeded, "done", "w")
        return str(job.id)


def submit(api_url: str, accounts: Accounts, spec: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {accounts.tokens['alice']}"}
    response = httpx.post(f"{api_url}/v1/jobs", json=spec, headers=headers)
    if response.status_code == 201:  # only the answer matters: the run is not wanted
        httpx.post(f"{api_url}/v1/jobs/{response.json()['id']}/cancel", headers=headers)
    return response


def refused_field(response: httpx.Response) -> tuple[str, str]:
    assert response.status_code == 422, response.text
    (problem,) = response.json()["detail"]
    return problem["field"], problem["message"]


def test_a_transfer_whose_mask_cannot_fit_the_dataset_is_refused_naming_the_field(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    on_mnist = succeeded_job(sessions, {"method": "prune", "dataset": {"name": "mnist"}})
    transfer = {"method": "transfer", "dataset": {"name": "digits"}, "source_job": on_mnist}
    field, message = refused_field(submit(api_url, accounts, transfer))
    assert field == "first_layer" and "(1, 28, 28)" in message and "first_layer: dense" in message
    # The fix the message names is accepted; so is a dataset of the mask's own shape.
    assert submit(api_url, accounts, {**transfer, "first_layer": "dense"}).status_code == 201
    fashion = {**transfer, "dataset": {"name": "fashion_mnist"}}
    assert submit(api_url, accounts, fashion).status_code == 201


def test_a_transfer_of_a_mask_never_saved_or_of_no_prune_job_is_refused(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    pruned = succeeded_job(sessions, {"method": "prune", "dataset": {"name": "mnist"}})
    trained = succeeded_job(sessions, {"method": "train", "dataset": {"name": "mnist"}})
    base = {"method": "transfer", "dataset": {"name": "fashion_mnist"}}
    field, message = refused_field(
        submit(api_url, accounts, {**base, "source_job": pruned, "mask": "imp"})
    )
    assert field == "mask" and "baselines: ['imp']" in message
    field, message = refused_field(submit(api_url, accounts, {**base, "source_job": trained[:12]}))
    assert field == "source_job" and "train job" in message


def test_grow_and_spectra_builds_on_jobs_that_cannot_serve_are_refused(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    cnn = {"method": "train", "dataset": {"name": "mnist"}, "model": {"name": "cnn"}}
    cnn_job = succeeded_job(sessions, cnn)
    grow = {"method": "grow", "dataset": {"name": "mnist"}, "from_job": cnn_job}
    field, message = refused_field(submit(api_url, accounts, grow))
    assert field == "from_job" and "'cnn'" in message
    mlp_job = succeeded_job(sessions, {"method": "train", "dataset": {"name": "mnist"}})
    field, _ = refused_field(
        submit(api_url, accounts, {**grow, "from_job": mlp_job, "dataset": {"name": "digits"}})
    )
    assert field == "dataset"
    spectra = {"method": "compare_spectra", "dataset": {"name": "mnist"}}
    pruned = succeeded_job(sessions, {"method": "prune", "dataset": {"name": "mnist"}})
    field, _ = refused_field(submit(api_url, accounts, {**spectra, "jobs": [pruned, mlp_job]}))
    assert field == "jobs[1]"
