"""Tags: given at submit, replaced with PUT, filtered with `GET /v1/jobs?tag=`; a
label that reads as a tag is the first tag, for clients that only know labels, and the
migration gives jobs of before their label as a tag."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from archsearch.api.app import create_app
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.runner import LocalRunner
from tests.conftest import TEST_DATASETS

SPEC = {"method": "train", "dataset": {"name": "digits"}}


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
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
        yield test_client
    services.engine.dispose()


def submit(client: TestClient, spec: dict[str, Any], *tags: str) -> dict[str, Any]:
    answer = client.post("/v1/jobs", json=spec, params=[("tag", t) for t in tags])
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def tagged(client: TestClient, *tags: str) -> set[str]:
    answer = client.get("/v1/jobs", params=[("tag", t) for t in tags])
    assert answer.status_code == 200
    return {job["id"] for job in answer.json()["data"]}


def test_tags_filter_replace_and_keep_the_label(client: TestClient) -> None:
    first = submit(client, {**SPEC, "label": "baseline"}, "mnist", "wide", "mnist")
    second = submit(client, {**SPEC, "label": "a run for the paper"}, "mnist")
    assert first["tags"] == ["baseline", "mnist", "wide"]  # the label first, no repeat
    assert first["label"] == "baseline"
    assert second["tags"] == ["mnist"]  # free text with spaces stays a label only
    assert tagged(client, "mnist") == {first["id"], second["id"]}
    assert tagged(client, "mnist", "wide") == {first["id"]}
    assert tagged(client, "baseline") == {first["id"]}
    assert tagged(client, "nothing") == set()

    replaced = client.put(f"/v1/jobs/{first['id']}/tags", json={"tags": ["narrow"]})
    assert replaced.status_code == 200 and replaced.json()["tags"] == ["narrow"]
    assert client.get(f"/v1/jobs/{first['id']}").json()["tags"] == ["narrow"]
    assert tagged(client, "mnist") == {second["id"]}
    assert tagged(client, "narrow") == {first["id"]}


@pytest.mark.parametrize("tag", ["two words", "-leading", "a" * 65, "comma,separated"])
def test_a_bad_tag_is_a_422_naming_it(client: TestClient, tag: str) -> None:
    at_submit = client.post("/v1/jobs", json=SPEC, params={"tag": tag})
    assert at_submit.status_code == 422
    assert [e["field"] for e in at_submit.json()["detail"]] == ["query.tag.0"]
    job = submit(client, SPEC)
    on_put = client.put(f"/v1/jobs/{job['id']}/tags", json={"tags": ["ok", tag]})
    assert on_put.status_code == 422
    assert [e["field"] for e in on_put.json()["detail"]] == ["tags.1"]


def test_tags_of_a_missing_job_are_a_404(client: TestClient) -> None:
    answer = client.put(f"/v1/jobs/{uuid.uuid4()}/tags", json={"tags": ["x"]})
    assert answer.status_code == 404


def test_the_migration_turns_labels_into_tags(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0007")
    engine = sa.create_engine(url)
    jobs = {uuid.uuid4(): "baseline", uuid.uuid4(): "free text label", uuid.uuid4(): None}
    insert = sa.text(
        "INSERT INTO jobs (id, method, spec, status, label, progress, step, total_steps, "
        "latest_metrics, attempts, cancel_requested, created_at, updated_at) VALUES "
        "(:id, 'train', '{}', 'succeeded', :label, 1, 1, 1, '{}', 1, 0, "
        "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
    )
    with engine.begin() as connection:
        for job_id, label in jobs.items():
            connection.execute(insert, {"id": job_id.hex, "label": label})
    upgrade(url)
    with engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT tag, job_id FROM job_tags")).all()
        tags = dict(connection.execute(sa.text("SELECT id, tags FROM jobs")).all())
    engine.dispose()
    (baseline,) = [j for j, label in jobs.items() if label == "baseline"]
    assert rows == [("baseline", baseline.hex)]
    assert tags[baseline.hex] == '["baseline"]'
    assert {value for key, value in tags.items() if key != baseline.hex} == {"[]"}
