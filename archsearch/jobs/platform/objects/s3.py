"""The S3-compatible backend (AWS S3, MinIO, Ceph, ...) through boto3.

boto3 rather than obstore: it is the reference client every S3-compatible server tests
against, its managed transfer (`upload_file`/`upload_fileobj`) switches to a multipart
upload above `multipart_threshold` and streams from disk in parts, and it reads the usual
credentials (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, profiles, instance roles) itself
unless `s3_access_key_id`/`s3_secret_access_key` are set. It is already a dependency of
most deployments that talk to S3, where obstore would add a Rust extension for speed this
service does not need (a download is streamed at the API's pace, see bench/storage.py).
Downloads are ranged GETs read in chunks, so nothing holds a whole file in memory.

Errors are sorted at this edge: a store that does not answer, or answers 5xx, throttling
or a timeout, raises `StorageUnavailable` (worth retrying, see `retry.py`); a missing
bucket or refused credentials raise `StorageConfigError` (for the administrator); a
missing key raises `ObjectMissing`.

An object appears only when its PUT or its multipart upload completes, which is the
"write then publish" a checkpoint needs: a worker killed mid-upload leaves the previous
checkpoint in place.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError, NoCredentialsError
from botocore.exceptions import ConnectionError as BotoConnectionError

from archsearch.jobs.platform.objects.base import (
    CHUNK,
    ObjectMissing,
    S3Credentials,
    StorageConfigError,
    StorageUnavailable,
    StoredObject,
)

MISSING_CODES = frozenset({"404", "NoSuchKey", "NotFound"})
CONFIG_CODES = frozenset(
    {
        "NoSuchBucket",
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AllAccessDisabled",
        "InvalidBucketName",
        "403",
    }
)
TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "ServiceUnavailable",
        "InternalError",
    }
)
TRANSFER = TransferConfig(
    multipart_threshold=64 << 20, multipart_chunksize=16 << 20, max_concurrency=4
)


def _is_missing(exc: ClientError) -> bool:
    return str(exc.response.get("Error", {}).get("Code")) in MISSING_CODES


def _client_error(exc: ClientError, where: str) -> Exception | None:
    """What a refusal of the server means here (None: let it through unchanged)."""
    code = str(exc.response.get("Error", {}).get("Code"))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    if code in CONFIG_CODES:
        return StorageConfigError(
            f"{where} refused the request ({code}): check the bucket and the credentials"
        )
    if code in TRANSIENT_CODES or status >= 500:
        return StorageUnavailable(f"{where} answered {code} (HTTP {status})")
    return None


def translated(exc: BaseException, where: str) -> Exception | None:
    """The storage error `exc` stands for, or None when it is none of ours to sort."""
    if isinstance(exc, S3UploadFailedError) and isinstance(exc.__context__, ClientError):
        exc = exc.__context__  # boto3 wraps the server's answer, without chaining it
    if isinstance(exc, ClientError):
        return _client_error(exc, where)
    if isinstance(exc, NoCredentialsError):
        return StorageConfigError(f"{where}: no credentials are configured")
    if isinstance(exc, BotoConnectionError | HTTPClientError):  # refused, reset, timed out
        return StorageUnavailable(f"{where} is unreachable ({type(exc).__name__}: {exc})")
    return None


@contextmanager
def _sorted_errors(where: str) -> Iterator[None]:
    try:
        yield
    except (
        ClientError,
        BotoConnectionError,
        HTTPClientError,
        NoCredentialsError,
        S3UploadFailedError,
    ) as exc:
        mapped = translated(exc, where)
        if mapped is None:
            raise
        raise mapped from exc


class S3ObjectStore:
    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        scratch: Path,
        transfer: TransferConfig = TRANSFER,
    ) -> None:
        self.client = client
        self.transfer = transfer
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.scratch = scratch
        self.description = f"s3://{bucket}/{self.prefix}"

    @classmethod
    def connect(cls, bucket: str, prefix: str, s3: S3Credentials, scratch: Path) -> S3ObjectStore:
        # Path-style addressing when an endpoint is given: MinIO and moto serve buckets
        # under the path, not as subdomains of a host nobody resolves.
        config = Config(
            s3={"addressing_style": "path" if s3.endpoint_url else "auto"},
            # Few quick retries and short connect timeouts: a longer outage is the job's
            # retry loop's to ride out (`retry.py`), and the API answers 503 soon.
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=30,
            max_pool_connections=16,
        )
        session = boto3.session.Session(
            aws_access_key_id=s3.access_key_id, aws_secret_access_key=s3.secret_access_key
        )
        client = session.client(
            "s3", endpoint_url=s3.endpoint_url, region_name=s3.region, config=config
        )
        return cls(client, bucket, prefix, scratch)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_bytes(self, key: str, data: bytes) -> None:
        with _sorted_errors(self.description):
            self.client.upload_fileobj(
                io.BytesIO(data), self.bucket, self._key(key), Config=self.transfer
            )

    def move_in(self, key: str, path: Path) -> None:
        with _sorted_errors(self.description):
            self.client.upload_file(str(path), self.bucket, self._key(key), Config=self.transfer)
        path.unlink()

    def get_bytes(self, key: str) -> bytes:
        with _sorted_errors(self.description):
            try:
                body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
            except ClientError as exc:
                if _is_missing(exc):
                    raise ObjectMissing(key) from exc
                raise
            with body:
                return bytes(body.read())

    def size(self, key: str) -> int | None:
        with _sorted_errors(self.description):
            try:
                head = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            except ClientError as exc:
                if _is_missing(exc):
                    return None
                raise
        return int(head["ContentLength"])

    def iter_range(self, key: str, start: int, stop: int) -> Iterator[bytes]:
        if stop <= start:
            return
        with _sorted_errors(self.description):
            body = self.client.get_object(
                Bucket=self.bucket, Key=self._key(key), Range=f"bytes={start}-{stop - 1}"
            )["Body"]
            try:
                yield from body.iter_chunks(CHUNK)
            finally:
                body.close()

    @contextmanager
    def local_file(self, key: str) -> Iterator[Path]:
        self.scratch.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.scratch, suffix=".download")
        path = Path(name)
        try:
            with open(fd, "wb") as handle, _sorted_errors(self.description):
                self._download(key, handle)
            yield path
        finally:
            path.unlink(missing_ok=True)

    def _download(self, key: str, handle: io.BufferedWriter) -> None:
        try:
            self.client.download_fileobj(self.bucket, self._key(key), handle, Config=self.transfer)
        except ClientError as exc:
            if _is_missing(exc):
                raise ObjectMissing(key) from exc
            raise

    def local_path(self, key: str) -> Path | None:
        return None

    def delete(self, key: str) -> None:
        with _sorted_errors(self.description):
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def delete_prefix(self, prefix: str) -> None:
        with _sorted_errors(self.description):
            for page in self._pages(prefix):
                keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
                if keys:  # a page holds at most 1,000 keys, the most one DeleteObjects takes
                    self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})

    def _pages(self, prefix: str) -> Iterator[dict[str, Any]]:
        paginator = self.client.get_paginator("list_objects_v2")
        yield from paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix))

    def list_objects(self, prefix: str) -> Iterator[StoredObject]:
        now = datetime.now(UTC)
        strip = f"{self.prefix}/" if self.prefix else ""
        with _sorted_errors(self.description):
            for page in self._pages(prefix):
                for item in page.get("Contents", []):
                    age = (now - item["LastModified"]).total_seconds()
                    yield StoredObject(str(item["Key"]).removeprefix(strip), age)

    def check(self) -> None:
        with _sorted_errors(self.description):
            try:
                self.client.head_bucket(Bucket=self.bucket)
            except ClientError as exc:
                if _is_missing(exc):  # HEAD has no body: a missing bucket is a bare 404
                    raise StorageConfigError(
                        f"{self.description}: the bucket {self.bucket!r} does not exist"
                    ) from exc
                raise

    def presigned_url(self, key: str, seconds: int, filename: str) -> str | None:
        url = self.client.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self.bucket,
                "Key": self._key(key),
                "ResponseContentDisposition": f'attachment; filename="{filename}"',
            },
            ExpiresIn=seconds,
        )
        return str(url)
