"""Artifact and checkpoint storage on a filesystem every worker and the API can reach.

Artifacts are written to a temporary file and renamed into place, so a reader never sees
half a file and a redelivered job overwrites rather than duplicates. Names are checked
against a strict pattern before they touch a path.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

ARTIFACT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class InvalidArtifactName(ValueError):
    pass


@dataclass(frozen=True)
class StoredFile:
    size: int
    sha256: str


def check_artifact_name(name: str) -> str:
    if not ARTIFACT_NAME.fullmatch(name) or ".." in name:
        raise InvalidArtifactName(
            f"artifact name {name!r} is not allowed: use letters, digits, '.', '_' and '-'"
        )
    return name


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class ArtifactStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def artifact_path(self, job_id: uuid.UUID, name: str) -> Path:
        return self.root / "jobs" / job_id.hex / check_artifact_name(name)

    def write_artifact(self, job_id: uuid.UUID, name: str, data: bytes) -> StoredFile:
        _atomic_write(self.artifact_path(job_id, name), data)
        return StoredFile(size=len(data), sha256=hashlib.sha256(data).hexdigest())

    def read_artifact(self, job_id: uuid.UUID, name: str) -> bytes:
        return self.artifact_path(job_id, name).read_bytes()

    def checkpoint_path(self, job_id: uuid.UUID) -> Path:
        return self.root / "checkpoints" / f"{job_id.hex}.pt"

    def write_checkpoint(self, job_id: uuid.UUID, data: bytes) -> None:
        _atomic_write(self.checkpoint_path(job_id), data)

    def has_checkpoint(self, job_id: uuid.UUID) -> bool:
        return self.checkpoint_path(job_id).exists()

    def read_checkpoint(self, job_id: uuid.UUID) -> bytes | None:
        path = self.checkpoint_path(job_id)
        return path.read_bytes() if path.exists() else None

    def delete_checkpoint(self, job_id: uuid.UUID) -> None:
        self.checkpoint_path(job_id).unlink(missing_ok=True)
