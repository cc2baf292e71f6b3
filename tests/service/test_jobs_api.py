"""The whole path over HTTP: API process, Celery worker process, PostgreSQL, Redis."""

from __future__ import annotations

import hashlib
import uuid

import httpx
import pytest
import torch
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ApiError, ArchsearchClient
from archsearch.core.data.loaders import load_dataset
from archsearch.core.evaluation import evaluate
from archsearch.core.export import load_model
from archsearch.jobs.domain.tables import Artifact, Job, JobEvent, Metric
from archsearch.specs import DatasetRef

pytestmark = pytest.mark.service

DIGITS_JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 3}}
STANDARD_ARTIFACTS = {
    "spec.json",
    "metrics.json",
    "architecture.json",
    "model.safetensors",
    "curves.png",
}


def count_jobs(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Job)) or 0)


def test_train_job_end_to_end(
    client: ArchsearchClient, sessions: sessionmaker[Session], tmp_path
) -> None:
    job = client.submit(DIGITS_JOB)
    assert job.status == "queued"
    final = client.wait(job.id, timeout=120)
    assert final.status == "succeeded", final.error
    assert final.progress == 1.0 and final.attempts == 1

    job_id = job.id
    with sessions() as session:
        events = [
            e.to_status
            for e in session.scalars(
                select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
            )
        ]
        assert events == ["queued", "running", "succeeded"]
        stored = {
            a.name: a for a in session.scalars(select(Artifact).where(Artifact.job_id == job_id))
        }
        epochs = session.scalars(
            select(Metric.step).where(Metric.job_id == job_id, Metric.name == "test_accuracy")
        ).all()
    assert STANDARD_ARTIFACTS <= set(stored)
    assert len(epochs) == 3

    series = client.metrics(job.id)
    assert [p.value for p in series["test_accuracy"]][-1] == pytest.approx(
        final.latest_metrics["test_accuracy"]
    )

    # curves.png is drawn on its first download: no file, size nor digest before it.
    assert stored["curves.png"].sha256 is None and stored["curves.png"].chart is not None
    paths = {p.name: p for p in client.download_all(job.id, tmp_path)}
    with sessions() as session:
        stored = {
            a.name: a for a in session.scalars(select(Artifact).where(Artifact.job_id == job_id))
        }
    for name, path in paths.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == stored[name].sha256
        assert path.stat().st_size == stored[name].size

    # The downloaded model alone reproduces the reported accuracy.
    model = load_model(
        paths["architecture.json"].read_text(), paths["model.safetensors"].read_bytes()
    )
    data = load_dataset(DatasetRef(name="digits"), ())
    _, accuracy = evaluate(model, data.x_test, data.y_test, torch.device("cpu"))
    assert accuracy == pytest.approx(final.latest_metrics["test_accuracy"], abs=1e-9)


def test_download_headers_and_range(
    client: ArchsearchClient, api_url: str, auth_headers: dict[str, str]
) -> None:
    job = client.wait(client.submit(DIGITS_JOB).id, timeout=120)
    url = f"{api_url}/v1/jobs/{job.id}/artifacts/model.safetensors"
    full = httpx.get(url, headers=auth_headers)
    assert full.status_code == 200
    assert int(full.headers["content-length"]) == len(full.content)
    assert full.headers["x-content-sha256"] == hashlib.sha256(full.content).hexdigest()
    part = httpx.get(url, headers={**auth_headers, "Range": "bytes=10-109"})
    assert part.status_code == 206
    assert part.content == full.content[10:110]
    assert part.headers["content-range"] == f"bytes 10-109/{len(full.content)}"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"method": "train"}, "dataset", "Field required"),
        ({"method": "trian", "dataset": {"name": "digits"}}, "method", "'train'"),
        ({"method": "train", "dataset": {"name": "minst"}}, "dataset.name", "available: digits"),
        (
            {
                "method": "train",
                "dataset": {"name": "digits"},
                "training": {"optimizer": {"name": "adm"}},
            },
            "training.optimizer.name",
            "'sgd', 'adam' or 'adamw'",
        ),
        (
            {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 0}},
            "training.epochs",
            "greater than or equal to 1",
        ),
        (
            {
                "method": "train",
                "dataset": {"name": "digits"},
                "model": {"name": "cnn", "channels": [4, 4, 4, 4]},
            },
            "model",
            "only 8 pixels",
        ),
        (
            {"method": "train", "dataset": {"name": "digits"}, "model": {"name": "resnet"}},
            "model.name",
            "'mlp'",
        ),
        ({"method": "train", "dataset": {"name": "digits"}, "epochs": 3}, "epochs", "Extra inputs"),
    ],
)
def test_invalid_specs_are_422_naming_the_field(
    client: ArchsearchClient, sessions: sessionmaker[Session], body: dict, field: str, words: str
) -> None:
    before = count_jobs(sessions)
    with pytest.raises(ApiError) as caught:
        client.submit(body)
    assert caught.value.status == 422
    details = caught.value.detail
    assert any(d.field == field and words in d.message for d in details), details
    assert count_jobs(sessions) == before  # nothing stored for a rejected job


def test_unknown_things_are_404(
    client: ArchsearchClient, api_url: str, auth_headers: dict[str, str]
) -> None:
    job = client.wait(client.submit(DIGITS_JOB).id, timeout=120)
    for path in (
        f"/v1/jobs/{uuid.uuid4()}",
        "/v1/jobs/not-a-uuid",
        f"/v1/jobs/{uuid.uuid4()}/artifacts",
        f"/v1/jobs/{job.id}/artifacts/nothing.bin",
        f"/v1/jobs/{job.id}/artifacts/..%2F..%2F..%2Fetc%2Fpasswd",
        f"/v1/jobs/{job.id}/artifacts/%2E%2E",
    ):
        response = httpx.get(api_url + path, headers=auth_headers)
        assert response.status_code == 404, path
        assert response.json()["error"] == "not_found"
        assert "root:" not in response.text


def test_cancel_finished_job_is_409(client: ArchsearchClient) -> None:
    job = client.wait(client.submit(DIGITS_JOB).id, timeout=120)
    with pytest.raises(ApiError) as caught:
        client.cancel(job.id)
    assert caught.value.status == 409
    assert "succeeded" in str(caught.value.detail)
    assert client.get_job(job.id).status == "succeeded"


LONG_JOB = {  # about a minute of training (the shipped MNIST's 4,000 images), cancelled
    "method": "train",
    "dataset": {"name": "mnist"},
    "training": {"epochs": 500, "batch_size": 64},
}


def test_cancel_queued_and_running_jobs(client: ArchsearchClient) -> None:
    running = client.submit(LONG_JOB)
    queued = client.submit(DIGITS_JOB)  # waits behind the long job: the worker runs one at a time
    _wait_status(client, running.id, "running")
    assert client.cancel(queued.id).status == "cancelled"  # at once
    assert client.cancel(running.id).cancel_requested is True
    final = client.wait(running.id, timeout=60)
    assert final.status == "cancelled"
    assert [e.to_status for e in client.events(running.id)] == [
        "queued",
        "running",
        "cancelled",
    ]
    # The cancelled queued job is never run, even when its message reaches the worker.
    assert client.wait(queued.id, timeout=5).attempts == 0


def _wait_status(client: ArchsearchClient, job_id: str, status: str, timeout: float = 60) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get_job(job_id)
        if job.status == status:
            return job
        time.sleep(0.1)
    raise TimeoutError(f"job {job_id} never became {status}")


def test_diverging_job_fails_with_actionable_message(client: ArchsearchClient) -> None:
    spec = {
        "method": "train",
        "dataset": {"name": "digits"},
        "training": {"epochs": 3, "optimizer": {"name": "sgd", "lr": 10.0, "momentum": 0.99}},
    }
    job = client.wait(client.submit(spec).id, timeout=120)
    assert job.status == "failed"
    assert "diverged" in job.error and "optimizer.lr" in job.error
    assert job.attempts == 1  # a user error is never retried


def test_list_filters_and_cursor_pagination(client: ArchsearchClient) -> None:
    label = f"page-{uuid.uuid4().hex[:6]}"
    ids = [client.submit({**DIGITS_JOB, "label": label}).id for _ in range(5)]
    for job_id in ids:
        client.wait(job_id, timeout=120)
    seen, cursor = [], None
    while True:
        page = client.list_jobs(method=["train"], limit=2, cursor=cursor)
        assert len(page.data) <= 2
        seen += [j.id for j in page.data]
        if not (cursor := page.next_cursor):
            break
    mine = [job_id for job_id in seen if job_id in ids]
    assert mine == list(reversed(ids))  # newest first, each once
    assert len(seen) == len(set(seen))
    failed = client.list_jobs(status=["failed"], limit=500).data
    assert all(j.status == "failed" for j in failed)
    with pytest.raises(ApiError) as caught:
        client.list_jobs(cursor="garbage")
    assert caught.value.status == 422


def test_datasets_and_readiness(client: ArchsearchClient, api_url: str) -> None:
    names = {d.name for d in client.datasets()}
    assert {"digits", "mnist", "fashion_mnist"} <= names
    ready = httpx.get(f"{api_url}/readyz").json()
    assert ready == {
        "status": "ready",
        "checks": {"database": True, "queue": True, "object_store": True},
    }
    schema = httpx.get(f"{api_url}/openapi.json").json()
    assert "/v1/jobs/{job_id}/artifacts/{name}" in schema["paths"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"method": "transfer", "dataset": {"name": "digits"}}, "source_job"),
        (
            {
                "method": "compare_spectra",
                "dataset": {"name": "digits"},
                "jobs": [str(uuid.uuid4())],
            },
            "jobs",
        ),
        (
            {"method": "transfer", "dataset": {"name": "digits"}, "source_job": str(uuid.uuid4())},
            "source_job",
        ),
    ],
)
def test_jobs_missing_their_inputs_are_refused_at_submit(
    client: ArchsearchClient, body: dict, field: str
) -> None:
    with pytest.raises(ApiError) as caught:
        client.submit(body)
    assert caught.value.status == 422
    assert caught.value.detail[0].field == field
