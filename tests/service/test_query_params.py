"""A query parameter no route declares answers 422 naming it, on every kind of route."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.service


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/v1/jobs?lable=x", "lable"),
        ("/v1/jobs?status=queued&limit=5&statuss=running", "statuss"),
        ("/v1/datasets?kind=images", "kind"),
        ("/v1/queue?everything=1", "everything"),
        ("/readyz?verbose=1", "verbose"),
    ],
)
def test_an_unknown_query_parameter_is_named(
    api_url: str, auth_headers: dict[str, str], path: str, parameter: str
) -> None:
    response = httpx.get(f"{api_url}{path}", headers=auth_headers)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid_request"
    assert [d["field"] for d in body["detail"]] == [f"query.{parameter}"]
    assert parameter in body["detail"][0]["message"]


def test_declared_parameters_still_pass(api_url: str, auth_headers: dict[str, str]) -> None:
    for path in ("/v1/jobs?status=queued&limit=5&tag=a", "/v1/queue", "/readyz"):
        assert httpx.get(f"{api_url}{path}", headers=auth_headers).status_code < 400, path
