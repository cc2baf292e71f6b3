"""Files of uploaded datasets: received on local disk, kept in the object store.

    datasets/<id>/data.npz       the validated arrays x, y, x_test, y_test (no pickle)
    datasets/<id>/preview.png    image datasets only

An upload is copied to a local scratch folder (`<artifact root>/datasets/.incoming/`, each
process its own), validated there, and only then published: the arrays are written to a
local staging file and moved into the object store (a multipart upload for a large file on
S3), so no process ever holds a whole upload in memory and a failed upload publishes
nothing. The dataset id is derived from the upload's content, so an object already under
that id is the same dataset and is kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from archsearch.jobs.domain.errors import DatasetNotFound, LimitExceeded
from archsearch.jobs.platform.objects import (
    ObjectMissing,
    ObjectStore,
    StorageUnavailable,
    open_object_store,
)
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.platform.store import StoredFile

log = logging.getLogger(__name__)
DATASET_ID = re.compile(r"^ds-[0-9a-f]{16}$")
CHUNK = 1 << 20


@dataclass(frozen=True)
class Received:
    path: Path
    size: int
    sha256: str


class DatasetStore:
    def __init__(self, objects: ObjectStore, root: Path) -> None:
        self.objects = objects
        # A local folder: uploads being received, staging, cached previews (and, with the
        # local backend, the datasets themselves, as the objects under `datasets/`).
        self.root = root

    @classmethod
    def for_settings(cls, settings: Settings) -> DatasetStore:
        return cls(open_object_store(settings), settings.resolved_artifact_root / "datasets")

    def prefix(self, dataset_id: str) -> str:
        if not DATASET_ID.fullmatch(dataset_id):
            raise DatasetNotFound(f"no dataset {dataset_id!r}")
        return f"datasets/{dataset_id}/"

    def receive(self, source: BinaryIO, max_bytes: int) -> Received:
        """Copy an upload in chunks while hashing and counting; stop at the limit (413)."""
        incoming = self.root / ".incoming"
        incoming.mkdir(parents=True, exist_ok=True)
        path = incoming / f"{uuid.uuid4().hex}.part"
        digest, size = hashlib.sha256(), 0
        try:
            with open(path, "wb") as handle:
                while chunk := source.read(CHUNK):
                    size += len(chunk)
                    if size > max_bytes:
                        raise LimitExceeded("the uploaded file", max_bytes, "upload_max_bytes")
                    digest.update(chunk)
                    handle.write(chunk)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return Received(path, size, digest.hexdigest())

    def save(
        self, dataset_id: str, arrays: dict[str, np.ndarray], preview: bytes | None
    ) -> StoredFile:
        """Publish the dataset's files; existing ones (same id, same content) are kept."""
        prefix = self.prefix(dataset_id)
        staging = self.root / f".staging-{uuid.uuid4().hex}"
        staging.mkdir(parents=True)
        try:
            data = staging / "data.npz"
            with open(data, "wb") as handle:
                np.savez(handle, **arrays)  # type: ignore[arg-type]  # numpy stubs miss **arrays
                handle.flush()
                os.fsync(handle.fileno())
            stored = _describe(data)
            if self.objects.size(prefix + "data.npz") is None:
                self._publish(prefix, data, preview)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return stored

    def _publish(self, prefix: str, data: Path, preview: bytes | None) -> None:
        """The preview, then the arrays (a dataset whose arrays are visible is complete);
        a failure removes what was published, or leaves it to the reaper's orphan sweep
        when the store is away."""
        try:
            if preview is not None:
                self.objects.put_bytes(prefix + "preview.png", preview)
            self.objects.move_in(prefix + "data.npz", data)
        except BaseException:
            try:
                self.objects.delete_prefix(prefix)
            except StorageUnavailable:
                log.warning("could not remove the partial upload %s; the reaper will", prefix)
            raise

    def load(self, dataset_id: str) -> dict[str, np.ndarray]:
        try:
            with self.objects.local_file(self.prefix(dataset_id) + "data.npz") as path:
                with np.load(path, allow_pickle=False) as npz:
                    return {key: npz[key] for key in ("x", "y", "x_test", "y_test")}
        except ObjectMissing as exc:
            raise DatasetNotFound(
                f"the files of dataset {dataset_id} are missing from {self.objects.description}"
            ) from exc

    def preview_path(self, dataset_id: str) -> Path:
        """A local file holding the preview: the object's own file, or a cached copy (a
        dataset id names its content, so a cached preview never goes stale)."""
        key = self.prefix(dataset_id) + "preview.png"
        own = self.objects.local_path(key)
        if own is not None:
            return own
        cached = self.root / ".previews" / f"{dataset_id}.png"
        if not cached.is_file():
            try:
                data = self.objects.get_bytes(key)
            except ObjectMissing as exc:
                raise DatasetNotFound(f"dataset {dataset_id} has no stored preview") from exc
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f".{uuid.uuid4().hex}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, cached)
        return cached

    def delete(self, dataset_id: str) -> None:
        self.objects.delete_prefix(self.prefix(dataset_id))


def _describe(path: Path) -> StoredFile:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return StoredFile(size=path.stat().st_size, sha256=digest.hexdigest())
