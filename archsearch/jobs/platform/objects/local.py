"""The local-folder backend: each key is a file under `root` (the embedded default).

Writes go to a hidden temporary file beside the target, are fsynced, and are renamed into
place, so a crash mid-write leaves the previous object (or none), never a torn one.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from archsearch.jobs.platform.objects.base import (
    CHUNK,
    ObjectMissing,
    StorageConfigError,
    StoredObject,
)


class LocalObjectStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.description = f"folder {root}"

    def _path(self, key: str) -> Path:
        # Keys are built by the stores from checked names; this guards against a slip.
        assert ".." not in key.split("/") and not key.startswith("/"), f"bad key {key!r}"
        return self.root / key

    def _staging(self, target: Path) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        return target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")

    def put_bytes(self, key: str, data: bytes) -> None:
        target = self._path(key)
        tmp = self._staging(target)
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)

    def move_in(self, key: str, path: Path) -> None:
        target = self._path(key)
        tmp = self._staging(target)
        try:
            shutil.move(path, tmp)  # a rename on the same filesystem, a copy otherwise
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise ObjectMissing(key) from exc

    def size(self, key: str) -> int | None:
        path = self._path(key)
        return path.stat().st_size if path.is_file() else None

    def iter_range(self, key: str, start: int, stop: int) -> Iterator[bytes]:
        with open(self._path(key), "rb") as handle:
            handle.seek(start)
            remaining = stop - start
            while remaining > 0 and (chunk := handle.read(min(CHUNK, remaining))):
                remaining -= len(chunk)
                yield chunk

    def local_file(self, key: str) -> AbstractContextManager[Path]:
        path = self._path(key)
        if not path.is_file():
            raise ObjectMissing(key)
        return nullcontext(path)

    def local_path(self, key: str) -> Path | None:
        return self._path(key)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def delete_prefix(self, prefix: str) -> None:
        shutil.rmtree(self._path(prefix.rstrip("/")), ignore_errors=True)

    def presigned_url(self, key: str, seconds: int, filename: str) -> str | None:
        return None

    def list_objects(self, prefix: str) -> Iterator[StoredObject]:
        top = self._path(prefix.rstrip("/")) if prefix.strip("/") else self.root
        now = time.time()
        for path in top.rglob("*") if top.is_dir() else ():
            relative = path.relative_to(self.root).as_posix()
            # Hidden names are writes in flight (staging files), never published objects.
            if path.is_file() and not any(p.startswith(".") for p in relative.split("/")):
                yield StoredObject(relative, now - path.stat().st_mtime)

    def check(self) -> None:
        if not (self.root.is_dir() and os.access(self.root, os.W_OK | os.X_OK)):
            raise StorageConfigError(f"{self.description} is not a writable folder")
