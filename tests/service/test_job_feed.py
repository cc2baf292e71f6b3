"""The API process's one feed of job changes (api/live/feed.py) reaches its subscribers: a
job's end sends its webhook at once, though the sender's own timed look is a minute away.

An API of its own on a database of its own: no other process of the suite sends this
database's outbox, so a delivery within seconds can only have come from the feed's nudge.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.jobs import claims
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.schemas.jobs import JobStatus
from tests.service import procs
from tests.service.webhook_receiver import Receiver

pytestmark = pytest.mark.service

SLOW_POLL_SECONDS = 60.0
PROMPT_SECONDS = 5.0


@pytest.fixture(scope="module")
def lone_api(service_env: dict[str, str], log_dir: Path) -> Iterator[tuple[str, str, str]]:
    """(API URL, database URL, a token of user `bench`), the API alone on its database."""
    name = f"archsearch_feed_{uuid.uuid4().hex[:8]}"
    database_url = procs.create_database(name)
    try:
        upgrade(database_url)
        token = procs.user_with_token(database_url)
        env = {
            **service_env,
            "ARCHSEARCH_DATABASE_URL": database_url,
            "ARCHSEARCH_QUEUE_NAME": f"feed-{uuid.uuid4().hex[:8]}",
            "ARCHSEARCH_WEBHOOK_POLL_SECONDS": str(SLOW_POLL_SECONDS),
        }
        port = procs.free_port()
        proc = procs.start("api-feed", ["api", "--port", str(port)], env, log_dir)
        url = f"http://127.0.0.1:{port}"
        try:
            procs.wait_http(f"{url}/healthz", proc)
            yield url, database_url, token
        finally:
            proc.stop()
    finally:
        procs.drop_database(name)


def test_a_jobs_end_sends_its_webhook_at_once(lone_api: tuple[str, str, str]) -> None:
    url, database_url, token = lone_api
    receiver = Receiver()
    receiver.start()
    engine = make_engine(database_url)
    try:
        body = {"url": receiver.url, "events": ["job.succeeded"], "secret": "s" * 24}
        headers = {"Authorization": f"Bearer {token}"}
        httpx.post(f"{url}/v1/webhooks", json=body, headers=headers).raise_for_status()
        time.sleep(1.0)  # the feed listens (it starts with the app) and the sender's first look
        job_id = _run_and_end_a_job(make_session_factory(engine))
        ended = time.monotonic()
        procs.wait_until(lambda: receiver.received, PROMPT_SECONDS, "the job's webhook")
        assert time.monotonic() - ended < SLOW_POLL_SECONDS / 2
        assert receiver.received[0].json()["job"]["id"] == str(job_id)
    finally:
        receiver.stop()
        engine.dispose()


def _run_and_end_a_job(sessions) -> uuid.UUID:  # type: ignore[no-untyped-def]
    """A job claimed and succeeded through the domain, as a worker writes it."""
    with transaction(sessions) as session:
        team_id = account_repo.team_by_name(session, "bench").id
        job = jobs.create_job(
            session, "train", {"method": "train"}, "j", jobs.Placement("bench", team_id=team_id)
        )
        claims.claim_job(session, job.id, "w", 60, 3)
    with transaction(sessions) as session:
        jobs.finish_job(session, job.id, JobStatus.succeeded, "done")
    return job.id
