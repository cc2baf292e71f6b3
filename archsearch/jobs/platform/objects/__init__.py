"""Object storage: one interface for artifacts, checkpoints, uploaded datasets and previews.

Two backends sit behind `ObjectStore`: a folder on the local filesystem (the embedded
default, today's layout under the artifact root) and an S3-compatible bucket (AWS S3, MinIO,
Ceph, ...) chosen with `ARCHSEARCH_STORAGE_URL=s3://bucket/prefix`. Keys are `/`-separated
paths such as `jobs/<job>/model.safetensors`; callers build them, the backends only store.

Every write publishes a complete object or nothing: the local backend writes a temporary
file and renames it into place, and an S3 PUT (or a completed multipart upload) becomes
visible whole. A reader therefore never sees half a checkpoint.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from archsearch.jobs.platform.objects.base import (
    CHUNK,
    ObjectMissing,
    ObjectStore,
    S3Credentials,
    StorageConfigError,
    StorageUnavailable,
    StoredObject,
)
from archsearch.jobs.platform.objects.local import LocalObjectStore
from archsearch.jobs.platform.objects.retry import RetryingObjectStore, storage_patience
from archsearch.jobs.platform.settings import Settings


def open_object_store(settings: Settings) -> ObjectStore:
    """The store `settings` name, shared by everything in this process.

    Cached per process id: a boto3 client must not cross a fork (Celery's pool), and
    building one costs tens of milliseconds, too much per request."""
    secret = settings.s3_secret_access_key
    credentials = S3Credentials(
        settings.s3_endpoint_url,
        settings.s3_region,
        settings.s3_access_key_id,
        None if secret is None else secret.get_secret_value(),
    )
    return _open(os.getpid(), settings.storage_url, credentials, settings.resolved_artifact_root)


@lru_cache(maxsize=8)
def _open(
    _pid: int, storage_url: str | None, s3: S3Credentials, artifact_root: Path
) -> ObjectStore:
    if storage_url is None or storage_url.startswith("file://"):
        root = Path(storage_url.removeprefix("file://")) if storage_url else artifact_root
        return LocalObjectStore(root)
    if storage_url.startswith("s3://"):
        bucket, _, prefix = storage_url.removeprefix("s3://").partition("/")
        if not bucket:
            raise StorageConfigError(f"storage_url {storage_url!r} names no bucket")
        # Imported here: boto3 costs every process 8 MB, and most use a folder.
        from archsearch.jobs.platform.objects.s3 import S3ObjectStore

        return RetryingObjectStore(
            S3ObjectStore.connect(bucket, prefix, s3, artifact_root / ".scratch")
        )
    raise StorageConfigError(
        f"storage_url {storage_url!r} is not supported: use s3://bucket/prefix or file:///path"
    )


__all__ = [
    "CHUNK",
    "ObjectMissing",
    "ObjectStore",
    "S3Credentials",
    "StorageConfigError",
    "StorageUnavailable",
    "StoredObject",
    "open_object_store",
    "storage_patience",
]
