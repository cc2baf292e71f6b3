"""`GET /v1/jobs` as a runs table on PostgreSQL: every sort pages through each job exactly
once in the right order (keyset on (sort key, id), ties and missing keys included), study
jobs can be left out, owners carry their user names, and studies take id prefixes."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ApiError, ArchsearchClient
from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.jobs.repository import Placement
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.jobs import JobStatus

SPEC = {"method": "train", "dataset": {"name": "digits"}}
# (test accuracy, parameters, duration seconds): repeats and gaps test ties and missing keys.
RUNS: list[tuple[float | None, float | None, float | None]] = [
    (0.91, 1200.0, 30.0),
    (0.85, 800.0, 12.5),
    (0.91, 5000.0, 30.0),
    (None, None, None),  # cancelled before it ran: no key at all
    (0.42, 800.0, 3.25),
    (0.97, None, 61.0),
    (0.60, 2500.0, None),  # running: no duration yet
]


def _team_with_jobs(sessions: sessionmaker[Session]) -> tuple[str, list[str], str]:
    """A fresh team (its own user and token) with RUNS as jobs and one study's job."""
    suffix = uuid.uuid4().hex[:8]
    with transaction(sessions) as session:
        team = account_repo.create_team(session, f"runs-{suffix}", None)
        user = account_repo.create_user(session, team, f"runner-{suffix}", False, None)
        token = issue_token(session, user.name, "submit", 1)
        placement = Placement(owner_id=user.id, team_id=team.id)
        ids = [_job(session, placement, run) for run in RUNS]
        study = Study(
            name="s",
            team_id=team.id,
            dataset={},
            base_spec={},
            seeds=[0],
            config={},
            status="running",
        )
        session.add(study)
        session.flush()
        in_study = repository.create_job(session, "train", SPEC, None, placement)
        in_study.study_id, in_study.study_arm = study.id, "arm-a"
        in_study.status = JobStatus.cancelled
    return token, ids, str(in_study.id)


def _job(session: Session, placement: Placement, run: tuple[float | None, ...]) -> str:
    accuracy, parameters, seconds = run
    job: Job = repository.create_job(session, "train", SPEC, None, placement)
    metrics = {"test_accuracy": accuracy, "parameters": parameters}
    job.latest_metrics = {k: v for k, v in metrics.items() if v is not None}
    job.status = JobStatus.cancelled  # never run by a worker another test may start
    if accuracy is not None:
        job.status = JobStatus.succeeded if seconds is not None else JobStatus.running
        job.started_at = utcnow() - timedelta(seconds=100)
        if seconds is not None:
            job.finished_at = job.started_at + timedelta(seconds=seconds)
    return str(job.id)


def _walk(client: httpx.Client, sort: str, limit: int) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    params: dict[str, Any] = {"sort": sort, "limit": limit, "study_jobs": "false"}
    while True:
        answer = client.get("/v1/jobs", params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        seen += page["data"]
        if not page["next_cursor"]:
            return seen
        params["cursor"] = page["next_cursor"]


def _key(job: dict[str, Any], sort: str) -> float | str | None:
    name = sort.lstrip("-")
    if name == "duration":
        if not job["finished_at"]:
            return None
        start, end = (job[k] for k in ("started_at", "finished_at"))
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    if name == "created_at":
        return str(job["created_at"])
    value = job["latest_metrics"].get(name)
    return None if value is None else float(value)


@pytest.fixture(scope="module")
def team(sessions: sessionmaker[Session]) -> tuple[str, list[str], str]:
    return _team_with_jobs(sessions)


@pytest.mark.parametrize(
    "sort",
    ["-test_accuracy", "test_accuracy", "-parameters", "parameters", "-duration", "duration"],
)
@pytest.mark.parametrize("limit", [1, 2, 3])
def test_each_sort_pages_through_every_job_once_in_order(
    api_url: str, team: tuple[str, list[str], str], sort: str, limit: int
) -> None:
    token, ids, _ = team
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {token}"}) as client:
        seen = _walk(client, sort, limit)
    assert sorted(job["id"] for job in seen) == sorted(ids)  # each once, study job left out
    keys = [_key(job, sort) for job in seen]
    present = [k for k in keys if k is not None]
    assert keys == present + [None] * (len(keys) - len(present)), "missing keys sort last"
    assert present == sorted(present, reverse=sort.startswith("-"))  # type: ignore[type-var]
    # Ties are broken by id in the sort's direction, so a page boundary never drops one.
    for first, second in zip(seen, seen[1:], strict=False):
        if _key(first, sort) == _key(second, sort):
            assert (first["id"] > second["id"]) == sort.startswith("-")


def test_study_jobs_filter_owner_names_and_bad_sort(
    api_url: str, team: tuple[str, list[str], str]
) -> None:
    token, ids, in_study = team
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {token}"}) as client:
        every = client.get("/v1/jobs", params={"limit": 50}).json()["data"]
        assert {job["id"] for job in every} == {*ids, in_study}
        assert {job["owner_name"] for job in every} == {every[0]["owner_name"]}
        assert every[0]["owner_name"].startswith("runner-")
        study_only = [j for j in every if j["study_id"]]
        assert [j["study_arm"] for j in study_only] == ["arm-a"]
        bad = client.get("/v1/jobs", params={"sort": "-accuracy"})
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["field"] == "query.sort"
        cursor = client.get("/v1/jobs", params={"sort": "-parameters", "limit": 1}).json()
        mixed = client.get("/v1/jobs", params={"sort": "duration", "cursor": cursor["next_cursor"]})
        assert mixed.status_code == 422
        assert mixed.json()["error"] == "invalid_cursor"


def test_studies_take_a_unique_id_prefix(
    api_url: str, team: tuple[str, list[str], str], sessions: sessionmaker[Session]
) -> None:
    token, _, in_study = team
    with transaction(sessions) as session:
        study_id = session.get(Job, uuid.UUID(in_study)).study_id  # type: ignore[union-attr]
    with ArchsearchClient(api_url, token=token) as client:
        for prefix in (str(study_id)[:8], str(study_id)[:4].upper()):
            assert client.resolve_study_id(prefix) == study_id
        with pytest.raises(ApiError) as caught:
            client.resolve_study_id("ffffffff0" if not str(study_id).startswith("f") else "0000000")
        assert caught.value.status == 404
        assert client.get_study(str(study_id)[:8]).id == study_id
        page = client.list_jobs(study=client.resolve_study_id(str(study_id)[:6]))
        assert [str(job.id) for job in page.data] == [in_study]
