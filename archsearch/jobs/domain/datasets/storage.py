"""Files of uploaded datasets, under `<artifact root>/datasets/` so every worker reaches them.

    .incoming/<uuid>.part    an upload being received (deleted when its request ends)
    <id>/data.npz            the validated arrays x, y, x_test, y_test (no pickle)
    <id>/preview.png         image datasets only

A dataset folder is written under a temporary name and renamed into place, so a reader sees a
complete folder or none, and a failed upload leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from archsearch.jobs.domain.errors import DatasetNotFound, LimitExceeded
from archsearch.jobs.platform.store import StoredFile

DATASET_ID = re.compile(r"^ds-[0-9a-f]{16}$")
CHUNK = 1 << 20


@dataclass(frozen=True)
class Received:
    path: Path
    size: int
    sha256: str


class DatasetStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, dataset_id: str) -> Path:
        if not DATASET_ID.fullmatch(dataset_id):
            raise DatasetNotFound(f"no dataset {dataset_id!r}")
        return self.root / dataset_id

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
        """Write the dataset's folder atomically; an existing folder (same id, same content)
        is kept."""
        target = self.folder(dataset_id)
        staging = self.root / f".staging-{uuid.uuid4().hex}"
        staging.mkdir(parents=True)
        try:
            with open(staging / "data.npz", "wb") as handle:
                np.savez(handle, **arrays)  # type: ignore[arg-type]  # numpy stubs miss **arrays
                handle.flush()
                os.fsync(handle.fileno())
            if preview is not None:
                (staging / "preview.png").write_bytes(preview)
            stored = _describe(staging / "data.npz")
            if not target.exists():
                os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return stored

    def load(self, dataset_id: str) -> dict[str, np.ndarray]:
        path = self.folder(dataset_id) / "data.npz"
        if not path.is_file():
            raise DatasetNotFound(f"the files of dataset {dataset_id} are missing from {self.root}")
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in ("x", "y", "x_test", "y_test")}

    def preview_path(self, dataset_id: str) -> Path:
        return self.folder(dataset_id) / "preview.png"

    def delete(self, dataset_id: str) -> None:
        shutil.rmtree(self.folder(dataset_id), ignore_errors=True)


def _describe(path: Path) -> StoredFile:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return StoredFile(size=path.stat().st_size, sha256=digest.hexdigest())
