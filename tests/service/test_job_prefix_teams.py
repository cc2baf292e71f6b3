"""`id_prefix` on PostgreSQL, through the real API process: the team rules of every route
hold (another team's job is not found by its prefix; an admin finds it)."""

from __future__ import annotations

import httpx
import psycopg
import pytest

from tests.service.conftest import Accounts

pytestmark = pytest.mark.service


def jobs_with_prefix(api_url: str, token: str, prefix: str) -> list[str]:
    answer = httpx.get(
        f"{api_url}/v1/jobs",
        params={"id_prefix": prefix},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 200, answer.text
    return [job["id"] for job in answer.json()["data"]]


def test_id_prefix_keeps_to_the_callers_team(api_url: str, accounts: Accounts) -> None:
    submitted = httpx.post(
        f"{api_url}/v1/jobs",
        json={"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}},
        headers={"Authorization": f"Bearer {accounts.tokens['alice']}"},
    )
    assert submitted.status_code == 201, submitted.text
    job_id = submitted.json()["id"]
    prefix = job_id.replace("-", "")[:10]

    assert jobs_with_prefix(api_url, accounts.tokens["alice"], prefix) == [job_id]
    assert jobs_with_prefix(api_url, accounts.tokens["bob"], prefix.upper()) == [job_id]
    assert jobs_with_prefix(api_url, accounts.tokens["carol"], prefix) == []
    assert jobs_with_prefix(api_url, accounts.admin_token, prefix) == [job_id]
    # The range scan on PostgreSQL's uuid order: the full id, and its last digit changed.
    full = job_id.replace("-", "")
    assert jobs_with_prefix(api_url, accounts.admin_token, full) == [job_id]
    other = full[:-1] + ("0" if full[-1] != "0" else "1")
    assert jobs_with_prefix(api_url, accounts.admin_token, other) == []


def _get(api_url: str, token: str, path: str) -> httpx.Response:
    return httpx.get(f"{api_url}{path}", headers={"Authorization": f"Bearer {token}"})


def test_a_unique_start_of_an_id_works_wherever_the_id_does(
    api_url: str, accounts: Accounts
) -> None:
    alice, carol = accounts.tokens["alice"], accounts.tokens["carol"]
    submitted = httpx.post(
        f"{api_url}/v1/jobs",
        json={"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}},
        headers={"Authorization": f"Bearer {alice}"},
    )
    job_id = submitted.json()["id"]
    short = job_id[:8]  # what the CLI and the jobs table show
    assert _get(api_url, alice, f"/v1/jobs/{short}").json()["id"] == job_id
    assert _get(api_url, alice, f"/v1/jobs/{short.upper()}").json()["id"] == job_id
    assert _get(api_url, alice, f"/v1/jobs/{short}/events").json()["job_id"] == job_id
    assert _get(api_url, accounts.admin_token, f"/v1/jobs/{short}").status_code == 200
    hidden = _get(api_url, carol, f"/v1/jobs/{short}")  # another team's: as if absent
    assert (hidden.status_code, hidden.json()["detail"]) == (404, f"no job {short}")
    for malformed in ("abc", "not-an-id", short + "g"):
        assert _get(api_url, alice, f"/v1/jobs/{malformed}").status_code == 404, malformed


def test_a_start_shared_by_several_ids_is_refused_with_them(
    api_url: str, accounts: Accounts, pg_url: str
) -> None:
    alice = accounts.tokens["alice"]
    submitted = httpx.post(
        f"{api_url}/v1/jobs",
        json={"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}},
        headers={"Authorization": f"Bearer {alice}"},
    )
    # Two copies of it whose ids share a start, as a busy team's jobs eventually do.
    shared = [f"fedcba98-7654-4321-8000-00000000000{k}" for k in (1, 2)]
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            "CREATE TEMP TABLE copied AS SELECT * FROM jobs WHERE id = %s",
            (submitted.json()["id"],),
        )
        for new in shared:
            conn.execute("UPDATE copied SET id = %s", (new,))
            conn.execute("INSERT INTO jobs SELECT * FROM copied")
    answer = _get(api_url, alice, "/v1/jobs/fedcba98")
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"] == "ambiguous_id"
    assert all(full in answer.json()["detail"] for full in shared)
    whole = _get(api_url, alice, "/v1/jobs/fedcba98-7654-4321-8000-000000000002")
    assert whole.json()["id"] == shared[1]
    assert _get(api_url, alice, "/v1/jobs/fedcba98765443218000000000000001").status_code == 200
