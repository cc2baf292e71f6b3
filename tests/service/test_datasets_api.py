"""Uploaded datasets over the whole path: API process, Celery worker, PostgreSQL, Redis.

Every format uploads and is stored once; the issue's malformed files get their documented
error and leave no row and no file; train, search, prune and grow jobs each train on an
uploaded dataset; deletion is refused while a job uses the dataset.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch
from PIL import Image
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ApiError, ArchsearchClient
from archsearch.core.evaluation import evaluate
from archsearch.core.export import load_model
from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.domain.tables import Job
from archsearch.schemas.datasets import UploadedDatasetPublic
from tests.jobs.domain.datasets.files import (
    MALFORMED,
    blobs,
    csv_bytes,
    grey_images,
    idx_zip_bytes,
    image_zip_bytes,
    npz_bytes,
)
from tests.service.test_jobs_api import _wait_status

pytestmark = pytest.mark.service


def upload(
    client: ArchsearchClient, tmp_path: Path, name: str, data: bytes, **options: object
) -> dict:
    path = tmp_path / name
    path.write_bytes(data)
    return client.upload_dataset(path, **options)


def dataset_rows(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return int(session.scalar(select(func.count()).select_from(UploadedDataset)) or 0)


def store_files(service_env: dict[str, str]) -> set[str]:
    root = Path(service_env["ARCHSEARCH_ARTIFACT_ROOT"]) / "datasets"
    return (
        {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        if root.exists()
        else set()
    )


@pytest.fixture(scope="module")
def image_dataset(api_url: str, tmp_path_factory: pytest.TempPathFactory, token: str) -> dict:
    """4 classes of 8x8 grey images whose brightness tells the class; the split is made."""
    x, y = grey_images(classes=4, per_class=40, side=8)
    with ArchsearchClient(api_url, token=token) as client:
        return upload(
            client,
            tmp_path_factory.mktemp("img"),
            "shades.zip",
            image_zip_bytes(x, y, ["black", "dark", "light", "white"]),
        )


def test_every_format_uploads_once(
    client: ArchsearchClient,
    api_url: str,
    tmp_path: Path,
    sessions: sessionmaker[Session],
    auth_headers: dict[str, str],
) -> None:
    x, y = blobs(classes=3, per_class=20, shape=(5,))
    gx, gy = grey_images(classes=3, per_class=10, side=6)
    tx, ty = grey_images(classes=3, per_class=5, side=6, seed=1)
    files = {
        "blobs.npz": npz_bytes(x=x, y=y),
        "blobs.csv": csv_bytes(x, y),
        "mnistlike.zip": idx_zip_bytes(gx, gy, tx, ty, gz=True),
        "folders.zip": image_zip_bytes(gx, gy, ["a", "b", "c"]),
    }
    for name, data in files.items():
        first = upload(client, tmp_path, name, data)
        again = httpx.post(
            f"{api_url}/v1/datasets", files={"file": (name, data)}, headers=auth_headers
        )
        assert again.status_code == 200 and again.json()["id"] == first.id, name  # stored once
        assert first.num_classes == 3 and first.train_size + first.test_size in (
            60,
            45,
            30,
        ), name
        assert client.get_dataset(first.id) == first
        with sessions() as session:
            row = session.get(UploadedDataset, first.id)
            assert row is not None and row.class_counts == first.class_counts
    listed = {d.name: d for d in client.datasets()}
    assert {"digits", "blobs.npz", "blobs.csv", "mnistlike.zip", "folders.zip"} <= set(listed)
    assert listed["mnistlike.zip"].input_shape == [1, 6, 6]
    assert listed["blobs.csv"].input_shape == [5]
    preview = Image.open(io.BytesIO(client.dataset_preview(listed["folders.zip"].id)))
    assert preview.format == "PNG" and preview.size[1] == 3 * (32 + 2)  # one row per class
    with pytest.raises(ApiError) as caught:
        client.dataset_preview(listed["blobs.npz"].id)
    assert caught.value.status == 404 and "no preview" in str(caught.value.detail)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_uploads_are_refused_and_leave_nothing(
    client: ArchsearchClient,
    tmp_path: Path,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
    case: str,
) -> None:
    name, make, _, words = MALFORMED[case]
    rows, files = dataset_rows(sessions), store_files(service_env)
    with pytest.raises(ApiError) as caught:
        upload(client, tmp_path, name, make())
    if case == "zip_bomb":  # over a limit: 413 naming the limit
        assert (caught.value.status, caught.value.error) == (413, "too_large")
        assert words in caught.value.detail
    else:
        assert (caught.value.status, caught.value.error) == (422, "invalid_request")
        (first_error, *_) = caught.value.detail
        assert first_error.field == "file" and words in first_error.message
    assert dataset_rows(sessions) == rows
    assert store_files(service_env) == files


JOBS = {
    "train": {"training": {"epochs": 6, "batch_size": 32}},
    "search": {"training": {"epochs": 3, "batch_size": 32}},
    "prune": {"training": {"epochs": 3, "batch_size": 32}},
    "grow": {
        "training": {"epochs": 3, "batch_size": 32},
        "growth": {"steps_between_growth": 4, "max_growth_steps": 3, "baseline": False},
    },
}


@pytest.mark.parametrize("method", list(JOBS))
def test_every_method_trains_on_an_uploaded_dataset(
    client: ArchsearchClient, image_dataset: dict, tmp_path: Path, method: str
) -> None:
    spec = {"method": method, "dataset": {"id": image_dataset.id}, **JOBS[method]}
    job = client.wait(client.submit(spec).id, timeout=240)
    assert job.status == "succeeded", job.error
    paths = {p.name: p for p in client.download_all(job.id, tmp_path)}
    architecture = json.loads(paths["architecture.json"].read_text())
    assert architecture["input_shape"] == image_dataset.input_shape == [1, 8, 8]
    assert architecture["num_classes"] == 4
    assert json.loads(paths["spec.json"].read_text())["dataset"]["id"] == image_dataset.id
    assert 0.0 <= job.latest_metrics["test_accuracy"] <= 1.0


def test_downloaded_model_reproduces_accuracy_on_the_uploaded_test_split(
    client: ArchsearchClient, image_dataset: dict, tmp_path: Path, service_env: dict[str, str]
) -> None:
    spec = {
        "method": "train",
        "dataset": {"id": image_dataset.id},
        "training": {"epochs": 10, "batch_size": 16, "optimizer": {"lr": 0.01}},
    }
    job = client.wait(client.submit(spec).id, timeout=240)
    assert job.status == "succeeded", job.error
    paths = {p.name: p for p in client.download_all(job.id, tmp_path)}
    model = load_model(
        paths["architecture.json"].read_text(), paths["model.safetensors"].read_bytes()
    )
    # Independently of the worker: the stored test split, normalised by numpy with the
    # statistics the API reports.
    stored = (
        Path(service_env["ARCHSEARCH_ARTIFACT_ROOT"]) / "datasets" / image_dataset.id / "data.npz"
    )
    with np.load(stored, allow_pickle=False) as arrays:
        x_test, y_test = arrays["x_test"].astype(np.float64), arrays["y_test"]
    x_test = (x_test - image_dataset.mean[0]) / image_dataset.std[0]
    _, accuracy = evaluate(
        model,
        torch.from_numpy(x_test.astype(np.float32)),
        torch.from_numpy(y_test),
        torch.device("cpu"),
    )
    assert accuracy == pytest.approx(job.latest_metrics["test_accuracy"], abs=1e-9)
    assert accuracy >= 0.9  # brightness separates the four classes


def test_delete_is_refused_while_a_job_runs_then_removes_everything(
    client: ArchsearchClient,
    tmp_path: Path,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
) -> None:
    x, y = blobs(classes=2, per_class=400, shape=(4,), seed=5)
    dataset = upload(client, tmp_path, "long.npz", npz_bytes(x=x, y=y))
    cnn = {"method": "train", "dataset": {"id": dataset.id}, "model": {"name": "cnn"}}
    with pytest.raises(ApiError) as caught:
        client.submit(cnn)  # a table cannot feed a CNN: refused at submit, not minutes later
    assert caught.value.status == 422 and caught.value.detail[0].field == "model"

    long_job = client.submit(
        {
            "method": "train",
            "dataset": {"id": dataset.id},
            "training": {"epochs": 500, "batch_size": 8},
        }
    )
    _wait_status(client, long_job.id, "running")
    with pytest.raises(ApiError) as caught:
        client.delete_dataset(dataset.id)
    assert caught.value.status == 409 and str(long_job.id) in caught.value.detail
    assert client.get_dataset(dataset.id).id == dataset.id

    client.cancel(long_job.id)
    assert client.wait(long_job.id, timeout=60).status == "cancelled"
    client.delete_dataset(dataset.id)
    assert not any(f.startswith(dataset.id) for f in store_files(service_env))
    with sessions() as session:
        assert session.get(UploadedDataset, dataset.id) is None
        assert session.get(Job, long_job.id) is not None  # the job's record stays
    with pytest.raises(ApiError) as caught:
        client.get_dataset(dataset.id)
    assert caught.value.status == 404
    with pytest.raises(ApiError) as caught:
        client.submit({"method": "train", "dataset": {"id": dataset.id}})
    assert caught.value.status == 422 and caught.value.detail[0].field == "dataset.id"


def test_cli_upload_list_show_delete(api_url: str, tmp_path: Path, token: str) -> None:
    from click.testing import CliRunner

    from archsearch.cli.main import main

    x, y = blobs(classes=2, per_class=15, shape=(3,), seed=9)
    path = tmp_path / "cli.csv"
    path.write_bytes(csv_bytes(x, ["no" if label == 0 else "yes" for label in y], "answer"))
    runner = CliRunner(env={"ARCHSEARCH_TOKEN": token})
    uploaded = runner.invoke(
        main,
        [
            "datasets",
            "upload",
            str(path),
            "--label-column",
            "answer",
            "--name",
            "cli table",
            "--url",
            api_url,
        ],
    )
    assert uploaded.exit_code == 0, uploaded.output
    dataset_id = uploaded.output.split()[0]
    assert (
        dataset_id.startswith("ds-")
        and "2 classes, 24 train / 6 test (split: made)" in uploaded.output
    )
    listed = runner.invoke(main, ["datasets", "list", "--url", api_url])
    assert dataset_id in listed.output and "digits" in listed.output
    shown = runner.invoke(main, ["datasets", "show", dataset_id, "--url", api_url])
    assert json.loads(shown.output)["class_names"] == ["no", "yes"]
    assert runner.invoke(main, ["datasets", "delete", dataset_id, "--url", api_url]).exit_code == 0
    missing = runner.invoke(main, ["datasets", "show", dataset_id, "--url", api_url])
    assert missing.exit_code == 1 and "HTTP 404" in missing.output


def test_a_delete_waits_for_a_submit_in_flight_and_then_sees_its_job(
    client: ArchsearchClient,
    tmp_path: Path,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
) -> None:
    """The submit's shared row lock: a delete cannot slip between the check and the commit."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from archsearch.jobs.domain.datasets import catalog
    from archsearch.jobs.domain.datasets import service as uploads
    from archsearch.jobs.domain.errors import DatasetInUse
    from archsearch.jobs.domain.jobs import repository as job_repository
    from archsearch.jobs.platform.settings import Settings
    from archsearch.specs import parse_job_spec

    x, y = blobs(classes=2, per_class=10, shape=(3,), seed=11)
    dataset = upload(client, tmp_path, "race.npz", npz_bytes(x=x, y=y))
    settings = Settings(artifact_root=Path(service_env["ARCHSEARCH_ARTIFACT_ROOT"]))
    spec = parse_job_spec({"method": "train", "dataset": {"id": dataset.id}})
    with sessions() as submitting, sessions() as deleting:
        facts = catalog.resolve(submitting, settings, spec.dataset, hold=True)
        assert facts.input_shape == (3,)  # validated, not committed
        deleting.execute(text("SET LOCAL lock_timeout = '300ms'"))
        with pytest.raises(OperationalError, match="lock timeout"):
            uploads.delete_dataset(deleting, settings, dataset.id)
        deleting.rollback()
        job = job_repository.create_job(submitting, "train", spec.model_dump(mode="json"), None)
        submitting.commit()  # queued (never enqueued: only its row matters here)
        with pytest.raises(DatasetInUse, match=str(job.id)):
            uploads.delete_dataset(deleting, settings, dataset.id)
        deleting.rollback()
        job_repository.request_cancel(submitting, job.id)
        submitting.commit()
        uploads.delete_dataset(deleting, settings, dataset.id)
    assert not any(f.startswith(dataset.id) for f in store_files(service_env))


def test_a_preview_ignores_range_headers_instead_of_a_plain_text_error(
    api_url: str, image_dataset: UploadedDatasetPublic, token: str
) -> None:
    url = f"{api_url}/v1/datasets/{image_dataset.id}/preview.png"
    headers = {"Authorization": f"Bearer {token}"}
    whole = httpx.get(url, headers=headers)
    for bad_range in ("bytes=5-1", "bytes=999999-"):
        answer = httpx.get(url, headers={**headers, "Range": bad_range})
        assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"
        assert answer.content == whole.content
