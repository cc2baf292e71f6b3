"""`GET /metrics`: Prometheus text, admin-only in team mode, and numbers that match the
jobs this test ran (read back from the database rows the worker wrote)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ArchsearchClient
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.domain.errors import Forbidden
from archsearch.jobs.platform.db import transaction
from tests.service import procs
from tests.service.conftest import Accounts, start_worker

pytestmark = pytest.mark.service

DIGITS_JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 2}}
DIVERGING_JOB = {
    "method": "train",
    "dataset": {"name": "digits"},
    "training": {"epochs": 3, "optimizer": {"name": "sgd", "lr": 10.0, "momentum": 0.99}},
}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(api_url: str, token: str) -> Samples:
    response = httpx.get(f"{api_url}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def settled_scrape(api_url: str, token: str, timeout: float = 60.0) -> Samples:
    """A scrape taken once no job is queued or running: a job an earlier test left behind
    must not end between this test's two scrapes and be counted as one of its own."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(api_url, token)
        busy = sum(
            v
            for (name, labels), v in samples.items()
            if name == "archsearch_jobs" and dict(labels).get("status") in ("queued", "running")
        )
        if not busy or time.monotonic() > deadline:
            return samples
        time.sleep(0.2)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str) -> float:
    return sum(v for (sample, _), v in samples.items() if sample == name)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_only_an_admin_token_reads_metrics(api_url: str, accounts: Accounts) -> None:
    assert httpx.get(f"{api_url}/metrics").status_code == 401
    user = httpx.get(
        f"{api_url}/metrics", headers={"Authorization": f"Bearer {accounts.tokens['carol']}"}
    )
    assert user.status_code == 403 and user.json()["error"] == "forbidden"
    assert "admin" in user.json()["detail"]
    assert scrape(api_url, accounts.admin_token)


def test_metrics_count_the_jobs_that_ran(
    api_url: str, worker: procs.Proc, accounts: Accounts
) -> None:
    admin = accounts.admin_token
    before = settled_scrape(api_url, admin)
    with ArchsearchClient(api_url, token=accounts.tokens["alice"]) as client:
        ids = [client.submit(spec).id for spec in (DIGITS_JOB, DIGITS_JOB, DIVERGING_JOB)]
        jobs = [client.wait(job_id, timeout=180) for job_id in ids]
        assert [j.status for j in jobs] == ["succeeded", "succeeded", "failed"]
        middle = scrape(api_url, admin)
        for _ in range(3):
            client.get_job(ids[0])
    missing = httpx.get(
        f"{api_url}/v1/jobs/{uuid.uuid4()}",
        headers={"Authorization": f"Bearer {accounts.tokens['alice']}"},
    )
    assert missing.status_code == 404
    after = scrape(api_url, admin)

    assert delta(before, after, "archsearch_jobs", status="succeeded", method="train") == 2
    assert delta(before, after, "archsearch_jobs", status="failed", method="train") == 1
    assert delta(before, after, "archsearch_job_failures_total", reason="user error") == 1
    assert delta(before, after, "archsearch_job_run_seconds_count", method="train") == 3
    run_seconds = 0.0
    for job in jobs:
        assert job.started_at is not None and job.finished_at is not None
        run_seconds += (job.finished_at - job.started_at).total_seconds()
    assert delta(before, after, "archsearch_job_run_seconds_sum", method="train") == (
        pytest.approx(run_seconds, abs=1e-3)
    )
    assert delta(before, after, "archsearch_job_claim_seconds_count", method="train") == 3
    assert value(after, "archsearch_workers_live", device="cpu") >= 1
    assert total(after, "archsearch_queue_depth") == 0  # every job has run

    # Requests by route template, not by path: three reads of one job, one of a missing one.
    route = "/v1/jobs/{job_id}"
    http = "archsearch_http_requests_total"
    assert delta(middle, after, http, method="GET", route=route, status="200") == 3
    assert delta(middle, after, http, method="GET", route=route, status="404") == 1
    latency = "archsearch_http_request_duration_seconds_count"
    assert delta(middle, after, latency, method="GET", route=route) == 4


def test_queue_depth_and_oldest_age_while_no_worker_serves(
    api_url: str, worker: procs.Proc, accounts: Accounts, service_env: Mapping[str, str]
) -> None:
    worker.stop()  # nothing claims: the jobs wait
    try:
        with ArchsearchClient(api_url, token=accounts.tokens["bob"]) as client:
            ids = [client.submit(DIGITS_JOB).id for _ in range(2)]
            samples = scrape(api_url, accounts.admin_token)
            # By the device the jobs asked for: a digits job leaves it to the scheduler.
            assert value(samples, "archsearch_queue_depth", device="auto") == 2
            age = value(samples, "archsearch_oldest_queued_age_seconds", device="auto")
            assert 0 < age < 60
            for job_id in ids:
                client.cancel(job_id)
    finally:
        worker.replace_with(start_worker(dict(service_env), worker.log_path.parent, "worker"))


def test_a_metrics_token_scrapes_and_does_nothing_else(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    with transaction(sessions) as session:
        scraper = issue_token(session, "root", "metrics", 1)
        with pytest.raises(Forbidden, match="admin users"):
            issue_token(session, "carol", "metrics", 1)  # /metrics spans every team
    samples = scrape(api_url, scraper)
    # A device nobody queues for still has its samples, at 0: an alert sees the drain.
    assert ("archsearch_queue_depth", frozenset({("device", "cuda")})) in samples
    assert value(samples, "archsearch_queue_depth", device="cuda") == 0
    assert value(samples, "archsearch_oldest_queued_age_seconds", device="cuda") == 0
    headers = {"Authorization": f"Bearer {scraper}"}
    for method, path in (("GET", "/v1/jobs"), ("POST", f"/v1/jobs/{uuid.uuid4()}/cancel")):
        answer = httpx.request(method, f"{api_url}{path}", headers=headers)
        assert answer.status_code == 403, (path, answer.text)
        assert "'metrics'" in answer.json()["detail"]


def test_made_up_methods_are_counted_as_other(api_url: str, accounts: Accounts) -> None:
    # A label per method a client invents would grow the series without bound.
    for i in range(3):
        assert httpx.request(f"MADEUP{i}", f"{api_url}/healthz").status_code == 405
    samples = scrape(api_url, accounts.admin_token)
    methods = {dict(labels).get("method") for (_, labels) in samples}
    assert not any(str(m).startswith("MADEUP") for m in methods)
    http = "archsearch_http_requests_total"
    assert value(samples, http, method="other", route="/healthz", status="405") >= 3
