"""Loading a job's dataset as tensors at run time. Built-in datasets come from `core.data`;
uploaded ones (`{"id": ...}`) from the `datasets` table and the dataset store, normalised
with their stored statistics. (The submit-time check of the input shape is torch-free and
lives in the domain: `jobs.domain.validation`.)

Datasets load once per worker: a `DatasetCache` keeps each dataset whole, keyed
by name and version (a built-in's source files and statistics, an upload's stored checksum).
The first load writes .npy files to the cache folder: the built-in images as raw uint8
pixels, normalised per batch when a job takes rows (`core.data.inputs`), uploads as float32
already normalised; `inputs.json` holds the normalisation. Every later load, in this process
or another one of the machine, maps those files copy-on-write instead of decoding again, so
the pages are shared between processes and the kernel may drop them under pressure. Subsets
are cut per job.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from archsearch.core.data.catalog import DatasetInfo
from archsearch.core.data.inputs import Inputs
from archsearch.core.data.loaders import Dataset, dataset_version, load_full, training_subset
from archsearch.core.data.uploaded import uploaded_dataset, uploaded_info
from archsearch.jobs.domain.datasets import catalog
from archsearch.jobs.domain.datasets.service import dataset_store
from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.services import Services
from archsearch.specs import DatasetRef, JobBase

SPLITS = ("x_train", "y_train", "x_test", "y_test")
INPUTS = ("x_train", "x_test")
CACHE_FORMAT = "2"  # 2: inputs as stored by `Inputs` plus inputs.json
KEPT_IN_PROCESS = 4  # datasets one process keeps mapped (least recently used dropped first)


class DatasetCache:
    """Whole datasets by key: in this process, then in `root` as .npy files."""

    def __init__(self, root: Path, kept: int = KEPT_IN_PROCESS) -> None:
        self.root, self.kept = root, kept
        self._loaded: OrderedDict[str, Dataset] = OrderedDict()
        self._lock = threading.Lock()  # embedded runners share the process's cache
        self.builds = 0  # datasets decoded and normalised by this process (for tests)

    def get(self, key: str, info: DatasetInfo, build: Callable[[], Dataset]) -> Dataset:
        with self._lock:
            if key in self._loaded:
                self._loaded.move_to_end(key)
                return self._loaded[key]
            data = self._read(key, info)
            if data is None:
                self.builds += 1
                self._write(key, build())
                data = self._read(key, info)
                assert data is not None, f"dataset cache {self.root / key} just written"
            self._loaded[key] = data
            while len(self._loaded) > self.kept:
                self._loaded.popitem(last=False)
            return data

    def _read(self, key: str, info: DatasetInfo) -> Dataset | None:
        folder = self.root / key
        if not folder.is_dir():
            return None
        # "c": copy-on-write, so torch takes the arrays without a read-only warning. The
        # tensors are shared by every job of the process: the engine never writes its data.
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="c") for name in SPLITS}
        split = {name: torch.from_numpy(array) for name, array in arrays.items()}
        stats = json.loads((folder / "inputs.json").read_text())
        x_train, x_test = (Inputs(split[name], **stats) for name in INPUTS)
        return Dataset(info, x_train, split["y_train"], x_test, split["y_test"])

    def _write(self, key: str, data: Dataset) -> None:
        # Written aside and renamed into place: a reader never sees half a dataset, and
        # two processes building the same key at once both end with the same files.
        partial = self.root / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        partial.mkdir(parents=True)
        assert data.x_train.stats == data.x_test.stats, "both splits share one normalisation"
        for name in SPLITS:
            split = getattr(data, name)
            np.save(partial / f"{name}.npy", (split.stored if name in INPUTS else split).numpy())
        (partial / "inputs.json").write_text(json.dumps(data.x_train.stats))
        try:
            partial.rename(self.root / key)
        except OSError:  # another process finished first: its files are the same
            for file in partial.iterdir():
                file.unlink()
            partial.rmdir()


_caches: dict[Path, DatasetCache] = {}
_caches_lock = threading.Lock()


def dataset_cache(root: Path) -> DatasetCache:
    """This process's cache over `root` (one per folder, shared by every job it runs)."""
    with _caches_lock:
        return _caches.setdefault(root, DatasetCache(root))


def load_job_dataset(services: Services, spec: JobBase) -> Dataset:
    ref, settings = spec.dataset, services.settings
    cache = dataset_cache(settings.resolved_dataset_cache_dir)
    if ref.id is None:
        assert ref.name is not None, "a dataset ref names a built-in or an upload"
        name, dirs = ref.name, settings.data_dirs
        key = f"{name}-{dataset_version(name, dirs)}"
        full = cache.get(key, catalog.built_in_info(settings, name), lambda: load_full(name, dirs))
        return training_subset(full, ref, seed=spec.training.seed)
    row = _upload_row(services, ref.id)
    info = _upload_info(row)
    key = f"{row.id}-{row.stored_sha256[:16]}-{CACHE_FORMAT}"
    full = cache.get(key, info, lambda: _load_upload(services, row.id, info))
    return training_subset(full, ref, seed=spec.training.seed)


def _upload_row(services: Services, dataset_id: str) -> UploadedDataset:
    with transaction(services.sessions) as session:
        row = catalog.uploaded(session, dataset_id)
        session.expunge(row)  # read after the session closes
        return row


def _upload_info(row: UploadedDataset) -> DatasetInfo:
    return uploaded_info(
        row.id,
        row.name,
        row.input_shape,
        row.num_classes,
        row.train_size,
        row.test_size,
        row.mean,
        row.std,
    )


def _load_upload(services: Services, dataset_id: str, info: DatasetInfo) -> Dataset:
    arrays = dataset_store(services.settings).load(dataset_id)
    return uploaded_dataset(info, arrays, DatasetRef(id=dataset_id))
