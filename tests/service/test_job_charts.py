"""A job's charts are drawn on their first download, by the API, from the data the worker
kept: listed before (no size, no digest), then the very PNG the job's figure code draws, its
row filled in; HEAD draws too; a promotion to the registry draws what is still waiting."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ArchsearchClient
from archsearch.core import charts
from archsearch.core.charts.pruning import spectrum_png
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.tables import Artifact
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.objects.local import LocalObjectStore
from archsearch.jobs.platform.store import ArtifactStore
from tests.service.test_models import record_job

pytestmark = pytest.mark.service

DIGITS_JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 2}}


def finished_job(client: ArchsearchClient) -> uuid.UUID:
    job = client.submit(DIGITS_JOB)
    final = client.wait(job.id, timeout=120)
    assert final.status == "succeeded", final.error
    return job.id


def curves_row(sessions: sessionmaker[Session], job_id: uuid.UUID) -> Artifact:
    with sessions() as session:
        row = session.get(Artifact, (job_id, "curves.png"))
        assert row is not None
        session.expunge(row)
        return row


def test_a_chart_is_drawn_on_its_first_download(
    client: ArchsearchClient, sessions: sessionmaker[Session], api_url: str, token: str
) -> None:
    job_id = finished_job(client)
    waiting = curves_row(sessions, job_id)
    assert waiting.sha256 is None and waiting.size is None and waiting.chart is not None
    assert waiting.chart["kind"] == "curves" and len(waiting.chart["history"]) == 2
    listed = {a.name: a for a in client.artifacts(job_id)}
    assert listed["curves.png"].size is None and listed["curves.png"].sha256 is None
    assert listed["model.safetensors"].size  # files the worker wrote are listed as before

    url = f"{api_url}/v1/jobs/{job_id}/artifacts/curves.png"
    auth = {"Authorization": f"Bearer {token}"}
    head = httpx.head(url, headers=auth)
    assert head.status_code == 200, head.text
    got = httpx.get(url, headers=auth)
    assert got.status_code == 200 and got.headers["content-type"] == "image/png"
    expected = charts.draw(waiting.chart, lambda name: b"")
    assert got.content == expected  # the PNG the job's own figure code draws
    digest = hashlib.sha256(got.content).hexdigest()
    assert got.headers["x-content-sha256"] == digest
    assert head.headers["x-content-sha256"] == digest
    assert int(head.headers["content-length"]) == len(expected)

    drawn = curves_row(sessions, job_id)
    assert (drawn.size, drawn.sha256, drawn.chart) == (len(expected), digest, None)
    again = {a.name: a for a in client.artifacts(job_id)}["curves.png"]
    assert (again.size, again.sha256) == (len(expected), digest)


def test_a_promotion_draws_the_charts_still_waiting(
    client: ArchsearchClient, sessions: sessionmaker[Session]
) -> None:
    job_id = finished_job(client)
    assert curves_row(sessions, job_id).sha256 is None
    version = client.promote(f"charts-{job_id.hex[:8]}", job_id)
    files = {f.name: f for f in version.files}
    drawn = curves_row(sessions, job_id)
    assert drawn.sha256 is not None and files["curves.png"].sha256 == drawn.sha256
    assert files["curves.png"].size == drawn.size


def test_a_chart_drawn_from_a_file_of_its_job_and_one_whose_file_is_gone(
    client: ArchsearchClient,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
    api_url: str,
    token: str,
) -> None:
    """spectrum.png is drawn from the job's spectrum.json; without that file the download
    answers a 404 naming it (a JSON error), never a 500, and the row keeps waiting."""
    store = ArtifactStore(LocalObjectStore(Path(service_env["ARCHSEARCH_ARTIFACT_ROOT"])))
    spectra = {"mask": [0.0, 0.5, 1.0, 1.5], "weighted": [0.0, 0.4, 1.1, 1.9]}
    with_data, _ = record_job(sessions, service_env, "alpha")
    without_data, _ = record_job(sessions, service_env, "alpha")
    with transaction(sessions) as session:
        stored = store.write_artifact(with_data, "spectrum.json", json.dumps(spectra).encode())
        jobs.upsert_artifact(session, with_data, "spectrum.json", "application/json", stored)
        for job_id in (with_data, without_data):
            jobs.add_chart(session, job_id, "spectrum.png", charts.spectrum("spectrum.json"))
    auth = {"Authorization": f"Bearer {token}"}
    base = f"{api_url}/v1/jobs/{{}}/artifacts/spectrum.png"
    drawn = httpx.get(base.format(with_data), headers=auth)
    assert drawn.status_code == 200 and drawn.content == spectrum_png(spectra)
    gone = httpx.get(base.format(without_data), headers=auth)
    assert gone.status_code == 404 and gone.headers["content-type"] == "application/json"
    assert "'spectrum.json', is missing" in gone.json()["detail"]
    with sessions() as session:
        waiting = session.get(Artifact, (without_data, "spectrum.png"))
        assert waiting is not None and waiting.sha256 is None
