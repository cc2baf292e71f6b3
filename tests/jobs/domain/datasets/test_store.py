"""Uploaded datasets through the service layer on SQLite: stored once per content hash,
nothing left behind by a refused upload, deletion guarded by active jobs, and the arrays a
job trains on normalised with the stored statistics (checked against numpy)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from sqlalchemy import func, select

from archsearch.core.errors import IncompatibleModelError
from archsearch.jobs.domain.datasets import repository, service
from archsearch.jobs.domain.datasets.options import UploadOptions
from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.domain.errors import (
    DatasetInUse,
    DatasetNotFound,
    InvalidUpload,
    LimitExceeded,
    UnknownUploadedDataset,
)
from archsearch.jobs.domain.jobs import repository as job_repository
from archsearch.jobs.domain.jobs.validation import dataset_input_shape, validate_submission
from archsearch.jobs.platform.services import Services
from archsearch.jobs.runtime.data import load_job_dataset
from archsearch.schemas.jobs import JobStatus
from archsearch.specs import DatasetRef, parse_job_spec
from tests.jobs.domain.datasets.files import (
    MALFORMED,
    blobs,
    grey_images,
    image_zip_bytes,
    npz_bytes,
)

DEFAULTS = UploadOptions()


def upload(
    services: Services, name: str, data: bytes, options: UploadOptions = DEFAULTS
) -> tuple[UploadedDataset, bool]:
    with services.sessions() as session:
        return service.upload_dataset(session, services.settings, io.BytesIO(data), name, options)


def stored_state(services: Services) -> tuple[int, list[str]]:
    """Rows in `datasets` and every path under the dataset store."""
    with services.sessions() as session:
        rows = int(session.scalar(select(func.count()).select_from(UploadedDataset)) or 0)
    root = service.dataset_store(services.settings).root
    paths = (
        sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name != ".incoming")
        if root.exists()
        else []
    )
    return rows, paths


def test_same_upload_twice_is_one_dataset(services: Services) -> None:
    x, y = blobs(classes=3, per_class=20, shape=(5,))
    data = npz_bytes(x=x, y=y)
    first, created = upload(services, "table.npz", data, UploadOptions(name="my table"))
    again, created_again = upload(services, "renamed.npz", data)
    assert created and not created_again and again.id == first.id
    assert first.name == "my table" and first.kind == "features" and first.input_shape == [5]
    assert first.train_size + first.test_size == 60 and first.split["source"] == "made"
    train = (
        service.dataset_store(services.settings).load(first.id)["x"].astype(np.float64)
    )  # (N, 5)
    np.testing.assert_allclose(first.mean, train.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(first.std, train.std(axis=0), rtol=1e-12)
    other, created_other = upload(services, "table.npz", data, UploadOptions(split_seed=3))
    assert created_other and other.id != first.id
    assert stored_state(services) == (
        2,
        sorted([first.id, f"{first.id}/data.npz", other.id, f"{other.id}/data.npz"]),
    )


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_refused_uploads_leave_no_row_and_no_file(services: Services, case: str) -> None:
    name, make, error, _ = MALFORMED[case]
    with pytest.raises(error):
        upload(services, name, make())
    assert stored_state(services) == (0, [])


def test_a_failure_after_the_files_are_written_removes_them(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:  # the database refusing the row, after the folder exists
        raise RuntimeError("database went away")

    monkeypatch.setattr(repository, "add_dataset", refuse)
    x, y = grey_images()
    with pytest.raises(RuntimeError):
        upload(services, "pets.zip", image_zip_bytes(x, y, ["a", "b", "c"]))
    assert stored_state(services) == (0, [])


def test_upload_size_limit_stops_the_copy(services: Services) -> None:
    settings = services.settings.model_copy(update={"upload_max_bytes": 1000})
    x, y = blobs()
    with (
        services.sessions() as session,
        pytest.raises(LimitExceeded, match="ARCHSEARCH_UPLOAD_MAX_BYTES"),
    ):
        service.upload_dataset(
            session, settings, io.BytesIO(npz_bytes(x=x, y=y)), "d.npz", UploadOptions()
        )
    assert stored_state(services) == (0, [])


def test_delete_is_refused_while_a_queued_job_uses_the_dataset(services: Services) -> None:
    x, y = blobs()
    dataset, _ = upload(services, "d.npz", npz_bytes(x=x, y=y))
    other, _ = upload(services, "e.npz", npz_bytes(x=x[:45], y=y[:45]))
    with services.sessions() as session:
        job = job_repository.create_job(
            session, "train", {"method": "train", "dataset": {"id": dataset.id}}, None
        )
        session.commit()
        assert repository.active_jobs_using(session, dataset.id) == [job.id]
        assert repository.active_jobs_using(session, other.id) == []
        with pytest.raises(DatasetInUse, match=f"used by 1 queued or running job.*{job.id}"):
            service.delete_dataset(session, services.settings, dataset.id)
        session.rollback()
        job_repository.get_job(session, job.id).status = JobStatus.succeeded
        session.commit()
        service.delete_dataset(session, services.settings, dataset.id)
        with pytest.raises(DatasetNotFound):
            repository.get_dataset(session, dataset.id)
    assert stored_state(services) == (1, sorted([other.id, f"{other.id}/data.npz"]))


def test_job_submission_checks_the_uploaded_shape(services: Services) -> None:
    x, y = blobs(shape=(7,))
    dataset, _ = upload(services, "d.npz", npz_bytes(x=x, y=y))
    with services.sessions() as session:
        spec = parse_job_spec({"method": "train", "dataset": {"id": dataset.id}})
        assert dataset_input_shape(session, spec, services.settings) == (7,)
        cnn = parse_job_spec(
            {"method": "train", "dataset": {"id": dataset.id}, "model": {"name": "cnn"}}
        )
        with pytest.raises(IncompatibleModelError, match="needs image inputs"):
            validate_submission(session, cnn, services.settings)
        missing = parse_job_spec({"method": "train", "dataset": {"id": "ds-0000000000000000"}})
        with pytest.raises(UnknownUploadedDataset) as caught:
            validate_submission(session, missing, services.settings)
        assert caught.value.field == "dataset.id"


def test_worker_normalises_with_the_stored_statistics(services: Services) -> None:
    x, y = grey_images(classes=3, per_class=12, side=6)
    dataset, _ = upload(services, "pets.zip", image_zip_bytes(x, y, ["a", "b", "c"]))
    spec = parse_job_spec({"method": "train", "dataset": {"id": dataset.id}})
    data = load_job_dataset(services, spec)
    assert data.input_shape == (1, 6, 6) and data.num_classes == 3
    assert len(data.y_train) == dataset.train_size == 30 and len(data.y_test) == 6
    # Independently: the training pixels (found by label and content), centred and scaled by numpy.
    arrays = service.dataset_store(services.settings).load(dataset.id)
    raw = arrays["x"].astype(np.float64)
    expected = (raw - raw.mean()) / raw.std()
    x_train = data.x_train.normalised()
    torch.testing.assert_close(
        x_train, torch.from_numpy(expected.astype(np.float32)), rtol=1e-5, atol=1e-5
    )
    assert abs(float(x_train.mean())) < 1e-5
    assert float(x_train.std(unbiased=False)) == pytest.approx(1, abs=1e-5)
    # Every stored training image is an uploaded image, with the label of its folder.
    uploaded = {x[i].tobytes(): int(y[i]) for i in range(len(x))}
    stored = {
        arrays["x"][i, 0].astype(np.uint8).tobytes(): int(arrays["y"][i])
        for i in range(len(arrays["y"]))
    }
    assert all(uploaded[k] == label for k, label in stored.items())
    few = load_job_dataset(
        services,
        spec.model_copy(update={"dataset": DatasetRef(id=dataset.id, samples_per_class=2)}),
    )
    assert torch.bincount(few.y_train).tolist() == [2, 2, 2]


def test_invalid_option_names_the_field(services: Services) -> None:
    with pytest.raises(InvalidUpload) as caught:
        upload(services, "t.csv", b"a,b\n1,2\n", UploadOptions(label_column="species"))
    assert caught.value.field == "label_column"
