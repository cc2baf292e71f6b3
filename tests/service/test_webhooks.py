"""Webhooks over HTTP: subscribing (with internal targets refused in team mode unless an
admin allows them), team isolation, a signed test ping, the Slack body, no redirects
followed, and the delivery log; job outcomes and model events reach a receiver signed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.jobs import claims, handback
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.usage import repository as usage_repository
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.jobs import JobStatus
from tests.service import procs
from tests.service.conftest import Accounts
from tests.service.test_models import record_job
from tests.service.webhook_receiver import Receiver

pytestmark = pytest.mark.service


@pytest.fixture(scope="module")
def hooks_api(api_url: str) -> str:
    """The session's API: its settings allow loopback receivers (tests/service/conftest.py)."""
    return api_url


@pytest.fixture()
def strict_api(service_env: dict[str, str], log_dir: Path) -> Iterator[str]:
    """An API process with the default policy, alive only for one test: while it runs,
    its deliverer would refuse (and so hold back) the other tests' loopback deliveries."""
    env = {**service_env, "ARCHSEARCH_WEBHOOK_ALLOW_PRIVATE_TARGETS": "false"}
    port = procs.free_port()
    proc = procs.start("api-strict", ["api", "--port", str(port)], env, log_dir)
    url = f"http://127.0.0.1:{port}"
    procs.wait_http(f"{url}/healthz", proc)
    yield url
    proc.stop()


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    started = Receiver()
    started.start()
    yield started
    started.stop()


def bearer(accounts: Accounts, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {accounts.tokens[user]}"}


def subscribe(api: str, headers: dict[str, str], url: str, events: list[str], **extra: Any) -> Any:
    body = {"url": url, "events": events, "secret": "s" * 32, **extra}
    answer = httpx.post(f"{api}/v1/webhooks", json=body, headers=headers)
    assert answer.status_code == 201, answer.text
    return answer.json()


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_team_mode_refuses_internal_targets_by_default(strict_api: str, accounts: Accounts) -> None:
    api_url = strict_api
    for url in ("http://127.0.0.1:9/x", "http://10.1.2.3/x", "http://169.254.169.254/latest"):
        body = {"url": url, "events": ["job.failed"]}
        answer = httpx.post(f"{api_url}/v1/webhooks", json=body, headers=bearer(accounts, "alice"))
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["field"] == "url"
    bad = httpx.post(
        f"{api_url}/v1/webhooks",
        json={"url": "ftp://example.org", "events": ["job.nope"]},
        headers=bearer(accounts, "alice"),
    )
    assert bad.status_code == 422 and "events" in bad.text


def test_a_webhook_belongs_to_its_team(
    hooks_api: str, accounts: Accounts, receiver: Receiver
) -> None:
    created = subscribe(hooks_api, bearer(accounts, "alice"), receiver.url, ["job.failed"])
    assert created["secret"] == "s" * 32
    path = f"{hooks_api}/v1/webhooks/{created['id']}"
    mine = httpx.get(path, headers=bearer(accounts, "bob")).json()
    assert mine["url"] == receiver.url and "secret" not in mine
    for method, suffix in (("GET", ""), ("DELETE", ""), ("POST", "/test"), ("GET", "/deliveries")):
        answer = httpx.request(method, path + suffix, headers=bearer(accounts, "carol"))
        assert answer.status_code == 404, (method, suffix)
    listed = httpx.get(f"{hooks_api}/v1/webhooks", headers=bearer(accounts, "carol")).json()
    assert created["id"] not in [w["id"] for w in listed["data"]]
    assert httpx.delete(path, headers=bearer(accounts, "alice")).status_code == 204
    assert httpx.get(path, headers=bearer(accounts, "alice")).status_code == 404


def test_a_test_ping_is_signed_and_logged(
    hooks_api: str, accounts: Accounts, receiver: Receiver
) -> None:
    created = subscribe(hooks_api, bearer(accounts, "alice"), receiver.url, ["job.succeeded"])
    path = f"{hooks_api}/v1/webhooks/{created['id']}"
    delivery = httpx.post(f"{path}/test", headers=bearer(accounts, "alice")).json()
    assert delivery["status"] == "delivered" and delivery["last_status_code"] == 200
    (got,) = receiver.received
    assert got.event == "ping" and got.delivery == delivery["id"]
    assert got.signed_by("s" * 32) and not got.signed_by("t" * 32)
    receiver.status = 302  # a redirect is a failure, never followed
    failed = httpx.post(f"{path}/test", headers=bearer(accounts, "alice")).json()
    assert failed["status"] == "pending" and failed["last_status_code"] == 302
    assert len(receiver.received) == 2  # the redirect's target was not called
    log = httpx.get(f"{path}/deliveries", headers=bearer(accounts, "alice")).json()["data"]
    assert [d["id"] for d in log[:2]] == [failed["id"], delivery["id"]]
    assert log[0]["attempt_log"][0]["status_code"] == 302
    httpx.delete(path, headers=bearer(accounts, "alice"))


def test_job_outcomes_and_model_events_reach_the_receiver(
    hooks_api: str,
    accounts: Accounts,
    receiver: Receiver,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
) -> None:
    events = ["job.succeeded", "job.failed", "model.version_created", "model.alias_changed"]
    created = subscribe(hooks_api, bearer(accounts, "alice"), receiver.url, events)
    slack = subscribe(
        hooks_api, bearer(accounts, "alice"), receiver.url, ["job.failed"], format="slack"
    )
    failed_id = _failed_job(sessions, "alpha")
    name = f"hooked-{uuid.uuid4().hex[:6]}"
    job_id, _ = record_job(sessions, service_env, "alpha")
    headers = bearer(accounts, "alice")
    httpx.post(
        f"{hooks_api}/v1/models/{name}/versions", json={"job_id": str(job_id)}, headers=headers
    )
    httpx.put(
        f"{hooks_api}/v1/models/{name}/aliases/production", json={"version": 1}, headers=headers
    )
    _failed_job(sessions, "beta")  # another team's job: never sent here
    # job.failed twice (JSON and Slack), job.succeeded, the version, the alias.
    wait_for(lambda: len(receiver.received) >= 5)
    time.sleep(1)
    by_event = {
        (r.event, r.json().get("job", {}).get("id") or r.json().get("model") or "slack"): r
        for r in receiver.received
    }
    assert all(r.signed_by("s" * 32) for r in receiver.received)
    assert by_event[("job.failed", str(failed_id))].json()["job"]["error"] == "it broke"
    assert by_event[("job.succeeded", str(job_id))].json()["job"]["status"] == "succeeded"
    assert by_event[("model.version_created", name)].json()["version"] == 1
    alias = by_event[("model.alias_changed", name)].json()
    assert (alias["alias"], alias["from_version"], alias["to_version"]) == ("production", None, 1)
    texts = [r.json().get("text") for r in receiver.received if "text" in r.json()]
    assert texts == [f"archsearch: job {str(failed_id)[:8]} (train) failed: it broke"]
    assert len(receiver.received) == 5  # nothing of team beta's job
    for hook in (created, slack):
        httpx.delete(f"{hooks_api}/v1/webhooks/{hook['id']}", headers=headers)


def _failed_job(sessions: sessionmaker[Session], team: str) -> uuid.UUID:
    with transaction(sessions) as session:
        team_id = account_repo.team_by_name(session, team).id
        placement = jobs.Placement(actor="alice", team_id=team_id)
        job = jobs.create_job(session, "train", {"method": "train"}, None, placement)
        claims.claim_job(session, job.id, "w", 60, 3)
        jobs.finish_job(session, job.id, JobStatus.failed, "error", error="it broke")
        return job.id


def test_a_handed_back_job_is_preempted_and_keeps_its_runs(
    hooks_api: str, accounts: Accounts, receiver: Receiver, sessions: sessionmaker[Session]
) -> None:
    hook = subscribe(hooks_api, bearer(accounts, "alice"), receiver.url, ["job.preempted"])
    with transaction(sessions) as session:
        team_id = account_repo.team_by_name(session, "alpha").id
        job = jobs.create_job(
            session, "train", {"method": "train"}, None, jobs.Placement("alice", team_id=team_id)
        )
        claims.claim_job(session, job.id, "w1", 60, 3)
        job_id = job.id
    with transaction(sessions) as session:
        assert handback.hand_back(session, job_id, "w1", "worker stopping")
    with transaction(sessions) as session:
        claims.claim_job(session, job_id, "w2", 60, 3)  # the attempt given back is reused
        jobs.finish_job(session, job_id, JobStatus.succeeded, "done", actor="w2")
    with sessions() as session:
        runs = usage_repository.job_seconds(session, job_id)
    assert [(r.attempt, r.worker) for r in runs] == [(1, "w1"), (2, "w2")]
    wait_for(lambda: len(receiver.received) >= 1)
    (got,) = receiver.received
    assert got.event == "job.preempted" and got.json()["job"]["id"] == str(job_id)
    assert got.json()["job"]["reason"] == "preempted: worker stopping"
    httpx.delete(f"{hooks_api}/v1/webhooks/{hook['id']}", headers=bearer(accounts, "alice"))
