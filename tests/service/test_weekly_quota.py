"""A team's weekly device-hours quota: once the device time its jobs used in the last 7 days
reaches it, the team's queued jobs wait (the claim leaves them out) and say why, in
`pending_reason` and in `/v1/queue`; raising the quota (`archsearch admin set-team-quota`)
lets them start. The device time is what workers record in `job_attempts`."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ArchsearchClient
from archsearch.jobs.domain.accounts import repository as accounts
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.jobs.scheduler import claim_next, pending_reason
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus
from tests.service import procs

pytestmark = pytest.mark.service
SPEC = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}


def used(session: Session, team_name: str, seconds: float, days_ago: float = 1) -> None:
    """A finished job of the team that held a device `seconds`, ending `days_ago` ago."""
    team = accounts.team_by_name(session, team_name)
    placement = jobs.Placement(team_id=team.id)
    job = jobs.create_job(session, "train", {}, None, placement)
    job.status = JobStatus.succeeded
    end = utcnow() - timedelta(days=days_ago)
    start = end - timedelta(seconds=seconds)
    session.add(
        JobAttempt(
            job_id=job.id, attempt=1, team_id=team.id, method="train", device="cpu",
            worker="w", started_at=start, last_seen_at=end, ended_at=end, seconds=seconds,
        )
    )  # fmt: skip
    session.flush()


def set_quota(service_env: dict[str, str], team: str, hours: str) -> str:
    """`archsearch admin set-team-quota`, as an admin runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "archsearch.cli.main", "admin", "set-team-quota", team]
        + ["--weekly-device-hours", hours],
        env={**os.environ, **service_env},
        capture_output=True,
        text=True,
        check=True,
    )
    return " ".join(done.stdout.split())  # rich wraps long lines


@pytest.mark.slow
def test_a_team_over_its_weekly_device_hours_waits_until_the_quota_is_raised(
    sessions: sessionmaker[Session], service_env: dict[str, str], api_url: str, worker: procs.Proc
) -> None:
    name = f"q-{uuid.uuid4().hex[:6]}"
    with transaction(sessions) as session:
        team = accounts.create_team(session, name, None)
        accounts.create_user(session, team, f"{name}-user", False, None)
        token = issue_token(session, f"{name}-user", "submit", 1)
        used(session, name, 60)  # 0.017 h this week
        used(session, name, 3600, days_ago=8)  # an hour, but before the last 7 days
    out = set_quota(service_env, name, "0.01")  # 36 s a week: used up
    reason = f"team {name} used 0.02 of 0.01 device-hours in the last 7 days"
    assert reason in out
    with ArchsearchClient(api_url, token=token) as client:
        job_id = client.submit(SPEC).id
        (waiting,) = [j for j in client.queue().waiting if j.id == job_id]
        assert waiting.pending_reason == reason
        assert client.get_job(job_id).status == "queued"
        with transaction(sessions) as session:  # raised as the command does, in-process
            raised = accounts.team_by_name(session, name)
            accounts.set_weekly_device_hours(session, raised, 1)
            assert quota.update_holds(session, team_ids={raised.id}) == {name: None}
        final = client.wait(job_id, timeout=240)
        assert final.status == "succeeded", final.error


@pytest.fixture()
def own_db() -> Iterator[sessionmaker[Session]]:
    """A database no worker watches: the claims below are the test's own."""
    name = f"archsearch_quota_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    upgrade(url)
    engine = make_engine(url)
    yield make_session_factory(engine)
    engine.dispose()
    procs.drop_database(name)


def test_the_claim_leaves_a_held_team_out_and_the_window_rolls(
    own_db: sessionmaker[Session],
) -> None:
    sessions = own_db
    name = f"r-{uuid.uuid4().hex[:6]}"
    with transaction(sessions) as session:
        team = accounts.create_team(session, name, None)
        accounts.set_weekly_device_hours(session, team, 0.01)
        used(session, name, 60, days_ago=6.99)
        placement = jobs.Placement(team_id=team.id, priority=1000)  # first in any queue
        job_id = jobs.create_job(session, "train", SPEC, None, placement).id
        assert name in quota.update_holds(session, team_ids={team.id})
        assert claim_next(session, "w", Offer("cpu"), Settings()) is None
        held = session.get_one(Job, job_id)
        assert pending_reason(session, held, Settings()).startswith(f"team {name} used 0.02")
        # A quarter of an hour later the minute of use is past the 7 days: released.
        later = utcnow() + timedelta(minutes=15)
        assert quota.update_holds(session, later, team_ids={team.id}) == {name: None}
        assert claim_next(session, "w", Offer("cpu"), Settings()) == job_id
