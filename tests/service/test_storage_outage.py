"""An outage of the object store, injected between the service and a real S3 server.

A moto server process plays S3; the API and a worker reach it through a TCP proxy the test
cuts mid-job until the job has met the outage, retried inside the run for a lease (3 s
here) and been handed back to the queue without consuming an attempt, and finishes once the
store returns. During the outage a download and an upload answer 503 JSON
`storage_unavailable` with Retry-After, /readyz names the object store, and nothing is
left behind: the reaper's orphan sweep removes what no live job or dataset refers to.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from archsearch.client import ArchsearchClient
from archsearch.jobs.platform.migrate import upgrade
from tests.conftest import TEST_DATASETS
from tests.jobs.domain.datasets.files import grey_images, image_zip_bytes
from tests.service import procs
from tests.service.s3 import create_bucket, keys, own_folder, s3_client, s3_env, start_s3_server
from tests.service.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.service, pytest.mark.slow]

BUCKET, PREFIX = "archsearch", "outage"
LEASE_SECONDS = 3  # a job retries storage calls this long, then is handed back
EPOCHS = 8  # a checkpoint each epoch: the outage meets one
LONG_JOB = {
    "method": "train",
    "dataset": {"name": "digits"},
    "training": {"epochs": EPOCHS, "batch_size": 32},
    "label": "through-an-outage",
}
SHORT_JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}


@dataclass
class Cluster:
    api_url: str
    token: str
    endpoint: str  # the S3 server itself, not through the proxy
    proxy: TcpProxy

    def client(self) -> ArchsearchClient:
        return ArchsearchClient(self.api_url, token=self.token)

    def bucket_keys(self) -> set[str]:
        return keys(self.endpoint, BUCKET, f"{PREFIX}/")

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    log_dir, root = tmp_path_factory.mktemp("outage-logs"), tmp_path_factory.mktemp("outage")
    s3, endpoint = start_s3_server(log_dir)
    create_bucket(endpoint, BUCKET)
    proxy = TcpProxy(int(urlparse(endpoint).port or 0))
    proxy.start()
    name = f"archsearch_test_{uuid.uuid4().hex[:10]}"
    database_url = procs.create_database(name)
    upgrade(database_url)
    env = {
        "ARCHSEARCH_DATABASE_URL": database_url,
        "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"archsearch-outage-{uuid.uuid4().hex[:8]}",
        "ARCHSEARCH_DATA_DIR": str(TEST_DATASETS),
        "ARCHSEARCH_LEASE_SECONDS": str(LEASE_SECONDS),
        "ARCHSEARCH_AUTH": "token",
        "ARCHSEARCH_ORPHAN_SWEEP_SECONDS": "1",
        "ARCHSEARCH_ORPHAN_GRACE_SECONDS": "0",
        **s3_env(proxy.url, BUCKET, PREFIX),
    }
    port = procs.free_port()
    api = procs.start("api", ["api", "--port", str(port)], own_folder(env, root / "api"), log_dir)
    worker_args = ["worker", "-n", f"outage-{uuid.uuid4().hex[:6]}@%h"]
    worker = procs.start("worker", worker_args, own_folder(env, root / "worker"), log_dir)
    try:
        procs.wait_http(f"http://127.0.0.1:{port}/healthz", api)
        procs.wait_log(worker, "ready.", timeout=90)
        token = procs.user_with_token(database_url, "outage")
        yield Cluster(f"http://127.0.0.1:{port}", token, endpoint, proxy)
    finally:
        proxy.stop()
        for proc in (worker, api, s3):
            proc.stop()
        procs.drop_database(name)


def _handed_back(client: ArchsearchClient, job_id: object) -> bool:
    return any("object store unavailable" in e.reason for e in client.events(job_id))  # type: ignore[arg-type]


def _assert_storage_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"] == "storage_unavailable"
    assert int(response.headers["retry-after"]) > 0


def _requests_during_outage(cluster: Cluster, finished_job: str, upload: Path) -> None:
    url = f"{cluster.api_url}/v1/jobs/{finished_job}/artifacts/model.safetensors"
    _assert_storage_unavailable(httpx.get(url, headers=cluster.auth(), timeout=60))
    with open(upload, "rb") as handle:
        files = {"file": ("shades.zip", handle, "application/zip")}
        answer = httpx.post(
            f"{cluster.api_url}/v1/datasets", files=files, headers=cluster.auth(), timeout=60
        )
    _assert_storage_unavailable(answer)
    ready = httpx.get(f"{cluster.api_url}/readyz", timeout=60)
    assert ready.status_code == 503
    assert ready.json()["checks"]["object_store"] is False
    assert ready.json()["problems"]["object_store"].startswith("unreachable")


def test_a_job_rides_out_a_storage_outage_and_nothing_is_left_behind(
    cluster: Cluster, tmp_path: Path
) -> None:
    x, y = grey_images(classes=3, per_class=30, side=8)
    upload = tmp_path / "shades.zip"
    upload.write_bytes(image_zip_bytes(x, y, ["dark", "mid", "light"]))
    with cluster.client() as client:
        finished = client.wait(client.submit(SHORT_JOB).id, timeout=180)
        assert finished.status == "succeeded", finished.error
        job_id = client.submit(LONG_JOB).id
        procs.wait_until(
            lambda: len(client.metrics(job_id).get("test_accuracy", [])) >= 1,
            180,
            "the job never reported an epoch",
        )
        cluster.proxy.stop()
        cut = time.monotonic()
        assert len(client.metrics(job_id)["test_accuracy"]) < EPOCHS
        try:
            _requests_during_outage(cluster, str(finished.id), upload)
            # The job meets the outage at its next checkpoint, retries for a lease time,
            # then hands itself back; the store stays away a little longer still.
            procs.wait_until(
                lambda: _handed_back(client, job_id), 240, "the job was never handed back"
            )
            time.sleep(2 * LEASE_SECONDS)
            during = client.get_job(job_id)
            assert during.status in ("queued", "running")
        finally:
            cluster.proxy.start()
        outage = time.monotonic() - cut
        final = client.wait(job_id, timeout=300)
        back = time.monotonic() - cut - outage
        reasons = [e.reason for e in client.events(job_id)]
        assert all(d.source == "builtin" for d in client.datasets())  # the upload left none
        epochs = len(client.metrics(job_id)["test_accuracy"])
    print(f"outage {outage:.1f}s; job {during.status} during it; done {back:.1f}s after")
    print("events:", reasons)
    assert final.status == "succeeded", final.error
    assert final.attempts == 1  # handed back, never charged an attempt
    assert any("object store unavailable" in r for r in reasons), reasons
    assert epochs == EPOCHS
    _assert_no_orphans(cluster, [str(finished.id), str(job_id)])


def _assert_no_orphans(cluster: Cluster, jobs: list[str]) -> None:
    """Planted orphans (a checkpoint of no job, files of no dataset) are swept; the
    finished jobs keep their artifacts and lose their checkpoints."""
    s3 = s3_client(cluster.endpoint)
    planted = {f"checkpoints/{uuid.uuid4().hex}.pt", "datasets/ds-0123456789abcdef/data.npz"}
    for key in planted:
        s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{key}", Body=b"orphan")

    def swept() -> bool:
        return not (planted & cluster.bucket_keys())

    procs.wait_until(swept, 60, "the reaper never removed the planted orphans")
    stored = cluster.bucket_keys()
    for job in jobs:
        job_hex = uuid.UUID(job).hex
        assert f"jobs/{job_hex}/model.safetensors" in stored
        assert f"checkpoints/{job_hex}.pt" not in stored
    assert not {k for k in stored if k.startswith("datasets/")}, stored
