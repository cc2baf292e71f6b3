"""Safe by default: no open admin API on the network, no other team's job ids on the workers
and queue pages, no dead workers shown as if they served, no reordering of finished jobs."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.tables import Job, WorkerRecord
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.errors import ErrorBody
from archsearch.schemas.jobs import JobStatus
from tests.service import procs
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service

JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_team_api_without_tokens_refuses_a_public_address(
    service_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**service_env, "ARCHSEARCH_AUTH": "none", "ARCHSEARCH_HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "archsearch.cli.main", "api", "--host", "0.0.0.0"],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "only binds to localhost" in result.stderr


def test_priority_of_a_finished_job_is_409(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    alice, admin = _bearer(accounts.tokens["alice"]), _bearer(accounts.admin_token)
    job_id = httpx.post(f"{api_url}/v1/jobs", json=JOB, headers=alice).json()["id"]
    assert httpx.post(f"{api_url}/v1/jobs/{job_id}/cancel", headers=alice).status_code == 200
    deadline = time.monotonic() + 60  # a worker may have claimed it: it stops at its next step
    while httpx.get(f"{api_url}/v1/jobs/{job_id}", headers=alice).json()["status"] not in (
        "cancelled",
        "succeeded",
        "failed",
    ):
        assert time.monotonic() < deadline, "the cancelled job never finished"
        time.sleep(0.2)

    response = httpx.patch(f"{api_url}/v1/jobs/{job_id}", json={"priority": "high"}, headers=admin)
    assert response.status_code == 409, response.text
    assert ErrorBody.model_validate(response.json()).error == "invalid_state"
    with sessions() as session:
        assert session.get_one(Job, uuid.UUID(job_id)).priority == 0


@pytest.fixture()
def beta_job_on_a_worker(sessions: sessionmaker[Session]) -> Iterator[tuple[uuid.UUID, str]]:
    """A running job of team beta on a worker that just heartbeat (rows, no real worker: the
    lease lies an hour ahead so no reaper requeues it)."""
    name = f"busy-{uuid.uuid4().hex[:8]}@test"
    with transaction(sessions) as session:
        carol = account_repo.user_by_name(session, "carol")
        placement = repository.Placement(actor="carol", owner_id=carol.id, team_id=carol.team_id)
        job = repository.create_job(session, "train", JOB, None, placement)
        job.status, job.worker = JobStatus.running, name
        job.lease_expires_at = utcnow() + timedelta(hours=1)
        session.add(
            WorkerRecord(
                name=name, host="test", device="cpu", current_job_id=job.id, heartbeat_at=utcnow()
            )
        )
        job_id = job.id
    yield job_id, name
    with transaction(sessions) as session:
        session.execute(delete(WorkerRecord).where(WorkerRecord.name == name))
        row = session.get_one(Job, job_id)
        row.status, row.lease_expires_at = JobStatus.cancelled, None


def test_workers_and_queue_show_other_teams_jobs_only_as_busy(
    api_url: str, accounts: Accounts, beta_job_on_a_worker: tuple[uuid.UUID, str]
) -> None:
    job_id, name = beta_job_on_a_worker

    def worker_seen_by(token: str) -> dict[str, object]:
        workers = httpx.get(f"{api_url}/v1/workers", headers=_bearer(token)).json()["data"]
        return next(w for w in workers if w["name"] == name)

    stranger = worker_seen_by(accounts.tokens["alice"])
    assert stranger["busy"] is True and stranger["current_job_id"] is None
    for token in (accounts.tokens["dave"], accounts.admin_token):  # carol's teammate, admin
        seen = worker_seen_by(token)
        assert seen["busy"] is True and seen["current_job_id"] == str(job_id)

    queue = httpx.get(f"{api_url}/v1/queue", headers=_bearer(accounts.tokens["alice"])).json()
    assert str(job_id) not in {j["id"] for j in queue["running"]}
    assert str(job_id) not in str(queue)
    queue = httpx.get(f"{api_url}/v1/queue", headers=_bearer(accounts.admin_token)).json()
    assert str(job_id) in {j["id"] for j in queue["running"]}


def test_dead_workers_are_hidden_then_pruned(
    api_url: str, worker: procs.Proc, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    recent, old = f"crashed-{uuid.uuid4().hex[:8]}@test", f"ancient-{uuid.uuid4().hex[:8]}@test"
    with transaction(sessions) as session:
        for name, silent in ((recent, timedelta(minutes=1)), (old, timedelta(hours=2))):
            seen = utcnow() - silent
            session.add(
                WorkerRecord(
                    name=name, host="test", device="cpu", started_at=seen, heartbeat_at=seen
                )
            )
    admin = _bearer(accounts.admin_token)
    try:
        # A live worker's next presence update (a third of a lease) prunes the ancient row.
        deadline = time.monotonic() + 30
        while True:
            with sessions() as session:
                if session.get(WorkerRecord, old) is None:
                    break
            assert time.monotonic() < deadline, "the dead worker's row was never pruned"
            time.sleep(0.2)

        live = httpx.get(f"{api_url}/v1/workers", headers=admin).json()["data"]
        assert live and all(w["alive"] for w in live), live
        assert recent not in {w["name"] for w in live}

        history = httpx.get(f"{api_url}/v1/workers?include_dead=true", headers=admin).json()
        crashed = next(w for w in history["data"] if w["name"] == recent)
        assert crashed["alive"] is False
        member = _bearer(accounts.tokens["alice"])
        refused = httpx.get(f"{api_url}/v1/workers?include_dead=true", headers=member)
        assert refused.status_code == 403
    finally:
        with transaction(sessions) as session:
            session.execute(delete(WorkerRecord).where(WorkerRecord.name.in_([recent, old])))
    with sessions() as session:
        assert (
            session.scalars(select(WorkerRecord.name).where(WorkerRecord.name == old)).all() == []
        )
