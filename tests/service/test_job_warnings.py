"""A run's warnings on the job, and timestamps with their zone (embedded: SQLite, local
runner, API in-process).

No method warns on demand yet, so the warning case builds the engine's `Result` itself and
hands it to the executor's `record_outcome` for a job claimed through the real scheduler;
the plain case runs a real train job end to end.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from archsearch.api.app import create_app
from archsearch.core.context import Result, RunWarning
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.jobs.scheduler import claim_next
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.executor import Outcome, record_outcome
from archsearch.jobs.runtime.runner import LocalRunner
from archsearch.schemas.jobs import EventsPublic, JobPublic, JobsPublic
from tests.conftest import TEST_DATASETS

COLLAPSED = RunWarning(
    "collapsed_predictions",
    "the model predicts class 3 for every test input; lower training.optimizer.lr",
)


@pytest.fixture()
def embedded(tmp_path: Path) -> Iterator[tuple[TestClient, LocalRunner, Services]]:
    settings = Settings(
        home=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'archsearch.db'}",
        broker_url=None,
        artifact_root=tmp_path / "artifacts",
        data_dir=TEST_DATASETS,
    )
    upgrade(settings.resolved_database_url)
    services = Services.from_settings(settings)
    runner = LocalRunner(services)  # started by the test that wants jobs to run
    with TestClient(create_app(services, runner)) as client:
        yield client, runner, services
    if runner.ping():
        runner.stop()
    services.engine.dispose()


def submit(client: TestClient, **spec: Any) -> dict[str, Any]:
    answer = client.post(
        "/v1/jobs", json={"method": "train", "dataset": {"name": "digits"}, **spec}
    )
    assert answer.status_code == 201, answer.text
    return answer.json()  # type: ignore[no-any-return]


def wait_finished(client: TestClient, job_id: str, timeout: float = 120) -> JobPublic:
    deadline = time.monotonic() + timeout
    while (job := JobPublic.model_validate(client.get(f"/v1/jobs/{job_id}").json())).status in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, f"job {job_id} still {job.status}"
        time.sleep(0.2)
    return job


def test_a_run_with_a_warning_succeeds_and_shows_it(
    embedded: tuple[TestClient, LocalRunner, Services],
) -> None:
    client, _, services = embedded
    job_id = uuid.UUID(submit(client)["id"])
    with transaction(services.sessions) as session:
        assert claim_next(session, "test-worker", Offer("any"), services.settings) == job_id

    result = Result(metrics={"test_accuracy": 0.1}, warnings=[COLLAPSED])
    record_outcome(services, job_id, Outcome.succeeded(result), "test-worker")

    job = JobPublic.model_validate(client.get(f"/v1/jobs/{job_id}").json())
    assert job.status == "succeeded" and job.error is None
    assert [(w.code, w.message) for w in job.warnings] == [(COLLAPSED.code, COLLAPSED.message)]
    listed = JobsPublic.model_validate(client.get("/v1/jobs").json()).data
    assert [w.code for w in listed[0].warnings] == ["collapsed_predictions"]
    events = EventsPublic.model_validate(client.get(f"/v1/jobs/{job_id}/events").json()).data
    assert [(e.to_status, e.reason) for e in events[-2:]] == [
        ("succeeded", "finished with 1 warning"),
        ("succeeded", COLLAPSED.message),
    ]
    with services.sessions() as session:
        stored = repository.get_job(session, job_id).warnings
    assert stored == [{"code": COLLAPSED.code, "message": COLLAPSED.message}]


def test_a_plain_run_has_no_warnings_and_zoned_timestamps(
    embedded: tuple[TestClient, LocalRunner, Services],
) -> None:
    client, runner, _ = embedded
    runner.start()
    job_id = submit(client, training={"epochs": 1})["id"]
    job = wait_finished(client, job_id)
    assert (job.status, job.warnings) == ("succeeded", []), job.error

    raw = client.get(f"/v1/jobs/{job_id}").json()
    events = client.get(f"/v1/jobs/{job_id}/events").json()["data"]
    artifacts = client.get(f"/v1/jobs/{job_id}/artifacts").json()["data"]
    stamps = [raw["created_at"], raw["started_at"], raw["finished_at"], raw["updated_at"]]
    stamps += [e["at"] for e in events] + [a["created_at"] for a in artifacts]
    # SQLite hands back naive datetimes; every one on the wire carries UTC.
    assert all(datetime.fromisoformat(s).utcoffset() is not None for s in stamps), stamps
    assert events[-1]["reason"] == "finished"
