"""Artifact files as downloads serve them: the row a download needs (`Served`), and the rows
of local files served in the last seconds (`RecentArtifacts`), one per API process.

A local file's row is remembered for a few seconds, so a client that reads one file in many
ranges pays one database lookup rather than one per range.
"""

from __future__ import annotations

import base64
import os
import stat
import uuid
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from archsearch.api.freshness import VERIFIED_ENTRIES, VERIFIED_SECONDS
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.tables import Artifact
from archsearch.jobs.platform.store import ArtifactStore


@dataclass(frozen=True)
class Served:
    """What a download needs of a stored file's row (a job's artifact, a model version's
    file), detached from any session."""

    key: str  # the object store key
    name: str  # the file name the client saves it under
    media_type: str
    sha256: str
    owner: str  # what holds the file, for messages: "job <id>", "model 'm' version 2"

    @classmethod
    def of(cls, artifact: Artifact, store: ArtifactStore) -> Served:
        key = store.artifact_key(artifact.job_id, artifact.name)
        owner = f"job {artifact.job_id}"
        assert artifact.sha256 is not None, "a chart is drawn before it is served"
        return cls(key, artifact.name, artifact.media_type, artifact.sha256, owner)

    def headers(self) -> dict[str, str]:
        digest = base64.b64encode(bytes.fromhex(self.sha256)).decode()
        return {"X-Content-SHA256": self.sha256, "Repr-Digest": f"sha-256=:{digest}:"}

    def missing(self) -> NotFound:
        return NotFound(
            f"artifact {self.name!r} of {self.owner} is recorded but its file is missing"
        )


def regular_file(path: os.PathLike[str]) -> os.stat_result | None:
    """The file's stat (a local syscall: cheaper in the loop than a thread hop), or None."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found if stat.S_ISREG(found.st_mode) else None


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    # Every write renames a new file into place (objects/local.py): a rewritten artifact
    # has a new inode, so its old row can never be served with the new bytes.
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


class RecentArtifacts:
    """Rows of local files served in the last `seconds`, per (job, name, caller's team).

    A hit is used only while the file is the very one stat'ed when the row was read; a
    deleted or rewritten file goes back to the database. Like a cached token, a deleted
    job's file stops being served within `seconds` even if the file lingers."""

    def __init__(self, seconds: float = VERIFIED_SECONDS, size: int = VERIFIED_ENTRIES) -> None:
        self._rows: TTLCache[tuple[Any, ...], tuple[Served, tuple[int, ...]]] = TTLCache(
            maxsize=size, ttl=seconds
        )

    def get(
        self, job_id: uuid.UUID, name: str, team: uuid.UUID | None, store: ArtifactStore
    ) -> tuple[Served, os.PathLike[str], os.stat_result] | None:
        entry = self._rows.get((job_id, name, team))
        if entry is None:
            return None
        served, identity = entry
        path = store.objects.local_path(served.key)
        found = None if path is None else regular_file(path)
        if path is None or found is None or _identity(found) != identity:
            return None
        return served, path, found

    def put(
        self, job_id: uuid.UUID, served: Served, team: uuid.UUID | None, info: os.stat_result
    ) -> None:
        self._rows[(job_id, served.name, team)] = (served, _identity(info))
