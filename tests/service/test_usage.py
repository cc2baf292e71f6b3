"""Device usage over HTTP: each attempt's device time (claim to end) summed by user, team
and method, clipped to the asked window, as JSON or CSV; a user sees their team, an admin
every team; the Prometheus counter by team and device. Attempts are written through the
domain, as a worker writes them."""

from __future__ import annotations

import csv
import io
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ArchsearchClient
from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.jobs import claims
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.usage import repository as usage_repo
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.jobs import JobStatus
from tests.service import procs
from tests.service.conftest import Accounts, start_worker

pytestmark = pytest.mark.service


def run_job(
    sessions: sessionmaker[Session], team: str, user: str, method: str, seconds: float
) -> uuid.UUID:
    """A job claimed, held `seconds`, and ended: one attempt."""
    with transaction(sessions) as session:
        team_id = account_repo.team_by_name(session, team).id
        owner = account_repo.user_by_name(session, user).id
        placement = jobs.Placement(actor=user, team_id=team_id, owner_id=owner)
        job = jobs.create_job(session, method, {"method": method}, None, placement)
        claims.claim_job(session, job.id, "w", 60, 3)
        job_id = job.id
    time.sleep(seconds)
    with transaction(sessions) as session:
        jobs.finish_job(session, job_id, JobStatus.succeeded, "done", actor="w")
    return job_id


def recorded(sessions: sessionmaker[Session], job_id: uuid.UUID) -> float:
    with sessions() as session:
        return sum(a.seconds for a in usage_repo.job_seconds(session, job_id))


def test_usage_by_user_team_and_method(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    start = datetime.now(UTC)
    alice = run_job(sessions, "alpha", "alice", "train", 1.0)
    bob = run_job(sessions, "alpha", "bob", "prune", 0.5)
    carol = run_job(sessions, "beta", "carol", "train", 0.5)
    window = {"from": start.isoformat(), "to": datetime.now(UTC).isoformat()}
    headers = {"Authorization": f"Bearer {accounts.tokens['alice']}"}

    def report(group_by: str, token: dict[str, str] = headers) -> dict[tuple[str, str], float]:
        answer = httpx.get(
            f"{api_url}/v1/usage", params={**window, "group_by": group_by}, headers=token
        )
        assert answer.status_code == 200, answer.text
        return {(r["group"], r["device"]): r["device_seconds"] for r in answer.json()["data"]}

    seconds = {job: recorded(sessions, job) for job in (alice, bob, carol)}
    assert 1.0 <= seconds[alice] < 1.5 and 0.5 <= seconds[bob] < 1.0
    assert report("user") == {
        ("alice", "cpu"): pytest.approx(seconds[alice], abs=1e-3),
        ("bob", "cpu"): pytest.approx(seconds[bob], abs=1e-3),
    }
    assert report("team") == {
        ("alpha", "cpu"): pytest.approx(seconds[alice] + seconds[bob], abs=2e-3)
    }
    assert set(report("method")) == {("train", "cpu"), ("prune", "cpu")}
    admin = {"Authorization": f"Bearer {accounts.admin_token}"}
    assert report("team", admin)[("beta", "cpu")] == pytest.approx(seconds[carol], abs=1e-3)


def test_usage_is_clipped_to_the_window_and_speaks_csv(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    job_id = run_job(sessions, "alpha", "alice", "grow", 1.0)
    with sessions() as session:
        (attempt,) = usage_repo.job_seconds(session, job_id)
    middle = attempt.started_at + (attempt.last_seen_at - attempt.started_at) / 2
    params = {
        "from": middle.isoformat(),
        "to": attempt.last_seen_at.isoformat(),
        "group_by": "method",
    }
    headers = {"Authorization": f"Bearer {accounts.tokens['bob']}"}
    answer = httpx.get(f"{api_url}/v1/usage", params={**params, "format": "csv"}, headers=headers)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    (grow,) = [r for r in rows if r["method"] == "grow"]
    assert float(grow["device_seconds"]) == pytest.approx(attempt.seconds / 2, abs=2e-3)
    assert grow["device"] == "cpu" and grow["attempts"] == "1" and grow["jobs"] == "1"
    backwards = {"from": params["to"], "to": params["from"]}
    refused = httpx.get(f"{api_url}/v1/usage", params=backwards, headers=headers)
    assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "to"
    bad = httpx.get(f"{api_url}/v1/usage", params={"group_by": "planet"}, headers=headers)
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "query.group_by"


def test_device_seconds_counter(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    run_job(sessions, "beta", "dave", "train", 0.2)
    with sessions() as session:
        totals = {(t, d): s for t, d, s in usage_repo.seconds_by_team_and_device(session)}
    admin = {"Authorization": f"Bearer {accounts.admin_token}"}
    text = httpx.get(f"{api_url}/metrics", headers=admin).text
    series = 'archsearch_device_seconds_total{device="cpu",team="beta"}'
    line = next(row for row in text.splitlines() if row.startswith(series))
    assert float(line.split()[-1]) == pytest.approx(totals[("beta", "cpu")], abs=1e-6)


# A digits job long enough to be killed mid-run, short enough for CI.
RESUMABLE = {
    "method": "train",
    "dataset": {"name": "digits", "train_subset": 600},
    "training": {"epochs": 6},
    "label": "usage-sigkill",
}


@pytest.mark.slow
def test_device_time_across_a_sigkill_resume(
    api_url: str,
    worker: procs.Proc,
    service_env: dict[str, str],
    log_dir: Path,
    sessions: sessionmaker[Session],
    token: str,
) -> None:
    """The first attempt counts from its claim to the kill (less at most one lease renewal
    interval: it ends at its last renewal), the second from its claim to the job's end."""
    worker.stop()  # the doomed worker takes the job
    doomed = start_worker(service_env, log_dir, "usage-doomed")
    with ArchsearchClient(api_url, token=token) as client:
        job_id = client.submit(RESUMABLE).id
        deadline = time.monotonic() + 300
        while len(client.metrics(job_id).get("test_accuracy", [])) < 2:
            assert time.monotonic() < deadline, "the job never reported two epochs"
            time.sleep(0.1)
        killed_at = datetime.now(UTC)
        doomed.kill()
        rescuer = start_worker(service_env, log_dir, "usage-rescuer")
        try:
            final = client.wait(job_id, timeout=300)
        finally:
            rescuer.stop()
            worker.replace_with(start_worker(service_env, log_dir, "worker"))
        claimed = [e.at for e in client.events(job_id) if e.to_status == "running"]
    assert final.status == "succeeded" and final.attempts == 2 and final.finished_at
    with sessions() as session:
        first, second = usage_repo.job_seconds(session, job_id)
    renew_every = float(service_env["ARCHSEARCH_LEASE_SECONDS"]) / 3
    ran_first = (killed_at - claimed[0]).total_seconds()
    ran_second = (final.finished_at - claimed[1]).total_seconds()
    assert (first.started_at, second.started_at) == (claimed[0], claimed[1])
    assert 0 <= ran_first - first.seconds <= renew_every + 0.2
    assert second.seconds == pytest.approx(ran_second, abs=1e-3)
    print(
        f"\nusage of {job_id}: attempt 1 {first.seconds:.2f} s on {first.device} (ran "
        f"{ran_first:.2f} s until SIGKILL), attempt 2 {second.seconds:.2f} s on "
        f"{second.device} (ran {ran_second:.2f} s)"
    )
