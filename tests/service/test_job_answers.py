"""GET /v1/jobs/{id} from the API's memory stays fresh: a change of a job's state committed
by another connection is seen on the next GET, its progress within one flush interval,
another team never gets a kept answer, and a lost listening connection turns the memory off
(api/live/answers.py, api/live/feed.py).

A change written with triggers disabled (`session_replication_role = replica`: no
notification) is how these tests see that an answer really came from memory.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.api.live.answers import PROGRESS_SECONDS
from archsearch.api.live.barrier import ConnectionLost, SyncBarrier
from archsearch.api.live.feed import APPLICATION_NAME, CHANNEL
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.domain.jobs import claims, repository
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.jobs import JobPublic
from tests.service import procs
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service

JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}


@pytest.fixture(scope="module")
def other_listeners(api_url: str, pg_url: str) -> set[int]:
    """The listening connections of the suite's shared API, there before this module's."""
    procs.wait_until(lambda: _listener_pids(pg_url), 30, "the shared API's LISTEN")
    return set(_listener_pids(pg_url))


@pytest.fixture(scope="module")
def api(service_env: dict[str, str], log_dir: Path, other_listeners: set[int]) -> Iterator[str]:
    # Its own queue: the jobs of these tests are moved by hand, never by a worker.
    env = {**service_env, "ARCHSEARCH_QUEUE_NAME": f"answers-{uuid.uuid4().hex[:8]}"}
    pg_url = env["ARCHSEARCH_DATABASE_URL"]
    port = procs.free_port()
    proc = procs.start("api-answers", ["api", "--port", str(port)], env, log_dir)
    url = f"http://127.0.0.1:{port}"
    procs.wait_http(f"{url}/healthz", proc)
    procs.wait_until(lambda: _own_listeners(pg_url, other_listeners), 30, "LISTEN")
    yield url
    proc.stop()


def _listener_pids(pg_url: str) -> list[int]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s",
            (APPLICATION_NAME,),
        ).fetchall()
    return [pid for (pid,) in rows]


def _own_listeners(pg_url: str, others: set[int]) -> list[int]:
    """This module's API's listening connection: every API of the database listens."""
    return [pid for pid in _listener_pids(pg_url) if pid not in others]


def _write(pg_url: str, sql: str, *params: object, notify: bool = True) -> None:
    """One committed change from a connection of its own (another process's, in effect)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        if not notify:
            conn.execute("SET session_replication_role = replica")  # triggers off
        conn.execute(sql, params)  # type: ignore[arg-type]


def _running_job(api: str, token: str, pg_url: str) -> str:
    with httpx.Client(base_url=api, headers=_bearer(token)) as client:
        job_id: str = client.post("/v1/jobs", json=JOB).raise_for_status().json()["id"]
    _write(pg_url, "UPDATE jobs SET status = 'running', step = 0 WHERE id = %s", job_id)
    return job_id


def _finished_job(api: str, token: str, pg_url: str) -> str:
    """A succeeded job: its answer is kept until a notification, however long."""
    job_id = _running_job(api, token, pg_url)
    _write(pg_url, "UPDATE jobs SET status = 'succeeded' WHERE id = %s", job_id)
    return job_id


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_change_committed_elsewhere_is_seen_on_the_next_get(
    api: str, pg_url: str, accounts: Accounts
) -> None:
    job_id = _running_job(api, accounts.tokens["alice"], pg_url)
    with httpx.Client(base_url=api, headers=_bearer(accounts.tokens["alice"])) as client:
        read = lambda: client.get(f"/v1/jobs/{job_id}").raise_for_status().json()  # noqa: E731
        assert read()["status"] == "running"
        for priority in range(1, 21):
            _write(pg_url, "UPDATE jobs SET priority = %s WHERE id = %s", priority, job_id)
            assert read()["priority"] == priority  # the very next GET, every time
            assert read()["priority"] == priority  # and the one after it, from memory
        _write(pg_url, "UPDATE jobs SET step = 7 WHERE id = %s", job_id)  # progress: no notice
        procs.wait_until(lambda: read()["step"] == 7, 5 * PROGRESS_SECONDS + 2, "progress shown")
        _write(pg_url, "UPDATE jobs SET status = 'succeeded' WHERE id = %s", job_id)
        assert read()["status"] == "succeeded"
        _write(pg_url, "UPDATE jobs SET step = 99 WHERE id = %s", job_id, notify=False)
        assert read()["step"] == 7, "the answer should have come from memory"
        _write(pg_url, "UPDATE users SET name = 'alice2' WHERE name = 'alice'")
        try:
            assert read()["owner_name"] == "alice2"  # a user's name clears every answer
            assert read()["step"] == 99
        finally:
            _write(pg_url, "UPDATE users SET name = 'alice' WHERE name = 'alice2'")


def test_a_running_jobs_progress_is_never_older_than_one_flush_interval(
    api: str, pg_url: str, accounts: Accounts
) -> None:
    job_id = _running_job(api, accounts.tokens["alice"], pg_url)
    with httpx.Client(base_url=api, headers=_bearer(accounts.tokens["alice"])) as client:
        read = lambda: client.get(f"/v1/jobs/{job_id}").raise_for_status().json()  # noqa: E731
        assert read()["step"] == 0
        _write(pg_url, "UPDATE jobs SET step = 1 WHERE id = %s", job_id, notify=False)
        time.sleep(PROGRESS_SECONDS + 0.05)
        assert read()["step"] == 1, "a running job's answer outlived its progress interval"


def test_another_team_never_gets_a_kept_answer(api: str, pg_url: str, accounts: Accounts) -> None:
    job_id = _running_job(api, accounts.tokens["alice"], pg_url)
    path = f"/v1/jobs/{job_id}"
    for _ in range(2):  # the second from memory
        assert httpx.get(api + path, headers=_bearer(accounts.tokens["alice"])).status_code == 200
    answer = httpx.get(api + path, headers=_bearer(accounts.tokens["carol"]))
    assert answer.status_code == 404, answer.text
    assert httpx.get(api + path, headers=_bearer(accounts.admin_token)).json()["id"] == job_id


def test_a_get_checks_the_caller_then_the_text_then_the_id(
    api: str, pg_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    """401, then 403, then 422, then 404, whatever else is wrong with the request, on a
    kept answer as on a miss: the route's own work comes after the /v1 checks."""
    with transaction(sessions) as session:
        scraper = issue_token(session, "root", "metrics", 1)
    kept = _running_job(api, accounts.tokens["alice"], pg_url)
    httpx.get(f"{api}/v1/jobs/{kept}", headers=_bearer(accounts.tokens["alice"]))
    alice, carol = accounts.tokens["alice"], accounts.tokens["carol"]
    for path, token, status in (
        (f"/v1/jobs/{kept}?bogus=1", None, 401),
        ("/v1/jobs/not-an-id?bogus=1", None, 401),
        (f"/v1/jobs/{kept}?bogus=1", scraper, 403),
        ("/v1/jobs/not-an-id?bogus=1", scraper, 403),
        (f"/v1/jobs/{kept}?bogus=1", alice, 422),
        ("/v1/jobs/not-an-id?bogus=1", alice, 422),
        ("/v1/jobs/not%00an-id", alice, 422),  # text the database cannot store, before the id
        ("/v1/jobs/not-an-id", alice, 404),
        (f"/v1/jobs/{kept}", carol, 404),  # another team's
        (f"/v1/jobs/{kept}", alice, 200),
    ):
        answer = httpx.get(f"{api}{path}", headers=_bearer(token) if token else {})
        assert answer.status_code == status, (path, token == scraper, answer.text)


def test_a_lost_listener_turns_the_memory_off_until_it_listens_again(
    api: str, pg_url: str, accounts: Accounts, other_listeners: set[int]
) -> None:
    job_id = _finished_job(api, accounts.tokens["alice"], pg_url)
    with httpx.Client(base_url=api, headers=_bearer(accounts.tokens["alice"])) as client:
        read = lambda: client.get(f"/v1/jobs/{job_id}").raise_for_status().json()  # noqa: E731
        # Two reads: the first may store an answer that the notification of the job's end,
        # read at the second's barrier, then takes back; the second's answer stays.
        assert read()["step"] == read()["step"] == 0
        _write(pg_url, "UPDATE jobs SET step = 1 WHERE id = %s", job_id, notify=False)
        assert read()["step"] == 0, "the answer should have come from memory"
        (listener,) = _own_listeners(pg_url, other_listeners)
        _write(pg_url, "SELECT pg_terminate_backend(%s)", listener)
        # Once the API sees its connection gone (a moment), nothing is served from memory.
        procs.wait_until(lambda: read()["step"] == 1, 5, "the memory cleared")
        _write(pg_url, "UPDATE jobs SET step = 2 WHERE id = %s", job_id, notify=False)
        assert read()["step"] == 2
        relistened = lambda: _own_listeners(pg_url, other_listeners) not in ([], [listener])  # noqa: E731
        procs.wait_until(relistened, 30, "relisten")
        assert read()["step"] == 2
        _write(pg_url, "UPDATE jobs SET step = 3 WHERE id = %s", job_id, notify=False)
        assert read()["step"] == 2, "listening again, the memory should be back on"


class Notifications:
    """What `job_changed` carries, read exactly: each `committed` round trip on the
    listening connection returns after every notification committed before it."""

    def __init__(self, pg_url: str) -> None:
        self.connection = psycopg.connect(pg_url, autocommit=True)
        self.payloads: list[str] = []
        self.connection.add_notify_handler(lambda notice: self.payloads.append(notice.payload))
        self.connection.execute(f"LISTEN {CHANNEL}")

    def committed(self) -> list[str]:
        self.connection.execute("SELECT 1")
        payloads, self.payloads = self.payloads, []
        return payloads


@pytest.fixture
def notifications(pg_url: str) -> Iterator[Notifications]:
    listening = Notifications(pg_url)
    yield listening
    listening.connection.close()


def test_a_job_notifies_a_change_of_its_state_and_not_of_its_progress_or_lease(
    api: str,
    pg_url: str,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    notifications: Notifications,
) -> None:
    job_id = _running_job(api, accounts.tokens["alice"], pg_url)
    _write(pg_url, "UPDATE jobs SET worker = 'w1', lease_expires_at = now() WHERE id = %s", job_id)
    assert notifications.committed() == [job_id]
    updated_at = _updated_at(pg_url, job_id)
    with transaction(sessions) as session:
        assert claims.renew_lease(session, uuid.UUID(job_id), "w1", 30)
    assert notifications.committed() == [], "a lease renewal changes nothing the answer shows"
    assert _updated_at(pg_url, job_id) == updated_at
    with transaction(sessions) as session:
        repository.record_progress(session, uuid.UUID(job_id), 5, 10, {"loss": 0.5})
    assert notifications.committed() == [], "progress writes notify nothing"
    _write(pg_url, "UPDATE jobs SET priority = 10 WHERE id = %s", job_id)
    assert notifications.committed() == [job_id]
    _write(pg_url, "UPDATE jobs SET cancel_requested_by = 'x' WHERE id = %s", job_id)
    assert notifications.committed() == []  # not shown either
    _write(pg_url, "UPDATE jobs SET status = 'failed' WHERE id = %s", job_id)
    assert notifications.committed() == [job_id]
    _write(pg_url, "DELETE FROM jobs WHERE id = %s", job_id)
    assert notifications.committed() == [job_id]


def test_a_queued_job_notifies_nothing(
    api: str, pg_url: str, accounts: Accounts, notifications: Notifications
) -> None:
    with httpx.Client(base_url=api, headers=_bearer(accounts.tokens["alice"])) as client:
        job_id = client.post("/v1/jobs", json=JOB).raise_for_status().json()["id"]
    _write(pg_url, "UPDATE jobs SET step = 3, priority = 10 WHERE id = %s", job_id)
    assert notifications.committed() == []


PROGRESS_COLUMNS = {"progress", "step", "total_steps", "latest_metrics", "updated_at"}


def test_the_trigger_compares_every_state_column_the_answer_shows(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (definition,) = conn.execute(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'jobs_notify_changed'"
        ).fetchone()  # type: ignore[misc]
    compared = set(re.findall(r"\bold\.(\w+)", definition))
    listed = set(re.search(r"AFTER UPDATE OF (.*?) ON", definition)[1].split(", "))  # type: ignore[index]
    shown = set(JobPublic.model_fields) & {column.name for column in Job.__table__.columns}
    state = shown - PROGRESS_COLUMNS
    assert state <= compared, f"shown but not compared: {sorted(state - compared)}"
    # An update whose SET list names no listed column never reaches the comparison.
    assert state <= listed, f"shown but its update skips the trigger: {sorted(state - listed)}"
    assert not (compared | listed) & PROGRESS_COLUMNS, "a progress write would notify"


def _updated_at(pg_url: str, job_id: str) -> object:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return conn.execute("SELECT updated_at FROM jobs WHERE id = %s", (job_id,)).fetchone()


def test_the_barrier_applies_every_notification_committed_before_it(pg_url: str) -> None:
    # A loop of its own in a thread of its own: a session fixture of the suite (Playwright's
    # sync API) may keep an event loop running in this one.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, _barrier_rounds(pg_url)).result()


async def _barrier_rounds(pg_url: str) -> None:
    connection = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
    await connection.execute(f"LISTEN {CHANNEL}")
    seen: list[str] = []
    barrier = SyncBarrier(connection.pgconn, seen.append)
    try:
        for round_ in range(20):
            _write(pg_url, "SELECT pg_notify(%s, %s)", CHANNEL, str(round_))
            waiters = [asyncio.ensure_future(barrier.wait()) for _ in range(5)]
            waiters[0].cancel()  # a caller that goes away leaves the others their Sync
            await asyncio.gather(*waiters[1:])
            assert seen[-1] == str(round_)  # before any waiter was released
        _write(pg_url, "SELECT pg_terminate_backend(%s)", connection.pgconn.backend_pid)
        await asyncio.wait_for(asyncio.shield(barrier.lost), 10)
        with pytest.raises(psycopg.Error):
            await barrier.wait()
    finally:
        barrier.close(ConnectionLost("test over"))
        await connection.close()
