"""Artifacts and checkpoints of jobs, kept in the process's object store.

    jobs/<job hex>/<name>        an artifact (its size and sha256 are recorded in the database)
    checkpoints/<job hex>.pt     the latest checkpoint of a running job

Every write publishes a whole object or nothing (see `objects`), so a reader never sees half
a file and a redelivered job overwrites rather than duplicates. Names are checked against a
strict pattern before they become part of a key.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass

from archsearch.jobs.platform.objects import ObjectMissing, ObjectStore

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


class ArtifactStore:
    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects

    def artifact_key(self, job_id: uuid.UUID, name: str) -> str:
        return f"jobs/{job_id.hex}/{check_artifact_name(name)}"

    def write_artifact(self, job_id: uuid.UUID, name: str, data: bytes) -> StoredFile:
        self.objects.put_bytes(self.artifact_key(job_id, name), data)
        return StoredFile(size=len(data), sha256=hashlib.sha256(data).hexdigest())

    def read_artifact(self, job_id: uuid.UUID, name: str) -> bytes:
        return self.objects.get_bytes(self.artifact_key(job_id, name))

    def checkpoint_key(self, job_id: uuid.UUID) -> str:
        return f"checkpoints/{job_id.hex}.pt"

    def write_checkpoint(self, job_id: uuid.UUID, data: bytes) -> None:
        self.objects.put_bytes(self.checkpoint_key(job_id), data)

    def has_checkpoint(self, job_id: uuid.UUID) -> bool:
        return self.objects.size(self.checkpoint_key(job_id)) is not None

    def read_checkpoint(self, job_id: uuid.UUID) -> bytes | None:
        try:
            return self.objects.get_bytes(self.checkpoint_key(job_id))
        except ObjectMissing:
            return None

    def delete_checkpoint(self, job_id: uuid.UUID) -> None:
        self.objects.delete(self.checkpoint_key(job_id))
