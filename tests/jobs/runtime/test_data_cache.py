"""Datasets load once per worker: a job's dataset comes from the process's cache,
else from the .npy files an earlier process wrote, and is decoded only when neither has it;
it equals a fresh load, subsets included, and a changed source is a new key."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from archsearch.core.data.loaders import dataset_version, load_dataset
from archsearch.core.data.uploaded import uploaded_dataset
from archsearch.jobs.domain.datasets import service
from archsearch.jobs.domain.datasets.options import UploadOptions
from archsearch.jobs.domain.errors import UnknownUploadedDataset
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime import data as runtime_data
from archsearch.jobs.runtime.data import DatasetCache, load_job_dataset
from archsearch.specs import DatasetRef, parse_job_spec
from tests.conftest import TEST_DATASETS
from tests.jobs.domain.datasets.files import npz_bytes


@pytest.fixture()
def services(tmp_path: Path) -> Services:
    settings = Settings(home=tmp_path, broker_url=None)
    upgrade(settings.resolved_database_url)
    return Services.from_settings(settings)


def spec_for(dataset: dict[str, object], seed: int = 0) -> object:
    return parse_job_spec(
        {"method": "train", "dataset": dataset, "training": {"epochs": 1, "seed": seed}}
    )


def test_second_load_comes_from_the_process_and_equals_a_fresh_load(
    services: Services,
) -> None:
    first = load_job_dataset(services, spec_for({"name": "digits"}))
    second = load_job_dataset(services, spec_for({"name": "digits"}))
    fresh = load_dataset(DatasetRef(name="digits"), services.settings.data_dirs)
    cache = runtime_data.dataset_cache(services.settings.resolved_dataset_cache_dir)
    assert cache.builds == 1 and second.x_train is first.x_train
    for split in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(first, split), getattr(fresh, split)), split
    assert first.x_train.dtype == torch.float32 and first.info == fresh.info


def test_another_process_maps_the_files_instead_of_decoding(services: Services) -> None:
    load_job_dataset(services, spec_for({"name": "digits"}))
    root = services.settings.resolved_dataset_cache_dir
    (folder,) = [p for p in root.iterdir() if p.name.startswith("digits-")]
    other = DatasetCache(root)  # what a second worker process of the machine starts with
    data = other.get(folder.name, load_dataset(DatasetRef(name="digits"), ()).info, _fails)
    assert other.builds == 0
    stored = np.load(folder / "x_train.npy", mmap_mode="r")
    assert isinstance(stored, np.memmap) and stored.dtype == np.uint8  # raw pixels, 1 byte each
    assert torch.equal(data.x_train[:], load_dataset(DatasetRef(name="digits"), ()).x_train[:])
    assert len(data.x_train) == len(load_dataset(DatasetRef(name="digits"), ()).x_train)


def test_subsets_are_cut_per_job_as_a_fresh_load_cuts_them(services: Services) -> None:
    ref = {"name": "digits", "train_subset": 100}
    for seed in (0, 3):
        got = load_job_dataset(services, spec_for(ref, seed))
        fresh = load_dataset(DatasetRef.model_validate(ref), (), seed=seed)
        assert torch.equal(got.x_train, fresh.x_train) and torch.equal(got.y_train, fresh.y_train)
    cache = runtime_data.dataset_cache(services.settings.resolved_dataset_cache_dir)
    assert cache.builds == 1


def test_a_changed_source_file_is_a_new_version(tmp_path: Path) -> None:
    folder = tmp_path / "mnist"
    folder.mkdir()
    for file in (TEST_DATASETS / "mnist").iterdir():
        (folder / file.name).symlink_to(file)
    before = dataset_version("mnist", (tmp_path,))
    assert dataset_version("mnist", (tmp_path,)) == before
    target = folder / "train-labels-idx1-ubyte.gz"
    copy = tmp_path / "copy"
    copy.write_bytes(target.read_bytes())
    target.unlink()
    copy.rename(target)  # same bytes, another file: the key must not trust it blindly
    os.utime(target, ns=(1, 1))
    assert dataset_version("mnist", (tmp_path,)) != before


def test_the_process_keeps_a_bounded_number_of_datasets(tmp_path: Path) -> None:
    cache = DatasetCache(tmp_path, kept=1)
    digits = load_dataset(DatasetRef(name="digits"), ())
    cache.get("a", digits.info, lambda: digits)
    cache.get("b", digits.info, lambda: digits)
    assert list(cache._loaded) == ["b"] and cache.builds == 2
    cache.get("a", digits.info, _fails)  # dropped from memory, still on disk
    assert cache.builds == 2


def _fails() -> runtime_data.Dataset:
    raise AssertionError("the cache decoded a dataset it already had")


def test_uploads_share_the_cache_and_a_deleted_upload_is_refused(services: Services) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(60, 1, 6, 6), dtype=np.uint8)
    y = np.arange(60) % 3
    data = npz_bytes(x=x, y=y, x_test=x[:12], y_test=y[:12])
    with services.sessions() as session:
        row, _ = service.upload_dataset(
            session, services.settings, io.BytesIO(data), "tiny.npz", UploadOptions()
        )
        session.commit()
    first = load_job_dataset(services, spec_for({"id": row.id}))
    again = load_job_dataset(services, spec_for({"id": row.id, "train_subset": 30}))
    cache = runtime_data.dataset_cache(services.settings.resolved_dataset_cache_dir)
    assert cache.builds == 1 and len(again.x_train) == 30
    arrays = service.dataset_store(services.settings).load(row.id)
    fresh = uploaded_dataset(runtime_data._upload_info(row), arrays, DatasetRef(id=row.id))
    for split in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(first, split), getattr(fresh, split)), split
    with services.sessions() as session:
        service.delete_dataset(session, services.settings, row.id)
    with pytest.raises(UnknownUploadedDataset):
        load_job_dataset(services, spec_for({"id": row.id}))
