"""HEAD on an artifact answers the headers GET would (size, sha256, ranges) with no body,
for a local file and for an object in S3, and keeps the team rules; a download served from
the recent-artifacts memory (api/routes/artifacts.py) still notices a rewritten or deleted
file. Artifacts are recorded straight into the database and the store, as a job records
them, so no worker is needed."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.tables import Artifact, Job
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.objects.local import LocalObjectStore
from archsearch.jobs.platform.objects.s3 import S3ObjectStore
from archsearch.jobs.platform.store import ArtifactStore
from archsearch.schemas.jobs import JobStatus
from tests.service import procs
from tests.service.s3 import create_bucket, own_folder, s3_client, s3_env, start_s3_server

pytestmark = pytest.mark.service

BUCKET, PREFIX, NAME = "heads", "h", "weights.bin"
SAME_HEADERS = (
    "content-length",
    "content-type",
    "content-disposition",
    "x-content-sha256",
    "repr-digest",
    "accept-ranges",
)


@dataclass
class Served:
    local: str  # base URL of an API keeping files in a folder
    bucket: str  # base URL of an API on S3, with presigned redirects for GET
    path: str  # the artifact's URL path
    data: bytes
    owner: dict[str, str]
    stranger: dict[str, str]
    folder: Path  # the local API's artifact root
    database_url: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("artifact-head")
    name = f"archsearch_test_{uuid.uuid4().hex[:10]}"
    database_url = procs.create_database(name)
    started: list[procs.Proc] = []
    try:
        upgrade(database_url)
        owner = procs.user_with_token(database_url, "owner")
        stranger = procs.user_with_token(database_url, "stranger")
        s3, endpoint = start_s3_server(root)
        started.append(s3)
        create_bucket(endpoint, BUCKET)
        data = os.urandom(300_000)
        job_id = _record(database_url, data)
        folder = root / "local" / "artifacts"
        ArtifactStore(LocalObjectStore(folder)).write_artifact(job_id, NAME, data)
        bucket_store = S3ObjectStore(s3_client(endpoint), BUCKET, PREFIX, root / "scratch")
        ArtifactStore(bucket_store).write_artifact(job_id, NAME, data)
        env = {
            "ARCHSEARCH_DATABASE_URL": database_url,
            "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
            "ARCHSEARCH_QUEUE_NAME": f"head-{uuid.uuid4().hex[:8]}",
            "ARCHSEARCH_AUTH": "token",
        }
        bucket_env = {
            **s3_env(endpoint, BUCKET, PREFIX),
            "ARCHSEARCH_DOWNLOAD_REDIRECT_SECONDS": "60",
        }
        urls = [
            _start_api(label, own_folder({**env, **extra}, root / label), root, started)
            for label, extra in (("local", {}), ("s3", bucket_env))
        ]
        yield Served(
            *urls,
            f"/v1/jobs/{job_id}/artifacts/{NAME}",
            data,
            {"Authorization": f"Bearer {owner}"},
            {"Authorization": f"Bearer {stranger}"},
            folder,
            database_url,
        )
    finally:
        for proc in reversed(started):
            proc.stop()
        procs.drop_database(name)


def _record(database_url: str, data: bytes) -> uuid.UUID:
    """A succeeded job of the team "owner" with one artifact row of `data`."""
    engine = make_engine(database_url)
    with transaction(make_session_factory(engine)) as session:
        team = account_repo.team_by_name(session, "owner")
        job = Job(method="train", spec={}, status=JobStatus.succeeded, team_id=team.id)
        session.add(job)
        session.flush()
        session.add(
            Artifact(
                job_id=job.id,
                name=NAME,
                media_type="application/octet-stream",
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        )
        job_id = job.id
    engine.dispose()
    return job_id


def _start_api(label: str, env: dict[str, str], log_dir: Path, started: list[procs.Proc]) -> str:
    port = procs.free_port()
    proc = procs.start(f"api-{label}", ["api", "--port", str(port)], env, log_dir)
    started.append(proc)
    procs.wait_http(f"http://127.0.0.1:{port}/healthz", proc)
    return f"http://127.0.0.1:{port}"


def test_head_answers_the_headers_of_get_without_a_body(served: Served) -> None:
    for base in (served.local, served.bucket):
        url = base + served.path
        head = httpx.head(url, headers=served.owner)
        assert head.status_code == 200, (base, head.status_code, head.text)
        assert head.content == b""
        full = httpx.get(url, headers=served.owner, follow_redirects=True)
        assert full.content == served.data
        if base == served.local:  # from S3, the GET is the bucket's answer to a redirect
            assert {h: head.headers.get(h) for h in SAME_HEADERS} == {
                h: full.headers.get(h) for h in SAME_HEADERS
            }
            assert head.headers["etag"] == full.headers["etag"]
        assert head.headers["content-length"] == str(len(served.data))
        assert head.headers["x-content-sha256"] == hashlib.sha256(served.data).hexdigest()
        assert "location" not in head.headers  # HEAD is answered here, never redirected


def test_head_of_a_range_and_of_a_bad_range(served: Served) -> None:
    size = len(served.data)
    for base in (served.local, served.bucket):
        url = base + served.path
        part = httpx.head(url, headers={**served.owner, "Range": "bytes=10-19"})
        assert part.status_code == 206 and part.content == b""
        assert part.headers["content-range"] == f"bytes 10-19/{size}"
        assert part.headers["content-length"] == "10"
        refused = httpx.head(url, headers={**served.owner, "Range": f"bytes={size}-"})
        assert refused.status_code == 416 and refused.content == b""
        assert refused.headers["content-range"] == f"bytes */{size}"


def test_head_keeps_the_team_rules(served: Served) -> None:
    for base in (served.local, served.bucket):
        assert httpx.head(base + served.path, headers=served.stranger).status_code == 404
        assert httpx.head(base + served.path).status_code == 401
        missing = served.path.replace(NAME, "other.bin")
        assert httpx.head(base + missing, headers=served.owner).status_code == 404
        sneaky = served.path.replace(NAME, "..%2F..%2Fetc%2Fpasswd")
        assert httpx.head(base + sneaky, headers=served.owner).status_code == 404


def test_a_remembered_artifact_follows_its_file(served: Served) -> None:
    """Downloaded twice (the second time from memory), then rewritten as a redelivered job
    rewrites it (a new file renamed into place, a new row): the new sha256 goes out, not
    the remembered one; then deleted: a 404 naming the missing file."""
    url = served.local + served.path
    for _ in range(2):
        assert httpx.get(url, headers=served.owner).content == served.data
    assert httpx.get(url, headers=served.stranger).status_code == 404  # not the owner's entry
    target = next(served.folder.rglob(NAME))
    try:
        changed = os.urandom(1000)
        _rewrite(served, target, changed)
        again = httpx.get(url, headers=served.owner)
        assert again.content == changed
        assert again.headers["x-content-sha256"] == hashlib.sha256(changed).hexdigest()
        target.unlink()
        gone = httpx.get(url, headers=served.owner)
        assert gone.status_code == 404 and "missing" in gone.json()["detail"]
    finally:
        _rewrite(served, target, served.data)  # as it was, for the other tests


def _rewrite(served: Served, target: Path, data: bytes) -> None:
    staged = target.with_name(".staged")
    staged.write_bytes(data)
    os.replace(staged, target)
    engine = make_engine(served.database_url)
    with transaction(make_session_factory(engine)) as session:
        artifact = session.scalars(select(Artifact).where(Artifact.name == NAME)).one()
        artifact.size, artifact.sha256 = len(data), hashlib.sha256(data).hexdigest()
    engine.dispose()
