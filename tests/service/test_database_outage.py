"""While PostgreSQL is down every database route answers 503 with the JSON error body and a
Retry-After, and the API recovers on its own when the database is back.

The database is a cluster of this test's own (`pg_cluster.py`): the shared one on 5432 is
never stopped. The routes are read from the API's own OpenAPI document, so a new route is
covered without editing this test.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.schemas.errors import ErrorBody
from tests.service import procs
from tests.service.pg_cluster import PgCluster

pytestmark = [pytest.mark.service, pytest.mark.slow]

NO_DATABASE = {"/healthz", "/readyz", "/openapi.json", "/docs", "/redoc"}
JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}
STUDY = {
    "name": "outage",
    "dataset": {"name": "digits", "train_subset": 400},
    "budget": {"steps": 4},
    "seeds": [0],
    "arms": [{"label": "train", "spec": {"method": "train"}}],
}
CACHED_TOKEN_SECONDS = 5.0  # api.auth.TOKEN_CACHE_SECONDS: later requests re-authenticate


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    cluster = PgCluster()
    try:
        cluster.start()
        upgrade(cluster.url)
        yield cluster
    finally:
        cluster.remove()


def _admin_token(database_url: str) -> str:
    engine = make_engine(database_url)
    with transaction(make_session_factory(engine)) as session:
        team = account_repo.create_team(session, "ops", None)
        account_repo.create_user(session, team, "root", True, None)
        token = issue_token(session, "root", "admin", 1)
    engine.dispose()
    return token


def _mark_running(database_url: str, job_id: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET status = 'running' WHERE id = %s", (job_id,))


@pytest.fixture(scope="module")
def outage_api(
    cluster: PgCluster, service_env: dict[str, str], log_dir: Path
) -> Iterator[tuple[str, dict[str, str]]]:
    env = {
        **service_env,
        "ARCHSEARCH_DATABASE_URL": cluster.url,
        # Its own queue: a job of this database must never reach the shared workers.
        "ARCHSEARCH_QUEUE_NAME": f"archsearch-outage-{uuid.uuid4().hex[:8]}",
    }
    headers = {"Authorization": f"Bearer {_admin_token(cluster.url)}"}
    port = procs.free_port()
    proc = procs.start("api-outage", ["api", "--port", str(port)], env, log_dir)
    url = f"http://127.0.0.1:{port}"
    procs.wait_http(f"{url}/healthz", proc)
    yield url, headers
    proc.stop()


def _requests(client: httpx.Client, job_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, httpx arguments) for every operation the API documents."""
    schema = client.get("/openapi.json").json()
    requests = []
    for template, operations in schema["paths"].items():
        if template in NO_DATABASE:
            continue
        path = template.format(
            job_id=job_id,
            dataset_id="ds-0123456789abcdef",
            name="model.pt",
            study_id=str(uuid.uuid4()),
            version=1,
            alias="production",
            by="versions",
            ref="1",
            file="model.safetensors",
            webhook_id=str(uuid.uuid4()),
        )
        for method in operations:
            requests.append((method.upper(), path, _arguments(method.upper(), template, job_id)))
    return requests


def _arguments(method: str, template: str, job_id: str) -> dict[str, Any]:
    """A body each operation accepts, so it reaches its database queries."""
    bodies: dict[tuple[str, str], Any] = {
        ("POST", "/v1/models/{name}/versions"): {"job_id": job_id},
        ("PUT", "/v1/models/{name}/aliases/{alias}"): {"version": 1},
        ("PATCH", "/v1/models/{name}/versions/{version}"): {"archived": True},
        ("POST", "/v1/webhooks"): {"url": "http://127.0.0.1:9/", "events": ["job.failed"]},
    }
    if (method, template) in bodies:
        return {"json": bodies[(method, template)]}
    if (method, template) == ("POST", "/v1/jobs"):
        return {"json": JOB}
    if (method, template) == ("POST", "/v1/datasets"):
        return {"files": {"file": ("tiny.csv", b"a,label\n1,0\n2,1\n", "text/csv")}}
    if (method, template) == ("POST", "/v1/studies"):
        return {"json": STUDY}
    if (method, template) == ("PUT", "/v1/jobs/{job_id}/tags"):
        return {"json": {"tags": ["outage"]}}
    if method == "PATCH":
        return {"json": {"priority": "high"}}
    return {}


def _assert_unavailable(response: httpx.Response, what: str) -> None:
    assert response.status_code == 503, (what, response.status_code, response.text)
    assert response.headers["content-type"] == "application/json", what
    assert int(response.headers["retry-after"]) > 0, what
    if response.request.method == "HEAD":
        return  # the headers of the GET, without its body
    body = ErrorBody.model_validate(response.json())
    assert body.error == "database_unavailable", (what, body)
    assert "127.0.0.1" not in response.text and "postgres" not in response.text, what


def test_database_down_is_503_with_retry_after_and_recovers(
    cluster: PgCluster, outage_api: tuple[str, dict[str, str]]
) -> None:
    url, headers = outage_api
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        job_id = client.post("/v1/jobs", json=JOB).json()["id"]
        requests = _requests(client, job_id)
        assert len(requests) >= 15, requests  # every /v1 operation and /metrics
        # A running job's answer is kept in the API's memory (api/live/answers.py): the
        # outage must turn that off, so its GET below answers 503 too, never the old body.
        _mark_running(cluster.url, job_id)
        for _ in range(2):
            assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "running"

        cluster.stop()
        try:
            # The token is still cached: each request reaches its handler's queries.
            for method, path, arguments in requests:
                _assert_unavailable(client.request(method, path, **arguments), f"{method} {path}")
            time.sleep(CACHED_TOKEN_SECONDS + 0.5)
            # Now authentication itself needs the database.
            for method, path, arguments in requests:
                _assert_unavailable(client.request(method, path, **arguments), f"{method} {path}")
            assert client.get("/readyz").status_code == 503
            assert client.get("/healthz").status_code == 200
        finally:
            cluster.start()

        # Back on its own: no restart of the API, the first requests after the outage work.
        assert client.get("/readyz").status_code == 200
        for method, path, arguments in requests:
            # Streamed: an event stream answers 200 and stays open; its status is what counts.
            with client.stream(method, path, **arguments) as response:
                assert response.status_code < 500, (method, path, response.status_code)
        assert client.get(f"/v1/jobs/{job_id}").json()["id"] == job_id
