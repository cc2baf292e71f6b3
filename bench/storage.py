"""Storage benchmark: download rate of one artifact through the API, S3 backend vs local.

Starts, on this machine: a fresh PostgreSQL database, moto's S3 server on loopback, and two
`archsearch api` processes on that database, one keeping files in a local folder, one in
the bucket. One artifact row (a file of random bytes) is recorded and its bytes stored in
both places; then the same file is downloaded through each API in interleaved rounds
(streamed to /dev/null, sha256 checked) and the rates are printed side by side with their
ratio. Everything is written under a temporary folder and the database is dropped.

    python bench/storage.py [--mib 64] [--rounds 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archsearch.jobs.domain.accounts import repository as account_repo  # noqa: E402
from archsearch.jobs.domain.accounts.service import issue_token  # noqa: E402
from archsearch.jobs.domain.tables import Artifact, Job  # noqa: E402
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.objects.local import LocalObjectStore  # noqa: E402
from archsearch.jobs.platform.objects.s3 import S3ObjectStore  # noqa: E402
from archsearch.jobs.platform.store import ArtifactStore  # noqa: E402
from archsearch.schemas.jobs import JobStatus  # noqa: E402
from tests.service import procs  # noqa: E402
from tests.service.s3 import create_bucket, own_folder, s3_client, s3_env, start_s3_server  # noqa: E402

BUCKET, PREFIX, NAME = "bench", "storage", "weights.bin"


def record_artifact(database_url: str, size: int, sha256: str) -> tuple[uuid.UUID, str]:
    """A succeeded job of a fresh team with one artifact row; the job id and a token."""
    engine = make_engine(database_url)
    with transaction(make_session_factory(engine)) as session:
        team = account_repo.create_team(session, "bench", None)
        account_repo.create_user(session, team, "bench", False, None)
        token = issue_token(session, "bench", "submit", 1)
        job = Job(method="train", spec={}, status=JobStatus.succeeded, team_id=team.id)
        session.add(job)
        session.flush()
        session.add(
            Artifact(
                job_id=job.id,
                name=NAME,
                media_type="application/octet-stream",
                size=size,
                sha256=sha256,
            )
        )
        job_id = job.id
    engine.dispose()
    return job_id, token


def download_rate(url: str, token: str, sha256: str) -> float:
    """MiB/s of one full download, streamed and hashed (as a client saving it would)."""
    digest, size = hashlib.sha256(), 0
    started = time.perf_counter()
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token}"}) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    elapsed = time.perf_counter() - started
    assert digest.hexdigest() == sha256 == response.headers["x-content-sha256"]
    return size / (1 << 20) / elapsed


def start_api(name: str, env: dict[str, str], root: Path, log_dir: Path) -> tuple[procs.Proc, str]:
    port = procs.free_port()
    proc = procs.start(name, ["api", "--port", str(port)], own_folder(env, root / name), log_dir)
    url = f"http://127.0.0.1:{port}"
    procs.wait_http(f"{url}/healthz", proc)
    return proc, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="size of the artifact")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="archsearch-bench-storage-") as tmp:
        root = Path(tmp)
        db_name = f"archsearch_bench_{uuid.uuid4().hex[:10]}"
        database_url = procs.create_database(db_name)
        started: list[procs.Proc] = []
        try:
            upgrade(database_url)
            s3, endpoint = start_s3_server(root)
            started.append(s3)
            create_bucket(endpoint, BUCKET)

            data = os.urandom(args.mib << 20)
            sha256 = hashlib.sha256(data).hexdigest()
            job_id, token = record_artifact(database_url, len(data), sha256)
            local_store = ArtifactStore(LocalObjectStore(root / "local" / "artifacts"))
            local_store.write_artifact(job_id, NAME, data)
            bucket_store = S3ObjectStore(s3_client(endpoint), BUCKET, PREFIX, root / "scratch")
            ArtifactStore(bucket_store).write_artifact(job_id, NAME, data)
            del data

            env = {
                "ARCHSEARCH_DATABASE_URL": database_url,
                "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
                "ARCHSEARCH_QUEUE_NAME": f"bench-{uuid.uuid4().hex[:8]}",
                "ARCHSEARCH_AUTH": "token",
            }
            local, local_url = start_api("local", env, root, root)
            started.append(local)
            remote, s3_url = start_api(
                "s3", {**env, **s3_env(endpoint, BUCKET, PREFIX)}, root, root
            )
            started.append(remote)

            path = f"/v1/jobs/{job_id}/artifacts/{NAME}"
            rates: dict[str, list[float]] = {"local": [], "s3": []}
            download_rate(local_url + path, token, sha256)  # warm both up once
            download_rate(s3_url + path, token, sha256)
            for _ in range(args.rounds):
                rates["local"].append(download_rate(local_url + path, token, sha256))
                rates["s3"].append(download_rate(s3_url + path, token, sha256))
        finally:
            for proc in reversed(started):
                proc.stop()
            procs.drop_database(db_name)

    local_rate, s3_rate = (statistics.median(rates[k]) for k in ("local", "s3"))
    print(f"artifact: {args.mib} MiB, {args.rounds} interleaved rounds, median of each")
    print(f"local folder backend : {local_rate:8.1f} MiB/s  {[round(r) for r in rates['local']]}")
    print(f"S3 backend (moto)    : {s3_rate:8.1f} MiB/s  {[round(r) for r in rates['s3']]}")
    print(f"ratio S3 / local     : {s3_rate / local_rate:.3f}")


if __name__ == "__main__":
    main()
