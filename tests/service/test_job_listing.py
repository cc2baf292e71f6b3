"""`GET /v1/jobs?id_prefix=`: any unique prefix of a job id finds the job (embedded), and
error bodies are `ErrorBody`, named in the OpenAPI schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from archsearch.api.app import create_app
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.runner import LocalRunner
from archsearch.schemas.errors import ErrorBody
from tests.conftest import TEST_DATASETS


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        home=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'archsearch.db'}",
        broker_url=None,
        artifact_root=tmp_path / "artifacts",
        data_dir=TEST_DATASETS,
        json_max_bytes=2000,
    )
    upgrade(settings.resolved_database_url)
    services = Services.from_settings(settings)
    runner = LocalRunner(services)  # never started: the jobs stay queued
    with TestClient(create_app(services, runner)) as test_client:
        yield test_client
    services.engine.dispose()


def job_ids(answer: dict) -> set[str]:  # type: ignore[type-arg]
    return {job["id"] for job in answer["data"]}


def test_id_prefix_finds_the_jobs_whose_id_starts_so(client: TestClient) -> None:
    spec = {"method": "train", "dataset": {"name": "digits"}}
    ids = [client.post("/v1/jobs", json=spec).json()["id"] for _ in range(6)]
    for job_id in ids:
        digits = job_id.replace("-", "")
        for prefix in (digits[:8], digits[:8].upper(), digits):
            found = job_ids(client.get("/v1/jobs", params={"id_prefix": prefix}).json())
            assert found == {job_id}, prefix
    first = ids[0][0]
    found = job_ids(client.get("/v1/jobs", params={"id_prefix": first}).json())
    assert found == {i for i in ids if i.startswith(first)}


@pytest.mark.parametrize("prefix", ["", "xyz", "12-34", "a" * 33])
def test_a_bad_id_prefix_is_a_422_naming_the_field(client: TestClient, prefix: str) -> None:
    answer = client.get("/v1/jobs", params={"id_prefix": prefix})
    assert answer.status_code == 422
    body = ErrorBody.model_validate(answer.json())
    assert body.error == "invalid_request"
    assert isinstance(body.detail, list) and [e.field for e in body.detail] == ["query.id_prefix"]


def test_error_bodies_are_error_body_and_documented(client: TestClient) -> None:
    missing = client.get("/v1/jobs/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404
    assert ErrorBody.model_validate(missing.json()).error == "not_found"

    too_big = client.post(
        "/v1/jobs", content=b"{" + b" " * 3000 + b"}", headers={"content-type": "application/json"}
    )
    assert too_big.status_code == 413
    assert "ARCHSEARCH_JSON_MAX_BYTES" in str(ErrorBody.model_validate(too_big.json()).detail)

    schema = client.get("/openapi.json").json()
    assert "ErrorBody" in schema["components"]["schemas"]
    responses = schema["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]
    for status in ("404", "422"):
        ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/ErrorBody"), (status, ref)


@pytest.mark.parametrize("sort", ["-test_accuracy", "duration", "-parameters", "created_at"])
def test_every_sort_pages_on_sqlite_too(client: TestClient, sort: str) -> None:
    spec = {"method": "train", "dataset": {"name": "digits"}}
    ids = {client.post("/v1/jobs", json=spec).json()["id"] for _ in range(5)}
    seen: list[str] = []
    params = {"sort": sort, "limit": 2}
    while True:
        page = client.get("/v1/jobs", params=params).json()
        seen += [job["id"] for job in page["data"]]
        if not page["next_cursor"]:
            break
        params["cursor"] = page["next_cursor"]
    assert sorted(seen) == sorted(ids)  # queued jobs have no key: all tie, ordered by id
