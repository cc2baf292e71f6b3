"""Team mode: a job asking for CUDA waits for a CUDA worker, and its pending reason (in the
job and in /v1/queue) says when no worker with CUDA has been seen for `device_unseen_seconds`
(default 10 min). A CUDA worker's row is written as its presence thread would write it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import worker_repository
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.tables import WorkerRecord
from archsearch.jobs.platform.db import transaction
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service

CUDA_JOB = {
    "method": "train",
    "dataset": {"name": "digits", "train_subset": 64},
    "resources": {"device": "cuda"},
}
WORKER = "test-cuda-worker@nowhere"


@pytest.fixture()
def cuda_job(api_url: str, accounts: Accounts) -> Iterator[tuple[str, dict[str, str]]]:
    headers = {"Authorization": f"Bearer {accounts.tokens['carol']}"}
    answer = httpx.post(f"{api_url}/v1/jobs", json=CUDA_JOB, headers=headers, timeout=30)
    assert answer.status_code == 201, answer.text  # team mode: a CUDA worker may join
    job_id = answer.json()["id"]
    yield job_id, headers
    httpx.post(f"{api_url}/v1/jobs/{job_id}/cancel", headers=headers, timeout=30)


def _reasons(api_url: str, job_id: str, headers: dict[str, str]) -> tuple[str, str]:
    job = httpx.get(f"{api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
    queue = httpx.get(f"{api_url}/v1/queue", headers=headers, timeout=30).json()
    [waiting] = [j for j in queue["waiting"] if j["id"] == job_id]
    return job["pending_reason"], waiting["pending_reason"]


def _cuda_worker_seen(sessions: sessionmaker[Session], ago: timedelta) -> None:
    with transaction(sessions) as session:
        worker_repository.record_presence(session, WORKER, "nowhere", Offer("cuda", 8.0), 0, "T4")
        record = session.get(WorkerRecord, WORKER)
        assert record is not None
        record.heartbeat_at = utcnow() - ago


def test_a_cuda_job_says_when_no_cuda_worker_was_seen_for_long(
    api_url: str, cuda_job: tuple[str, dict[str, str]], sessions: sessionmaker[Session]
) -> None:
    job_id, headers = cuda_job
    for reason in _reasons(api_url, job_id, headers):  # none ever seen here
        assert reason.startswith(
            "waiting for a worker with a CUDA device; none has been seen for 10 min"
        )
    try:
        _cuda_worker_seen(sessions, timedelta(minutes=3))  # gone 3 min ago: may come back
        assert (
            _reasons(api_url, job_id, headers) == ("waiting for a worker with a CUDA device",) * 2
        )
        _cuda_worker_seen(sessions, timedelta(minutes=11))
        job_reason, queue_reason = _reasons(api_url, job_id, headers)
        assert job_reason == queue_reason and "10 min" in job_reason and "'cpu'" in job_reason
    finally:
        with transaction(sessions) as session:
            worker_repository.unregister(session, WORKER)
