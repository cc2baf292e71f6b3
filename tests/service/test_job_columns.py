"""`GET /v1/jobs` and `GET /v1/jobs.csv` with columns of any spec field or metric, on SQLite
and on PostgreSQL: a sort on a spec field pages through every job once (numbers by value,
then text, then the jobs without the field), `where` filters compare numbers as numbers,
bad parameters answer 422 naming the parameter, and the CSV is the listing's rows."""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from archsearch.api.app import create_app
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.runner import LocalRunner
from archsearch.schemas.jobs import JobStatus
from tests.conftest import TEST_DATASETS

LR = "spec.training.optimizer.lr"
# (learning rate: a number, a text or absent, test accuracy): ties, text and gaps.
RUNS: list[tuple[Any, float | None]] = [
    (0.1, 0.9),
    (0.01, 0.7),
    ("auto", 0.95),
    (None, None),
    (0.01, 0.8),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[TestClient, Services]]:
    url = (
        f"sqlite:///{tmp_path / 'archsearch.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    settings = Settings(
        home=tmp_path, database_url=url, broker_url=None,
        artifact_root=tmp_path / "artifacts", data_dir=TEST_DATASETS,
    )  # fmt: skip
    upgrade(settings.resolved_database_url)
    services = Services.from_settings(settings)
    runner = LocalRunner(services)  # never started: no job runs
    with TestClient(create_app(services, runner)) as test_client:
        yield test_client, services
    services.engine.dispose()


@pytest.fixture()
def client(backend: tuple[TestClient, Services]) -> TestClient:
    return backend[0]


def _seed(backend: tuple[TestClient, Services]) -> tuple[str, list[str]]:
    """RUNS as finished jobs under a fresh tag (the PostgreSQL database is shared)."""
    tag = f"cols-{uuid.uuid4().hex[:8]}"
    ids = []
    with transaction(backend[1].sessions) as session:
        for lr, accuracy in RUNS:
            spec: dict[str, Any] = {"method": "train", "dataset": {"name": "digits"}}
            if lr is not None:
                spec["training"] = {"optimizer": {"name": "sgd", "lr": lr}}
            job = repository.create_job(session, "train", spec, None, tags=["=cmd", tag])
            job.status = JobStatus.succeeded
            job.latest_metrics = {} if accuracy is None else {"test_accuracy": accuracy}
            ids.append(str(job.id))
    return tag, ids


def _expected(ids: list[str], descending: bool) -> list[str]:
    """Numbers by value (ties by id), then text, then no value: last in both directions."""
    numbers = [(lr, i) for (lr, _), i in zip(RUNS, ids, strict=True) if isinstance(lr, float)]
    ordered = [i for _, i in sorted(numbers, key=lambda p: (p[0], uuid.UUID(p[1])))]
    if descending:
        ordered.reverse()
    text = [i for (lr, _), i in zip(RUNS, ids, strict=True) if isinstance(lr, str)]
    return ordered + text + [i for (lr, _), i in zip(RUNS, ids, strict=True) if lr is None]


def _walk(client: TestClient, params: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    while True:
        answer = client.get("/v1/jobs", params=params)
        assert answer.status_code == 200, answer.text
        seen += [job["id"] for job in answer.json()["data"]]
        if not answer.json()["next_cursor"]:
            return seen
        params = {**params, "cursor": answer.json()["next_cursor"]}


@pytest.mark.parametrize("limit", [1, 2, 50])
def test_a_spec_field_sort_pages_through_every_job_once(
    backend: tuple[TestClient, Services], limit: int
) -> None:
    client = backend[0]
    tag, ids = _seed(backend)
    for descending in (False, True):
        sort = f"-{LR}" if descending else LR
        assert _walk(client, {"tag": tag, "sort": sort, "limit": limit}) == _expected(
            ids, descending
        )


@pytest.mark.parametrize(
    "where, kept",
    [
        ([f"{LR}>=0.01"], [0, 1, 4]),
        ([f"{LR}=auto"], [2]),
        (["metrics.test_accuracy>0.75"], [0, 2, 4]),
        (["metrics.test_accuracy>0.75", f"{LR}<0.5"], [0, 4]),
        (["metrics.test_accuracy<=0.7"], [1]),
    ],
)
def test_where_keeps_the_jobs_whose_field_compares_so(
    backend: tuple[TestClient, Services], where: list[str], kept: list[int]
) -> None:
    client = backend[0]
    tag, ids = _seed(backend)
    found = _walk(client, {"tag": tag, "where": where, "limit": 50})
    assert sorted(found) == sorted(ids[k] for k in kept)


@pytest.mark.parametrize(
    "params, field",
    [
        ({"where": "test_accuracy>0.9"}, "query.where"),
        ({"where": "metrics.test_accuracy"}, "query.where"),
        ({"where": f"{LR}>fast"}, "query.where"),
        ({"where": [f"{LR}>0"] * 11}, "query.where"),
        ({"sort": "spec."}, "query.sort"),
        ({"sort": "-bogus"}, "query.sort"),
    ],
)
def test_a_bad_column_sort_or_filter_is_a_422_naming_it(
    client: TestClient, params: dict[str, Any], field: str
) -> None:
    for path in ("/v1/jobs", "/v1/jobs.csv"):
        answer = client.get(path, params=params)
        assert answer.status_code == 422, answer.text
        assert [e["field"] for e in answer.json()["detail"]] == [field]
    answer = client.get("/v1/jobs.csv", params={"col": "training.lr"})
    assert [e["field"] for e in answer.json()["detail"]] == ["query.col"]


def test_a_cursor_of_a_field_sort_serves_only_that_sort(
    backend: tuple[TestClient, Services],
) -> None:
    client = backend[0]
    tag, _ = _seed(backend)
    page = client.get("/v1/jobs", params={"tag": tag, "sort": LR, "limit": 1}).json()
    other = client.get("/v1/jobs", params={"sort": f"-{LR}", "cursor": page["next_cursor"]})
    assert other.status_code == 422 and other.json()["error"] == "invalid_cursor"


def test_the_csv_is_the_listing_with_its_columns(backend: tuple[TestClient, Services]) -> None:
    client = backend[0]
    tag, ids = _seed(backend)
    params: dict[str, Any] = {"tag": tag, "sort": f"-{LR}", "where": "metrics.test_accuracy>0"}
    listed = _walk(client, {**params, "limit": 2})
    answer = client.get("/v1/jobs.csv", params={**params, "col": [LR, "metrics.test_accuracy"]})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/csv")
    assert "attachment" in answer.headers["content-disposition"]
    header, *rows = list(csv.reader(io.StringIO(answer.text)))
    assert header[0] == "id" and header[-2:] == [LR, "metrics.test_accuracy"]
    assert [row[0] for row in rows] == listed
    by_id = {i: run for i, run in zip(ids, RUNS, strict=True)}
    for row in rows:
        lr, accuracy = by_id[row[0]]
        assert row[-2] == str(lr) and float(row[-1]) == accuracy
        assert row[header.index("tags")].startswith("'=cmd ")  # a formula stays text
    bounded = client.get("/v1/jobs.csv", params={**params, "limit": 2})
    assert len(list(csv.reader(io.StringIO(bounded.text)))) == 3
