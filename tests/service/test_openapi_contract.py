"""The OpenAPI document says what the live API really answers.

schemathesis generates requests for every operation of `GET /openapi.json` of a real team-mode
`archsearch api` (PostgreSQL, Redis, token auth) and checks each response: never a 5xx, a status
code the operation declares, a declared content type, and a body that matches the declared
schema (errors: `ErrorBody`)."""

from __future__ import annotations

from typing import Any

import httpx
import hypothesis
import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.service.conftest import Accounts

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES_PER_OPERATION = 25  # every operation; about a minute in all on a shared 2-core box


@pytest.fixture(scope="module")
def live_schema(api_url: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{api_url}/openapi.json")


# The event streams never end on their own (keep-alives every 15 s): a request generator cannot
# judge them; tests/service/test_streams.py covers their answers, 404 and 422 included. (The
# filter goes on the lazy schema: a filter on the fixture's schema is not applied.)
schema = schemathesis.pytest.from_fixture("live_schema").exclude(tag="streams")


@pytest.mark.slow
@schema.parametrize()
@hypothesis.settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    derandomize=True,
)
def test_every_answer_matches_the_document(
    case: schemathesis.Case[Any], api_url: str, accounts: Accounts
) -> None:
    headers = {"Authorization": f"Bearer {accounts.admin_token}"}
    case.call_and_validate(base_url=api_url, headers=headers, checks=CHECKS, timeout=30)


def test_every_operation_documents_its_errors_with_the_error_body(api_url: str) -> None:
    document = httpx.get(f"{api_url}/openapi.json", timeout=10).json()
    error_body = {"$ref": "#/components/schemas/ErrorBody"}
    assert "ErrorBody" in document["components"]["schemas"]
    operations = {
        f"{method.upper()} {path}": operation
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }
    for label, operation in operations.items():
        if not label.split()[1].startswith(("/v1/", "/metrics")):
            continue  # health checks: no auth, no input
        for status in ("401", "403", "404", "413", "422", "503"):
            answer = operation["responses"].get(status)
            assert answer, f"{label} does not document {status}"
            assert answer["content"]["application/json"]["schema"] == error_body, (label, status)
    download = operations["GET /v1/jobs/{job_id}/artifacts/{name}"]
    assert "416" in download["responses"]
    for label in ("POST /v1/jobs", "PATCH /v1/jobs/{job_id}"):
        assert "400" in operations[label]["responses"], label
