"""The model registry over HTTP: promotion to immutable versions with lineage, aliases with
their history, downloads by version and alias (size, sha256, ranges), team isolation, and
the promoted job's files kept while a version refers to them. Jobs and their artifacts are
recorded straight into the database and the store, as a worker records them."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import httpx
import pytest
import sqlalchemy.exc
from click.testing import CliRunner
from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from archsearch.cli.main import main
from archsearch.client import ApiError, ArchsearchClient
from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.jobs.states import transition
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.objects.local import LocalObjectStore
from archsearch.jobs.platform.store import ArtifactStore
from archsearch.schemas.jobs import JobStatus
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service

CARD = "# model card\nTrained on digits.\n"


def record_job(
    sessions: sessionmaker[Session],
    env: dict[str, str],
    team: str,
    status: JobStatus = JobStatus.succeeded,
    spec: dict[str, object] | None = None,
) -> tuple[uuid.UUID, bytes]:
    """A job of `team` (a train job on digits unless `spec` says) with a weights file and a
    model card, ended as `status`."""
    store = ArtifactStore(LocalObjectStore(Path(env["ARCHSEARCH_ARTIFACT_ROOT"])))
    weights = os.urandom(50_000)
    with transaction(sessions) as session:
        team_id = account_repo.team_by_name(session, team).id
        spec = spec or {"method": "train", "dataset": {"name": "digits"}}
        placement = jobs.Placement(actor="alice", team_id=team_id)
        job = jobs.create_job(session, str(spec["method"]), spec, None, placement)
        transition(job, JobStatus.running, "started", "w")
        for name, data, media in (
            ("model.safetensors", weights, "application/octet-stream"),
            ("model-card.md", CARD.encode(), "text/markdown"),
        ):
            jobs.upsert_artifact(
                session, job.id, name, media, store.write_artifact(job.id, name, data)
            )
        job.latest_metrics = {"test_accuracy": 0.93}
        if status is not JobStatus.running:
            transition(job, status, "done", "w")
        return job.id, weights


@pytest.fixture()
def alice(api_url: str, accounts: Accounts) -> ArchsearchClient:
    return ArchsearchClient(api_url, token=accounts.tokens["alice"])


def test_promotion_makes_numbered_versions_with_lineage(
    alice: ArchsearchClient, sessions: sessionmaker[Session], service_env: dict[str, str]
) -> None:
    name = f"digits-{uuid.uuid4().hex[:6]}"
    first, _ = record_job(sessions, service_env, "alpha")
    second, _ = record_job(sessions, service_env, "alpha")
    one = alice.promote(name, first, "first cut")
    two = alice.promote(name, second)
    assert (one.version, two.version) == (1, 2)
    assert one.lineage.job_id == first and one.lineage.method == "train"
    assert one.lineage.dataset == {"name": "digits"}
    assert one.lineage.metrics == {"test_accuracy": 0.93}
    assert one.lineage.model_card == CARD
    assert one.lineage.archsearch_version
    assert {f.name for f in one.files} == {"model.safetensors", "model-card.md"}
    detail = alice.get_model(name)
    assert detail.latest_version == 2 and [v.version for v in detail.versions] == [2, 1]
    assert name in [m.name for m in alice.list_models()]
    assert alice.model_version(name, 1).description == "first cut"


def test_only_a_succeeded_job_of_the_team_can_be_promoted(
    alice: ArchsearchClient, sessions: sessionmaker[Session], service_env: dict[str, str]
) -> None:
    running, _ = record_job(sessions, service_env, "alpha", JobStatus.running)
    foreign, _ = record_job(sessions, service_env, "beta")
    with pytest.raises(ApiError) as refused:
        alice.promote("m", running)
    assert refused.value.status == 409
    with pytest.raises(ApiError) as hidden:
        alice.promote("m", foreign)
    assert hidden.value.status == 404
    with pytest.raises(ApiError) as bad:
        alice.promote("no spaces", foreign)
    assert bad.value.status == 422 and "name" in str(bad.value)


def test_aliases_move_with_history_and_serve_downloads(
    api_url: str,
    alice: ArchsearchClient,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
) -> None:
    name = f"prod-{uuid.uuid4().hex[:6]}"
    first, weights_1 = record_job(sessions, service_env, "alpha")
    second, weights_2 = record_job(sessions, service_env, "alpha")
    alice.promote(name, first)
    alice.promote(name, second)
    alice.set_alias(name, "production", 1)
    alice.set_alias(name, "production", 2)
    bob = ArchsearchClient(api_url, token=accounts.tokens["bob"])
    detail = bob.remove_alias(name, "production")
    history = [(e.alias, e.from_version, e.to_version, e.actor) for e in detail.alias_history]
    assert history == [
        ("production", None, 1, "alice"),
        ("production", 1, 2, "alice"),
        ("production", 2, None, "bob"),
    ]
    alice.set_alias(name, "candidate", 1)
    headers = {"Authorization": f"Bearer {accounts.tokens['alice']}"}
    url = f"{api_url}/v1/models/{name}/aliases/candidate/artifacts/model.safetensors"
    whole = httpx.get(url, headers=headers)
    assert whole.status_code == 200 and whole.content == weights_1
    assert whole.headers["content-length"] == str(len(weights_1))
    assert whole.headers["x-content-sha256"] == hashlib.sha256(weights_1).hexdigest()
    part = httpx.get(url, headers={**headers, "Range": "bytes=10-19"})
    assert part.status_code == 206 and part.content == weights_1[10:20]
    by_number = f"{api_url}/v1/models/{name}/versions/2/artifacts/model.safetensors"
    assert httpx.get(by_number, headers=headers).content == weights_2
    assert httpx.head(by_number, headers=headers).headers["content-length"] == str(len(weights_2))


def test_another_team_sees_no_model(
    api_url: str,
    alice: ArchsearchClient,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
) -> None:
    name = f"secret-{uuid.uuid4().hex[:6]}"
    alice.promote(name, record_job(sessions, service_env, "alpha")[0])
    alice.set_alias(name, "production", 1)
    carol = {"Authorization": f"Bearer {accounts.tokens['carol']}"}
    for path in (
        f"/v1/models/{name}",
        f"/v1/models/{name}/versions/1",
        f"/v1/models/{name}/aliases/production",
        f"/v1/models/{name}/versions/1/artifacts/model.safetensors",
        f"/v1/models/{name}/aliases/production/artifacts/model.safetensors",
    ):
        answer = httpx.get(api_url + path, headers=carol)
        assert answer.status_code == 404, path
        assert answer.json()["error"] == "not_found"
    moved = httpx.put(f"{api_url}/v1/models/{name}/aliases/x", json={"version": 1}, headers=carol)
    assert moved.status_code == 404
    assert name not in [
        m["name"] for m in httpx.get(f"{api_url}/v1/models", headers=carol).json()["data"]
    ]


def test_a_promoted_job_keeps_its_files(
    alice: ArchsearchClient,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
    tmp_path: Path,
) -> None:
    name = f"kept-{uuid.uuid4().hex[:6]}"
    job_id, weights = record_job(sessions, service_env, "alpha")
    alice.promote(name, job_id)
    with pytest.raises(sqlalchemy.exc.IntegrityError), transaction(sessions) as session:
        session.execute(delete(Job).where(Job.id == job_id))
    paths = alice.download_model(name, None, tmp_path)
    assert (tmp_path / "model.safetensors").read_bytes() == weights
    assert len(paths) == 2


def test_the_models_commands(
    api_url: str,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
    tmp_path: Path,
) -> None:
    runner = CliRunner(
        env={"ARCHSEARCH_TOKEN": accounts.tokens["alice"], "ARCHSEARCH_URL": api_url}
    )
    name = f"cli-{uuid.uuid4().hex[:6]}"
    job_id, weights = record_job(sessions, service_env, "alpha")
    promoted = runner.invoke(main, ["models", "promote", name, str(job_id)[:12]])
    assert promoted.exit_code == 0, promoted.output
    assert promoted.output.strip() == f"{name}@1"
    aliased = runner.invoke(main, ["models", "alias", name, "production", "1"])
    assert aliased.exit_code == 0, aliased.output
    listing = runner.invoke(main, ["models", "list"]).output
    assert name in listing and "production->1" in listing
    shown = runner.invoke(main, ["models", "show", name]).output
    assert str(job_id)[:8] in shown and "production: - -> 1 by alice" in shown
    out = tmp_path / "got"
    got = runner.invoke(main, ["models", "download", f"{name}@production", "--out", str(out)])
    assert got.exit_code == 0, got.output
    assert (out / "model.safetensors").read_bytes() == weights
    missing = runner.invoke(main, ["models", "download", f"{name}@staging"])
    assert missing.exit_code == 1 and "no alias 'staging'" in missing.output


def test_a_file_by_version_needs_a_version_number(
    api_url: str, auth_headers: dict[str, str]
) -> None:
    for path, field in (("versions/0", "path.ref"), ("numbers/2", "path.by")):
        url = f"{api_url}/v1/models/any/{path}/artifacts/model.safetensors"
        answer = httpx.get(url, headers=auth_headers)
        assert answer.status_code == 422, answer.text
        assert [problem["field"] for problem in answer.json()["detail"]] == [field]
