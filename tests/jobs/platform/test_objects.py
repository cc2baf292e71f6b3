"""Both object-store backends keep the same promises: whole objects, ranges, streamed
large files, prefix deletes. The S3 one runs against a real moto server process."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from boto3.s3.transfer import TransferConfig

from archsearch.jobs.platform.objects import (
    ObjectMissing,
    ObjectStore,
    StorageConfigError,
    StorageUnavailable,
    open_object_store,
    storage_patience,
)
from archsearch.jobs.platform.objects.local import LocalObjectStore
from archsearch.jobs.platform.objects.retry import RetryingObjectStore
from archsearch.jobs.platform.objects.s3 import S3ObjectStore
from archsearch.jobs.platform.settings import Settings
from tests.service import procs
from tests.service.s3 import create_bucket, s3_client, start_s3_server

MIB = 1 << 20
# S3's smallest multipart part is 5 MiB: an 11 MiB file goes up in three parts.
SMALL_PARTS = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url = start_s3_server(tmp_path_factory.mktemp("s3-logs"))
    create_bucket(url, "unit")
    yield url
    proc.stop()


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return LocalObjectStore(tmp_path / "objects")
    url = request.getfixturevalue("endpoint")
    client = s3_client(url)
    prefix = f"t-{tmp_path.name}"
    return S3ObjectStore(client, "unit", prefix, tmp_path / "scratch", SMALL_PARTS)


def test_put_get_size_delete(store: ObjectStore) -> None:
    assert store.size("jobs/a/x.bin") is None
    with pytest.raises(ObjectMissing):
        store.get_bytes("jobs/a/x.bin")
    store.put_bytes("jobs/a/x.bin", b"first")
    store.put_bytes("jobs/a/x.bin", b"second!")  # replaces
    assert store.get_bytes("jobs/a/x.bin") == b"second!" and store.size("jobs/a/x.bin") == 7
    store.delete("jobs/a/x.bin")
    store.delete("jobs/a/x.bin")  # missing is fine
    assert store.size("jobs/a/x.bin") is None


def test_ranges_come_back_exactly(store: ObjectStore) -> None:
    data = bytes(range(256)) * 9000  # 2.3 MB: more than one chunk
    store.put_bytes("blob", data)
    assert b"".join(store.iter_range("blob", 0, len(data))) == data
    assert b"".join(store.iter_range("blob", 10, 110)) == data[10:110]
    assert b"".join(store.iter_range("blob", len(data) - 1, len(data))) == data[-1:]
    assert b"".join(store.iter_range("blob", 5, 5)) == b""


def test_large_file_moves_in_and_back_out(store: ObjectStore, tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(11 * MIB))
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    store.move_in("datasets/ds-1/data.npz", source)
    assert not source.exists()  # consumed
    with store.local_file("datasets/ds-1/data.npz") as path:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    if isinstance(store, S3ObjectStore):  # a multipart upload: the ETag counts its parts
        head = store.client.head_object(Bucket="unit", Key=store._key("datasets/ds-1/data.npz"))
        assert head["ETag"].strip('"').endswith("-3")
        assert list(store.scratch.iterdir()) == []  # the downloaded copy is gone


def test_delete_prefix_removes_one_folder_only(store: ObjectStore) -> None:
    for key in ("datasets/ds-1/data.npz", "datasets/ds-1/preview.png", "datasets/ds-2/data.npz"):
        store.put_bytes(key, b"x")
    store.delete_prefix("datasets/ds-1/")
    assert store.size("datasets/ds-1/data.npz") is None
    assert store.size("datasets/ds-1/preview.png") is None
    assert store.size("datasets/ds-2/data.npz") == 1
    with pytest.raises(ObjectMissing), store.local_file("datasets/ds-1/data.npz"):
        pass


def test_presigned_url_only_from_s3(store: ObjectStore, endpoint: str) -> None:
    store.put_bytes("jobs/a/model.bin", b"weights")
    url = store.presigned_url("jobs/a/model.bin", 60, "model.bin")
    if isinstance(store, LocalObjectStore):
        assert url is None
    else:
        import httpx

        assert url is not None and url.startswith(endpoint)
        assert httpx.get(url).content == b"weights"


def test_settings_choose_the_backend(tmp_path: Path) -> None:
    local = open_object_store(Settings(home=tmp_path))
    assert isinstance(local, LocalObjectStore) and local.root == tmp_path / "artifacts"
    s3 = open_object_store(
        Settings(home=tmp_path, storage_url="s3://bkt/some/prefix", s3_endpoint_url="http://x")
    )
    assert isinstance(s3, RetryingObjectStore)
    inner = s3.inner
    assert isinstance(inner, S3ObjectStore) and (inner.bucket, inner.prefix) == (
        "bkt",
        "some/prefix",
    )
    with pytest.raises(ValueError, match="gs://bkt"):
        open_object_store(Settings(home=tmp_path, storage_url="gs://bkt"))


def test_listing_names_every_published_object_with_its_age(store: ObjectStore) -> None:
    for key in ("checkpoints/a.pt", "jobs/b/model.bin", "jobs/b/metrics.json"):
        store.put_bytes(key, b"x")
    listed = {o.key: o.age_seconds for o in store.list_objects("jobs/")}
    assert set(listed) == {"jobs/b/model.bin", "jobs/b/metrics.json"}
    assert all(-5 < age < 60 for age in listed.values())
    assert [o.key for o in store.list_objects("checkpoints/")] == ["checkpoints/a.pt"]
    store.check()  # answers


def test_a_missing_bucket_is_a_configuration_error(endpoint: str, tmp_path: Path) -> None:
    store = S3ObjectStore(s3_client(endpoint), "no-such-bucket", "", tmp_path)
    with pytest.raises(StorageConfigError, match="no-such-bucket"):
        store.check()
    with pytest.raises(StorageConfigError, match="NoSuchBucket"):
        store.put_bytes("jobs/a/x.bin", b"x")


def test_an_unreachable_store_is_unavailable_and_retried_within_patience(
    tmp_path: Path,
) -> None:
    """Nothing listens on the port: every call fails with `StorageUnavailable`, at once
    without patience, after retrying for the patience inside `storage_patience`."""
    dead = f"http://127.0.0.1:{procs.free_port()}"
    store = RetryingObjectStore(S3ObjectStore(s3_client(dead), "unit", "", tmp_path))
    with pytest.raises(StorageUnavailable, match="unreachable") as first:
        store.get_bytes("jobs/a/x.bin")
    with storage_patience(2.0), pytest.raises(StorageUnavailable) as patient:
        store.put_bytes("jobs/a/x.bin", b"x")
    # The process's outage clock runs from the first failure on, and the patient call paused
    # 0.5 s at least before it retried. Not more: how long each failing call takes is botocore's
    # own retries with random jitter, so how many retries fit in the patience varies.
    assert patient.value.outage_seconds >= first.value.outage_seconds + 0.5
