"""`GET /v1/usage` takes both ends of its period or neither: one alone, or a `to` not after
`from`, is a 422 that names the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

pytestmark = pytest.mark.service

NOW = datetime.now(UTC)
DAY_AGO = (NOW - timedelta(days=1)).isoformat()


@pytest.mark.parametrize(
    ("params", "field", "named"),
    [
        ({"from": DAY_AGO}, "query.to", "'to'"),
        ({"to": NOW.isoformat()}, "query.to", "'from'"),
        ({"from": NOW.isoformat(), "to": DAY_AGO}, "to", "'to'"),
        ({"from": DAY_AGO, "to": DAY_AGO}, "to", "'to'"),
        ({"from": "yesterday", "to": DAY_AGO}, "query.from", "datetime"),
    ],
)
def test_an_incomplete_or_backward_period_is_refused(
    api_url: str, auth_headers: dict[str, str], params: dict[str, str], field: str, named: str
) -> None:
    answer = httpx.get(f"{api_url}/v1/usage", params=params, headers=auth_headers)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"][0]
    assert detail["field"] == field and named in detail["message"], detail


@pytest.mark.parametrize("params", [{}, {"from": DAY_AGO, "to": NOW.isoformat()}])
def test_both_ends_or_neither_are_served(
    api_url: str, auth_headers: dict[str, str], params: dict[str, str]
) -> None:
    answer = httpx.get(f"{api_url}/v1/usage", params=params, headers=auth_headers)
    assert answer.status_code == 200, answer.text
