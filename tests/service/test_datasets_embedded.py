"""The embedded path (SQLite, local runner, API in-process): upload a dataset, train on it,
and the HTTP answers of uploads (413 limits, 409 in use, 422 fields, 404 gone)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from archsearch.api.app import create_app
from archsearch.jobs.domain.datasets.service import dataset_store
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.runner import LocalRunner
from tests.conftest import TEST_DATASETS
from tests.jobs.domain.datasets.files import blobs, csv_bytes, npz_bytes


@pytest.fixture()
def embedded(tmp_path: Path) -> Iterator[tuple[TestClient, LocalRunner, Services]]:
    # Everything explicit, so no ARCHSEARCH_* variable of the environment turns this into a
    # team setup.
    settings = Settings(
        home=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'archsearch.db'}",
        broker_url=None,
        artifact_root=tmp_path / "artifacts",
        data_dir=TEST_DATASETS,
        upload_max_bytes=200_000,
    )
    upgrade(settings.resolved_database_url)
    services = Services.from_settings(settings)
    runner = LocalRunner(services)  # started by the test, so a job can be held in `queued`
    with TestClient(create_app(services, runner)) as client:
        yield client, runner, services
    if runner.ping():  # started by the test
        runner.stop()
    services.engine.dispose()


def wait_job(client: TestClient, job_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while (job := client.get(f"/v1/jobs/{job_id}").json())["status"] not in (
        "succeeded",
        "failed",
        "cancelled",
    ):
        assert time.monotonic() < deadline, f"job {job_id} still {job['status']}"
        time.sleep(0.2)
    return job


def test_upload_train_and_delete_on_sqlite(
    embedded: tuple[TestClient, LocalRunner, Services],
) -> None:
    client, runner, _ = embedded
    x, y = blobs(classes=3, per_class=30, shape=(6,))
    names = [["low", "mid", "high"][label] for label in y]
    answer = client.post(
        "/v1/datasets",
        files={"file": ("plants.csv", csv_bytes(x, names, "kind"))},
        data={"label_column": "kind", "name": "plants"},
    )
    assert answer.status_code == 201, answer.text
    dataset = answer.json()
    assert answer.headers["location"] == f"/v1/datasets/{dataset['id']}"
    assert dataset["class_names"] == ["high", "low", "mid"] and dataset["input_shape"] == [6]
    listed = {d["id"]: d for d in client.get("/v1/datasets").json()["data"]}
    assert listed[None]["source"] == "builtin" and listed[dataset["id"]]["name"] == "plants"
    assert client.get(f"/v1/datasets/{dataset['id']}/preview.png").status_code == 404  # a table

    cnn = client.post(
        "/v1/jobs",
        json={"method": "train", "dataset": {"id": dataset["id"]}, "model": {"name": "cnn"}},
    )
    assert cnn.status_code == 422 and cnn.json()["detail"][0]["field"] == "model"

    spec = {
        "method": "train",
        "dataset": {"id": dataset["id"]},
        "training": {"epochs": 15, "batch_size": 16},
    }
    job = client.post("/v1/jobs", json=spec).json()
    refused = client.delete(f"/v1/datasets/{dataset['id']}")
    assert refused.status_code == 409 and job["id"] in refused.json()["detail"]

    runner.start()
    final = wait_job(client, job["id"])
    assert final["status"] == "succeeded", final["error"]
    assert final["latest_metrics"]["test_accuracy"] >= 0.9  # three well separated blobs

    assert client.delete(f"/v1/datasets/{dataset['id']}").status_code == 204
    assert client.get(f"/v1/datasets/{dataset['id']}").json()["error"] == "not_found"
    again = client.post("/v1/jobs", json=spec)
    assert again.status_code == 422 and again.json()["detail"][0]["field"] == "dataset.id"


def test_upload_limits_and_fields_over_http(
    embedded: tuple[TestClient, LocalRunner, Services],
) -> None:
    client, _, services = embedded
    x, y = blobs(classes=2, per_class=4000, shape=(8,))
    big = npz_bytes(x=x, y=y)
    assert len(big) > 200_000 + (
        64 << 10
    )  # refused from its Content-Length, before the body is read
    answer = client.post("/v1/datasets", files={"file": ("big.npz", big)})
    assert answer.status_code == 413
    assert answer.json() == {"error": "too_large", "detail": answer.json()["detail"]}
    assert "200,000 bytes (ARCHSEARCH_UPLOAD_MAX_BYTES)" in answer.json()["detail"]

    small = npz_bytes(x=x[:40], y=y[:40])
    bad = client.post(
        "/v1/datasets", files={"file": ("s.npz", small)}, data={"test_fraction": "1.5"}
    )
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "test_fraction"
    wrong = client.post(
        "/v1/datasets", files={"file": ("s.npz", npz_bytes(x=x[:40, :3, None], y=y[:40]))}
    )
    assert wrong.status_code == 422
    assert wrong.json()["detail"] == [
        {"field": "file", "message": wrong.json()["detail"][0]["message"]}
    ]
    assert "x has 3 dimensions" in wrong.json()["detail"][0]["message"]
    root = dataset_store(services.settings).root
    assert [p for p in root.rglob("*") if p.is_file()] == []
