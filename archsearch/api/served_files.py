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

from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.tables import Artifact
from archsearch.jobs.platform.store import ArtifactStore

# As long as a verified token is trusted (api/auth.py): a deleted job's file stops being
# served within the same few seconds.
RECENT_SECONDS = 5.0


@dataclass(frozen=True)
class Served:
    """What a download needs of an artifact row, detached from any session."""

    job_id: uuid.UUID
    name: str
    media_type: str
    sha256: str

    @classmethod
    def of(cls, artifact: Artifact) -> Served:
        return cls(artifact.job_id, artifact.name, artifact.media_type, artifact.sha256)

    def headers(self) -> dict[str, str]:
        digest = base64.b64encode(bytes.fromhex(self.sha256)).decode()
        return {"X-Content-SHA256": self.sha256, "Repr-Digest": f"sha-256=:{digest}:"}

    def missing(self) -> NotFound:
        return NotFound(
            f"artifact {self.name!r} of job {self.job_id} is recorded but its file is missing"
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

    def __init__(self, seconds: float = RECENT_SECONDS, size: int = 10_000) -> None:
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
        path = store.objects.local_path(store.artifact_key(job_id, served.name))
        found = None if path is None else regular_file(path)
        if path is None or found is None or _identity(found) != identity:
            return None
        return served, path, found

    def put(self, served: Served, team: uuid.UUID | None, info: os.stat_result) -> None:
        self._rows[(served.job_id, served.name, team)] = (served, _identity(info))
