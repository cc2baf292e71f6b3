"""The service on an S3-compatible object store, with nothing shared on disk.

A real moto server process plays S3 over HTTP on loopback. The API and each worker get an
empty folder of their own: every artifact, checkpoint, uploaded dataset and preview must
travel through the bucket. A worker is SIGKILLed mid-job and another resumes it from the
checkpoint in the bucket; downloads keep their sha256 and Range; an uploaded dataset
trains on a worker that never saw the upload.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from archsearch.client import ArchsearchClient
from archsearch.jobs.platform.migrate import upgrade
from tests.conftest import SUBSET_TRAIN, TEST_DATASETS
from tests.jobs.domain.datasets.files import grey_images, image_zip_bytes
from tests.service import procs
from tests.service.s3 import create_bucket, keys, own_folder, s3_env, start_s3_server

pytestmark = [pytest.mark.service, pytest.mark.slow]

BUCKET, PREFIX = "archsearch", "team-a"
EPOCHS = 12
# ~0.5 s an epoch here (4,000 images at batch 16): long enough to kill the worker between
# checkpoints.
RESUMABLE_JOB = {
    "method": "train",
    "dataset": {"name": "mnist", "train_subset": SUBSET_TRAIN},
    "training": {"epochs": EPOCHS, "batch_size": 16},
    "label": "s3-sigkill",
}
DIGITS_JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 2}}


@dataclass
class Cluster:
    """A database, an S3 server, an API and workers, each process with its own folder."""

    env: dict[str, str]
    endpoint: str
    api_url: str
    token: str
    other_token: str
    root: Path
    log_dir: Path
    workers: list[procs.Proc] = field(default_factory=list)

    def start_worker(self, name: str) -> procs.Proc:
        env = own_folder(self.env, self.root / name)
        args = ["worker", "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h"]
        proc = procs.start(name, args, env, self.log_dir)
        procs.wait_log(proc, "ready.", timeout=90)
        self.workers.append(proc)
        return proc

    def live_worker(self) -> None:
        if not any(w.popen.poll() is None for w in self.workers):
            self.start_worker(f"worker{len(self.workers)}")

    def client(self, token: str | None = None) -> ArchsearchClient:
        return ArchsearchClient(self.api_url, token=token or self.token)

    def local_files(self) -> set[str]:
        """Files any process left in its own folder (uploads in flight excepted)."""
        return {p.name for p in self.root.rglob("*") if p.is_file() and p.suffix != ".log"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    log_dir = tmp_path_factory.mktemp("s3-logs")
    root = tmp_path_factory.mktemp("s3-processes")
    s3, endpoint = start_s3_server(log_dir)
    create_bucket(endpoint, BUCKET)
    name = f"archsearch_test_{uuid.uuid4().hex[:10]}"
    database_url = procs.create_database(name)
    upgrade(database_url)
    env = {
        "ARCHSEARCH_DATABASE_URL": database_url,
        "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"archsearch-s3-{uuid.uuid4().hex[:8]}",
        "ARCHSEARCH_DATA_DIR": str(TEST_DATASETS),  # the built-in datasets' input files
        "ARCHSEARCH_LEASE_SECONDS": "3",
        "ARCHSEARCH_AUTH": "token",
        **s3_env(endpoint, BUCKET, PREFIX),
    }
    port = procs.free_port()
    api = procs.start("api", ["api", "--port", str(port)], own_folder(env, root / "api"), log_dir)
    api_url = f"http://127.0.0.1:{port}"
    tokens = procs.user_with_token(database_url, "s3a"), procs.user_with_token(database_url, "s3b")
    cluster = Cluster(env, endpoint, api_url, *tokens, root, log_dir)
    try:
        procs.wait_http(f"{api_url}/healthz", api)
        yield cluster
    finally:
        for proc in [*cluster.workers, api, s3]:
            proc.stop()
        procs.drop_database(name)


def bucket_keys(cluster: Cluster) -> set[str]:
    return keys(cluster.endpoint, BUCKET, f"{PREFIX}/")


def test_killed_worker_job_resumes_on_another_from_the_bucket(cluster: Cluster) -> None:
    doomed = cluster.start_worker("doomed")
    with cluster.client() as client:
        job_id = client.submit(RESUMABLE_JOB).id
        procs.wait_until(
            lambda: 2 <= len(client.metrics(job_id).get("test_accuracy", [])) < EPOCHS - 1,
            180,
            "the job never checkpointed two epochs",
        )
        checkpoint = f"checkpoints/{uuid.UUID(str(job_id)).hex}.pt"
        assert checkpoint in bucket_keys(cluster)
        doomed.kill()  # SIGKILL to the process group: main process and pool child
        assert client.get_job(job_id).status == "running"

        cluster.start_worker("rescuer")  # its folder is empty: only the bucket has the state
        final = client.wait(job_id, timeout=240)
        assert final.status == "succeeded", final.error
        assert final.attempts == 2
        reasons = [(e.to_status, e.reason) for e in client.events(job_id)]
        assert any(s == "running" and "resuming from checkpoint" in r for s, r in reasons)
        steps = [p.step for p in client.metrics(job_id)["test_accuracy"]]
        assert len(steps) == EPOCHS == len(set(steps))

    stored = bucket_keys(cluster)
    job_hex = uuid.UUID(str(job_id)).hex
    assert {f"jobs/{job_hex}/model.safetensors", f"jobs/{job_hex}/metrics.json"} <= stored
    assert checkpoint not in stored  # a finished job's checkpoint is deleted
    assert not {"model.safetensors", "metrics.json", f"{job_hex}.pt"} & cluster.local_files()


def test_artifacts_download_from_the_bucket_with_sha256_and_ranges(cluster: Cluster) -> None:
    cluster.live_worker()
    with cluster.client() as client:
        job = client.wait(client.submit(DIGITS_JOB).id, timeout=180)
        assert job.status == "succeeded", job.error
        recorded = {a.name: a for a in client.artifacts(job.id)}
    url = f"{cluster.api_url}/v1/jobs/{job.id}/artifacts/model.safetensors"
    auth = {"Authorization": f"Bearer {cluster.token}"}

    full = httpx.get(url, headers=auth)
    assert full.status_code == 200
    assert (
        int(full.headers["content-length"])
        == len(full.content)
        == recorded["model.safetensors"].size
    )
    sha = hashlib.sha256(full.content).hexdigest()
    assert full.headers["x-content-sha256"] == sha == recorded["model.safetensors"].sha256
    assert full.headers["accept-ranges"] == "bytes"

    part = httpx.get(url, headers={**auth, "Range": "bytes=10-109"})
    assert part.status_code == 206 and part.content == full.content[10:110]
    assert part.headers["content-range"] == f"bytes 10-109/{len(full.content)}"
    assert part.headers["content-length"] == "100"
    tail = httpx.get(url, headers={**auth, "Range": "bytes=-7"})
    assert tail.status_code == 206 and tail.content == full.content[-7:]
    beyond = httpx.get(url, headers={**auth, "Range": f"bytes={len(full.content)}-"})
    assert beyond.status_code == 416 and beyond.json()["error"] == "range_not_satisfiable"
    assert beyond.headers["content-range"] == f"bytes */{len(full.content)}"

    # Another team's user learns nothing, not even that the file exists.
    other = httpx.get(url, headers={"Authorization": f"Bearer {cluster.other_token}"})
    assert other.status_code == 404


def test_dataset_uploaded_through_the_api_trains_on_a_worker(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.live_worker()
    x, y = grey_images(classes=3, per_class=30, side=8)
    upload = tmp_path / "shades.zip"
    upload.write_bytes(image_zip_bytes(x, y, ["dark", "mid", "light"]))
    with cluster.client() as client:
        dataset = client.upload_dataset(upload)
        prefix = f"datasets/{dataset.id}/"
        assert {prefix + "data.npz", prefix + "preview.png"} <= bucket_keys(cluster)
        spec = {"method": "train", "dataset": {"id": dataset.id}, "training": {"epochs": 3}}
        job = client.wait(client.submit(spec).id, timeout=180)
        assert job.status == "succeeded", job.error

        preview = httpx.get(
            f"{cluster.api_url}/v1/datasets/{dataset.id}/preview.png",
            headers={"Authorization": f"Bearer {cluster.token}"},
        )
        assert preview.status_code == 200 and preview.content.startswith(b"\x89PNG")
        assert "data.npz" not in cluster.local_files()  # only the bucket holds the arrays

        client.delete_dataset(dataset.id)
    assert not {k for k in bucket_keys(cluster) if k.startswith(prefix)}


def test_presigned_redirect_after_the_team_check(cluster: Cluster) -> None:
    """With `download_redirect_seconds` set, a download is a 307 to a presigned URL of the
    S3 server, carrying the sha256; another team still gets a plain 404."""
    cluster.live_worker()
    with cluster.client() as client:
        job = client.wait(client.submit(DIGITS_JOB).id, timeout=180)
        assert job.status == "succeeded", job.error
    env = own_folder(cluster.env, cluster.root / "api-redirect")
    env["ARCHSEARCH_DOWNLOAD_REDIRECT_SECONDS"] = "60"
    port = procs.free_port()
    api = procs.start("api-redirect", ["api", "--port", str(port)], env, cluster.log_dir)
    try:
        procs.wait_http(f"http://127.0.0.1:{port}/healthz", api)
        url = f"http://127.0.0.1:{port}/v1/jobs/{job.id}/artifacts/model.safetensors"
        auth = {"Authorization": f"Bearer {cluster.token}"}
        redirect = httpx.get(url, headers=auth)
        assert redirect.status_code == 307
        assert redirect.headers["location"].startswith(cluster.endpoint)
        content = httpx.get(redirect.headers["location"]).content
        assert hashlib.sha256(content).hexdigest() == redirect.headers["x-content-sha256"]
        other = httpx.get(url, headers={"Authorization": f"Bearer {cluster.other_token}"})
        assert other.status_code == 404 and "location" not in other.headers
    finally:
        api.stop()
