"""A broker outage delays wake-ups and fails nothing: while Redis is unreachable every submit
is stored `queued` and answered 201 at once; when it returns, the workers' periodic wake-up
for waiting jobs runs them all, each on its first attempt, with no failure recorded (so no
`job.failed` webhook and no failure metric).

The API and the worker reach Redis through a TCP proxy of this test (`tcp_proxy.py`), which
plays the outage: the shared Redis on 6379 is never stopped. They use a database and a queue
of their own, so the session's shared worker never takes these jobs.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from archsearch.jobs.platform.migrate import upgrade
from tests.service import procs
from tests.service.conftest import start_worker
from tests.service.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.service, pytest.mark.slow]

JOBS = 20
JOB = {
    "method": "train",
    "dataset": {"name": "digits", "train_subset": 200},
    "training": {"epochs": 1},
}
SUBMIT_SECONDS = 3.0  # far below the 4.5 s a submit once waited for the broker
# Held past the submits, so the workers' periodic wake-ups meet the outage too.
OUTAGE_SECONDS = 5.0


@dataclass
class Stack:
    url: str
    headers: dict[str, str]
    database_url: str
    broker: TcpProxy


@pytest.fixture(scope="module")
def stack(service_env: dict[str, str], log_dir: Path) -> Iterator[Stack]:
    name = f"archsearch_broker_outage_{uuid.uuid4().hex[:8]}"
    database_url = procs.create_database(name)
    upgrade(database_url)
    broker = TcpProxy(6379)
    broker.start()
    env = {
        **service_env,
        "ARCHSEARCH_DATABASE_URL": database_url,
        "ARCHSEARCH_BROKER_URL": f"redis://127.0.0.1:{broker.port}/13",
        "ARCHSEARCH_QUEUE_NAME": f"archsearch-broker-outage-{uuid.uuid4().hex[:8]}",
    }
    headers = {"Authorization": f"Bearer {procs.user_with_token(database_url, 'outage')}"}
    port = procs.free_port()
    api = procs.start("api-broker-outage", ["api", "--port", str(port)], env, log_dir)
    worker = None
    try:
        procs.wait_http(f"http://127.0.0.1:{port}/healthz", api)
        worker = start_worker(env, log_dir, "worker-broker-outage")
        yield Stack(f"http://127.0.0.1:{port}", headers, database_url, broker)
    finally:
        for proc in (worker, api):
            if proc is not None:
                proc.stop()
        broker.stop()
        procs.drop_database(name)


def _rows(database_url: str, ids: list[str]) -> dict[str, tuple[str, int]]:
    with psycopg.connect(database_url) as conn:
        found = conn.execute(
            "SELECT id::text, status, attempts FROM jobs WHERE id::text = ANY(%s)", (ids,)
        )
        return {job_id: (status, attempts) for job_id, status, attempts in found}


def _failed_events(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT count(*) FROM job_events WHERE to_status = 'failed'").fetchone()
        return int(row[0]) if row else 0


def _submit_all(stack: Stack) -> list[str]:
    ids = []
    with httpx.Client(base_url=stack.url, headers=stack.headers, timeout=30) as client:
        for _ in range(JOBS):
            started = time.monotonic()
            answer = client.post("/v1/jobs", json=JOB)
            took = time.monotonic() - started
            assert answer.status_code == 201, answer.text
            assert took < SUBMIT_SECONDS, f"a submit took {took:.1f}s with the broker down"
            ids.append(answer.json()["id"])
    return ids


def test_submits_during_a_broker_outage_are_queued_and_all_run_once_it_returns(
    stack: Stack,
) -> None:
    stack.broker.stop()
    try:
        ids = _submit_all(stack)
        rows = _rows(stack.database_url, ids)
        assert {status for status, _ in rows.values()} == {"queued"}, rows
        assert len(rows) == JOBS
        time.sleep(OUTAGE_SECONDS)
        assert {status for status, _ in _rows(stack.database_url, ids).values()} == {"queued"}
    finally:
        stack.broker.start()

    def all_finished() -> dict[str, tuple[str, int]] | None:
        rows = _rows(stack.database_url, ids)
        done = all(status in ("succeeded", "failed", "cancelled") for status, _ in rows.values())
        return rows if done else None

    rows = procs.wait_until(all_finished, timeout=240, what="the queued jobs to finish", interval=1)
    print("after the outage:", sorted(set(rows.values())))
    assert set(rows.values()) == {("succeeded", 1)}, rows
    # The failure metrics and the job.failed webhooks both come from these events.
    assert _failed_events(stack.database_url) == 0
