"""Slots: one real Celery worker with `ARCHSEARCH_WORKER_SLOTS=2` runs two jobs at once on
its one device (CPU here: the same code serves a GPU), each slot registered as a worker of
its own and charged half the device; a job that outgrows its slot's memory cap fails alone,
saying so, while the other slot's job goes on; and a SIGTERM hands both slots' jobs back to
the queue without spending their attempts.

The module runs on a database, queue and API of its own, so that no other test's worker can
claim its jobs.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ArchsearchClient
from archsearch.jobs.domain.tables import WorkerRecord
from archsearch.jobs.domain.usage import repository as usage_repo
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.jobs.platform.db import make_engine, make_session_factory
from archsearch.jobs.platform.migrate import upgrade
from tests.conftest import TEST_DATASETS
from tests.service import procs

pytestmark = [pytest.mark.service, pytest.mark.slow]

SLOT_MEMORY_GB = 1
# Long enough on a loaded 2-core machine that both jobs are surely running at once.
TRAIN = {
    "method": "train",
    "dataset": {"name": "digits"},
    "training": {"epochs": 40, "batch_size": 64},
    "label": "slot",
}
# A 30,000 x 30,000 layer: 3.6 GB of weights, far beyond the slot's 1 GB.
HOG = {**TRAIN, "model": {"name": "mlp", "hidden": [30000, 30000]}, "label": "hog"}
LONGER = {**TRAIN, "training": {"epochs": 120, "batch_size": 64}, "label": "beside-the-hog"}
LONG = {**TRAIN, "training": {"epochs": 2000, "batch_size": 64}, "label": "evicted"}


@dataclass
class Stack:
    client: ArchsearchClient
    worker: procs.Proc
    sessions: sessionmaker[Session]
    api_url: str
    token: str


def stack_env(url: str, home: Path) -> dict[str, str]:
    return {
        "ARCHSEARCH_DATABASE_URL": url,
        "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"archsearch-slots-{uuid.uuid4().hex[:8]}",
        "ARCHSEARCH_HOME": str(home),
        "ARCHSEARCH_DATA_DIR": str(TEST_DATASETS),
        "ARCHSEARCH_LEASE_SECONDS": "3",
        "ARCHSEARCH_AUTH": "token",
        "ARCHSEARCH_STOP_GRACE_SECONDS": "0",  # a SIGTERM stops the jobs at their next step
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    name = f"archsearch_slots_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    log_dir = tmp_path_factory.mktemp("slots-logs")
    env = stack_env(url, tmp_path_factory.mktemp("slots-home"))
    engine, started = make_engine(url), list[procs.Proc]()
    try:
        upgrade(url)
        port = procs.free_port()
        started.append(procs.start("slots-api", ["api", "--port", str(port)], env, log_dir))
        slots = {"ARCHSEARCH_WORKER_SLOTS": "2", "ARCHSEARCH_TORCH_THREADS": "1"}
        slots["ARCHSEARCH_WORKER_SLOT_MEMORY_GB"] = str(SLOT_MEMORY_GB)
        args = ["worker", "-n", f"slots-{uuid.uuid4().hex[:6]}@%h", "--without-mingle"]
        started.append(procs.start("slots-worker", args, {**env, **slots}, log_dir))
        procs.wait_http(f"http://127.0.0.1:{port}/healthz", started[0])
        token = procs.user_with_token(url, "slots")
        sessions = make_session_factory(engine)
        procs.wait_until(lambda: len(slot_workers(sessions)) == 2, 180, "two slots registered")
        with ArchsearchClient(f"http://127.0.0.1:{port}", token=token) as client:
            yield Stack(client, started[1], sessions, f"http://127.0.0.1:{port}", token)
    finally:
        for proc in started:
            proc.stop()
        engine.dispose()
        procs.drop_database(name)


def slot_workers(sessions: sessionmaker[Session]) -> list[WorkerRecord]:
    with sessions() as session:
        return list(session.scalars(select(WorkerRecord)))


def runs_of(sessions: sessionmaker[Session], job_id: uuid.UUID) -> list[JobAttempt]:
    with sessions() as session:
        return usage_repo.job_seconds(session, job_id)


def usage_by_user(stack: Stack) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {stack.token}"}
    answer = httpx.get(f"{stack.api_url}/v1/usage", params={"group_by": "user"}, headers=headers)
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, Any]] = answer.json()["data"]
    return rows


def overlap(a: tuple[datetime, datetime], b: tuple[datetime, datetime]) -> float:
    return (min(a[1], b[1]) - max(a[0], b[0])).total_seconds()


def test_two_jobs_run_at_once_each_charged_half(stack: Stack) -> None:
    workers = slot_workers(stack.sessions)
    assert {w.device for w in workers} == {"cpu"} and len({w.host for w in workers}) == 1
    first, second = (stack.client.submit(TRAIN).id for _ in range(2))
    done = [stack.client.wait(job_id, timeout=300) for job_id in (first, second)]
    assert [job.status for job in done] == ["succeeded", "succeeded"], done
    (run_a,), (run_b,) = runs_of(stack.sessions, first), runs_of(stack.sessions, second)
    assert run_a.worker != run_b.worker, "each job ran in its own slot"
    assert run_a.ended_at is not None and run_b.ended_at is not None
    together = overlap((run_a.started_at, run_a.ended_at), (run_b.started_at, run_b.ended_at))
    assert together > 0, f"the two runs did not overlap ({together:.2f} s)"
    assert run_a.device_share == run_b.device_share == 0.5
    (row,) = usage_by_user(stack)
    assert row["held_seconds"] == pytest.approx(run_a.seconds + run_b.seconds, abs=2e-3)
    assert row["device_seconds"] == pytest.approx(row["held_seconds"] / 2, abs=2e-3)
    assert (row["runs"], row["attempts"], row["jobs"]) == (2, 2, 2)
    print(f"\nthe two slots' runs overlapped {together:.2f} s; charged {row['device_seconds']} s")


def test_a_job_over_its_slots_memory_fails_alone(stack: Stack) -> None:
    fine = stack.client.submit(LONGER).id
    procs.wait_until(lambda: stack.client.get_job(fine).status == "running", 120, "running")
    hog = stack.client.submit(HOG).id  # the other slot takes it
    failed = stack.client.wait(hog, timeout=300)
    succeeded = stack.client.wait(fine, timeout=300)
    assert failed.status == "failed" and succeeded.status == "succeeded"
    assert failed.error is not None
    assert f"ran out of the {SLOT_MEMORY_GB} GB of memory its worker slot allows" in failed.error
    assert "ARCHSEARCH_WORKER_SLOT_MEMORY_GB" in failed.error
    ((hog_run,), (fine_run,)) = runs_of(stack.sessions, hog), runs_of(stack.sessions, fine)
    assert hog_run.worker != fine_run.worker and hog_run.ended_at and fine_run.ended_at
    # The hog failed while the other slot's job ran, and that job went on to the end.
    assert fine_run.started_at < hog_run.ended_at < fine_run.ended_at
    assert len(slot_workers(stack.sessions)) == 2, "both slots live on"
    # The slot that refused the hog runs the next job.
    again = stack.client.wait(stack.client.submit(TRAIN).id, timeout=300)
    assert again.status == "succeeded"


def test_sigterm_hands_both_slots_jobs_back(stack: Stack) -> None:
    jobs = [stack.client.submit(LONG).id for _ in range(2)]
    procs.wait_until(
        lambda: all(len(stack.client.metrics(j).get("test_accuracy", [])) >= 1 for j in jobs),
        240,
        "both jobs running",
    )
    stack.worker.popen.send_signal(signal.SIGTERM)  # the main process, as a pod's PID 1
    started = time.monotonic()
    stack.worker.popen.wait(timeout=120)
    took = time.monotonic() - started
    for job_id in jobs:
        job = stack.client.get_job(job_id)
        assert (job.status, job.attempts) == ("queued", 0), job
        (run,) = runs_of(stack.sessions, job_id)
        assert run.given_back and run.ended_at is not None and run.seconds > 0
    # The report says it the same way: two runs that were not attempts.
    (row,) = usage_by_user(stack)
    assert row["runs"] - row["attempts"] == 2
    print(f"\nthe worker handed both jobs back and exited {took:.1f} s after SIGTERM")
