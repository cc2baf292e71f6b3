"""What `POST /v1/jobs` answers (embedded, SQLite): job references by unique prefix stored as
full ids, errors that name the field the user wrote, malformed JSON by line and column, one
error code per kind of mistake, and a new job's queue position and why it waits."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from archsearch.api.app import create_app
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.runner import LocalRunner
from archsearch.schemas.jobs import JobStatus
from tests.conftest import TEST_DATASETS

DIGITS = {"name": "digits"}


@pytest.fixture()
def embedded(tmp_path: Path) -> Iterator[tuple[TestClient, Services]]:
    settings = Settings(
        home=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'archsearch.db'}",
        broker_url=None,
        artifact_root=tmp_path / "artifacts",
        data_dir=TEST_DATASETS,
    )
    upgrade(settings.resolved_database_url)
    services = Services.from_settings(settings)
    runner = LocalRunner(services)  # never started: the jobs stay queued
    with TestClient(create_app(services, runner)) as test_client:
        yield test_client, services
    services.engine.dispose()


def _succeeded_prune_job(client: TestClient, services: Services) -> str:
    job_id = client.post("/v1/jobs", json={"method": "prune", "dataset": DIGITS}).json()["id"]
    with transaction(services.sessions) as session:
        job = session.get(Job, uuid.UUID(job_id))
        assert job is not None
        job.status = JobStatus.succeeded
    return str(job_id)


def test_job_references_take_a_unique_prefix_and_store_the_full_id(
    embedded: tuple[TestClient, Services],
) -> None:
    client, services = embedded
    first, second = (_succeeded_prune_job(client, services) for _ in range(2))
    spec = {"method": "transfer", "dataset": DIGITS, "source_job": first[:8]}
    answer = client.post("/v1/jobs", json=spec)
    assert answer.status_code == 201, answer.text
    assert answer.json()["spec"]["source_job"] == first
    spec = {"method": "compare_spectra", "dataset": DIGITS, "jobs": [first, second[:9].upper()]}
    answer = client.post("/v1/jobs", json=spec)
    assert answer.status_code == 201, answer.text
    assert answer.json()["spec"]["jobs"] == [first, second]


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"method": "transfer", "source_job": "zz"}, "source_job", "not a job id"),
        ({"method": "compare_spectra", "jobs": ["OLD", "0123abcd"]}, "jobs[1]", "no job id"),
        ({"method": "grow", "from_job": str(uuid.uuid4())}, "from_job", "no job id starts"),
        ({"method": "train", "dataset": {"name": "digits", "id": "x"}}, "dataset", "exactly one"),
    ],
)
def test_errors_name_the_field_the_user_wrote(
    embedded: tuple[TestClient, Services], spec: dict, field: str, words: str
) -> None:
    client, services = embedded
    if spec.get("jobs"):
        spec = {**spec, "jobs": [_succeeded_prune_job(client, services), *spec["jobs"][1:]]}
    answer = client.post("/v1/jobs", json={"dataset": DIGITS, **spec})
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["error"] == "invalid_request"  # schema or deployment check: one code
    assert body["detail"][0]["field"] == field
    assert words in body["detail"][0]["message"]
    assert not body["detail"][0]["message"].startswith("Value error")


def test_a_job_building_on_an_unfinished_job_names_its_field(
    embedded: tuple[TestClient, Services],
) -> None:
    client, _ = embedded
    queued = client.post("/v1/jobs", json={"method": "prune", "dataset": DIGITS}).json()["id"]
    spec = {"method": "transfer", "dataset": DIGITS, "source_job": queued[:10]}
    body = client.post("/v1/jobs", json=spec).json()
    assert body["detail"][0]["field"] == "source_job"
    assert "is queued" in body["detail"][0]["message"]


def test_malformed_json_is_reported_by_line_and_column(
    embedded: tuple[TestClient, Services],
) -> None:
    client, _ = embedded
    text = '{"method": "train",\n "dataset": {"name": "digits"},\n}'
    answer = client.post("/v1/jobs", content=text, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422
    body = answer.json()
    assert body["error"] == "invalid_json"
    assert body["detail"][0]["field"] == "body"
    assert body["detail"][0]["message"].startswith("malformed JSON at line 3, column 1")


def test_a_new_job_says_where_it_waits_and_why(embedded: tuple[TestClient, Services]) -> None:
    client, _ = embedded
    answers = [client.post("/v1/jobs", json={"method": "train", "dataset": DIGITS}) for _ in "ab"]
    positions = [answer.json()["queue_position"] for answer in answers]
    assert positions == [1, 2]
    assert all(answer.json()["pending_reason"] for answer in answers)


def test_a_study_dry_run_costs_the_study_and_queues_nothing(
    embedded: tuple[TestClient, Services],
) -> None:
    client, _ = embedded
    study = {
        "name": "digits-small",
        "dataset": DIGITS,
        "preset": "best-small-model",
        "preset_densities": [0.2],
        "budget": {"epochs": 20},
        "seeds": [0, 1],
    }
    answer = client.post("/v1/studies", params={"dry_run": "true"}, json=study)
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    assert plan["jobs"] == 20 and sum(arm["jobs"] for arm in plan["arms"]) == 20
    assert {arm["method"] for arm in plan["arms"]} == {"train", "prune", "search", "grow"}
    assert all(arm["optimizer_steps"] <= plan["budget_steps"] for arm in plan["arms"])
    assert plan["optimizer_steps"] == sum(a["optimizer_steps"] * a["jobs"] for a in plan["arms"])
    assert client.get("/v1/studies").json()["data"] == []
    assert client.get("/v1/jobs").json()["data"] == []
    too_small = client.post(
        "/v1/studies", params={"dry_run": "true"}, json={**study, "budget": {"epochs": 1}}
    )
    assert too_small.status_code == 422  # the same checks as a submit
    assert too_small.json()["detail"][0]["field"].endswith(".budget")
