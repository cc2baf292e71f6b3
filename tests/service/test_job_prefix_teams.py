"""`id_prefix` on PostgreSQL, through the real API process: the team rules of every route
hold (another team's job is not found by its prefix; an admin finds it)."""

from __future__ import annotations

import httpx
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
