"""GET /v1/jobs/{id}/logs: the lines a worker captured while running the job, read with
a cursor, and hidden from other teams."""

from __future__ import annotations

import httpx
import pytest

from archsearch.client import ArchsearchClient
from tests.service import procs
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service

DIGITS_JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 2}}


def read_logs(api_url: str, job_id: object, token: str, **params: int) -> httpx.Response:
    return httpx.get(
        f"{api_url}/v1/jobs/{job_id}/logs",
        params=params,
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_finished_jobs_log_lines(api_url: str, worker: procs.Proc, accounts: Accounts) -> None:
    alice = accounts.tokens["alice"]
    with ArchsearchClient(api_url, token=alice) as client:
        job = client.wait(client.submit(DIGITS_JOB).id, timeout=180)
    assert job.status == "succeeded", job.error

    page = read_logs(api_url, job.id, alice)
    assert page.status_code == 200
    body = page.json()
    messages = [line["message"] for line in body["data"]]
    assert messages[0].startswith(f"job {job.id} running on worker ")
    assert messages[-1] == "run ended: succeeded (finished)"
    assert body["truncated"] is False and body["next_after"] == body["data"][-1]["id"]
    assert body["data"][0]["level"] == "INFO"
    assert body["data"][0]["logger"] == "archsearch.jobs.runtime.executor"

    # The cursor: after the first line, the rest; after the last, nothing.
    rest = read_logs(api_url, job.id, alice, after=body["data"][0]["id"]).json()
    assert [line["message"] for line in rest["data"]] == messages[1:]
    done = read_logs(api_url, job.id, alice, after=body["next_after"]).json()
    assert done["data"] == [] and done["next_after"] == body["next_after"]

    bob = read_logs(api_url, job.id, accounts.tokens["bob"])  # same team
    assert bob.status_code == 200
    carol = read_logs(api_url, job.id, accounts.tokens["carol"])  # another team
    assert carol.status_code == 404 and carol.json()["error"] == "not_found"
    bad = read_logs(api_url, job.id, alice, limit=0)
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "query.limit"


def test_following_a_running_jobs_log_streams_to_its_end(
    api_url: str, worker: procs.Proc, accounts: Accounts
) -> None:
    alice = accounts.tokens["alice"]
    spec = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 4}}
    with ArchsearchClient(api_url, token=alice) as client:
        job = client.submit(spec)
        followed = list(client.follow_logs(job.id))  # starts while the job is queued
        final = client.get_job(job.id)
        everything = client.logs(job.id).data
    assert final.status == "succeeded"
    assert [line.id for line in followed] == [line.id for line in everything]
    assert followed[-1].message == "run ended: succeeded (finished)"

    carol = httpx.get(
        f"{api_url}/v1/jobs/{job.id}/logs",
        params={"follow": "true"},
        headers={"Authorization": f"Bearer {accounts.tokens['carol']}"},
    )
    assert carol.status_code == 404  # another team: no stream, the same 404 as a missing job
