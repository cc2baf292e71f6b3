"""A method a path does not accept answers 405 with the JSON error body and an `Allow` that
lists exactly the methods the path does accept, for every path of the OpenAPI document
(read from the API itself, so a new route is covered without editing this test), including
the paths that several routes serve, one per method; the router alone names only the first
of them."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import httpx
import pytest

pytestmark = pytest.mark.service

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
EXAMPLES = {
    "job_id": str(uuid.uuid4()),
    "dataset_id": "ds-0123456789abcdef",
    "name": "model.safetensors",
    "study_id": str(uuid.uuid4()),
    "version": "1",
    "alias": "production",
    "by": "versions",
    "ref": "1",
    "file": "model.safetensors",
    "webhook_id": str(uuid.uuid4()),
}


def _paths(api_url: str) -> dict[str, set[str]]:
    """Each documented path (with example values) and the methods documented for it."""
    schema = httpx.get(f"{api_url}/openapi.json").json()
    return {
        template.format(**EXAMPLES): {method.upper() for method in operations}
        for template, operations in schema["paths"].items()
    }


@dataclass
class Answer:
    status: int
    allow: set[str]
    error: str | None  # the JSON body's error code, read from 405 answers alone


def _ask(client: httpx.Client, method: str, path: str) -> Answer:
    # Streamed: a GET of an event stream would never end; only a 405's body is read.
    with client.stream(method, path) as answer:
        allow = {m.strip() for m in answer.headers.get("allow", "").split(",") if m.strip()}
        error = None
        if answer.status_code == 405 and method != "HEAD":
            error = json.loads(answer.read())["error"]
        return Answer(answer.status_code, allow, error)


def test_every_path_names_its_methods_on_405(api_url: str, auth_headers: dict[str, str]) -> None:
    """A method is accepted when the path answers it with anything but 405 (ids here are
    random, so nothing is changed): each 405's Allow must be exactly those. A path may be
    served by routes the document lists under another template (`/v1/jobs/stream` is also
    `/v1/jobs/{job_id}`) or not at all (a HEAD beside a GET), which the probe counts too."""
    wrong: list[str] = []
    with httpx.Client(base_url=api_url, headers=auth_headers, timeout=10) as client:
        for path, documented in _paths(api_url).items():
            answers = {method: _ask(client, method, path) for method in METHODS}
            accepted = {m for m, answer in answers.items() if answer.status != 405}
            assert documented <= accepted, (path, documented, accepted)
            for method, answer in answers.items():
                if answer.status == 405 and answer.allow != accepted:
                    wrong.append(f"{method} {path}: Allow {sorted(answer.allow)}, not {accepted}")
                if answer.status == 405 and method != "HEAD":
                    assert answer.error == "method_not_allowed", (method, path)
    assert not wrong, "\n".join(wrong)
