"""The registry's actions beyond promote and alias: archive and restore a version (refused
while an alias points at it; an archived version takes no alias and keeps its files), the
lineage a version shows (key metrics first, its study, the jobs it built on and their
versions), and `archsearch models show` read in an 80-column terminal."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ApiError, ArchsearchClient
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.studies import StudyStatus
from tests.service.conftest import Accounts
from tests.service.test_models import record_job

pytestmark = pytest.mark.service


@pytest.fixture()
def alice(api_url: str, accounts: Accounts) -> ArchsearchClient:
    return ArchsearchClient(api_url, token=accounts.tokens["alice"])


def test_a_version_is_archived_only_when_no_alias_points_at_it(
    api_url: str,
    alice: ArchsearchClient,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
) -> None:
    name = f"arch-{uuid.uuid4().hex[:6]}"
    job_id, weights = record_job(sessions, service_env, "alpha")
    alice.promote(name, job_id)
    alice.set_alias(name, "production", 1)
    with pytest.raises(ApiError) as aliased:
        alice.archive_version(name, 1)
    assert aliased.value.status == 409 and "production" in str(aliased.value)
    alice.remove_alias(name, "production")
    archived = alice.archive_version(name, 1)
    assert archived.archived_at is not None and archived.archived_by == "alice"
    with pytest.raises(ApiError) as refused:
        alice.set_alias(name, "candidate", 1)
    assert refused.value.status == 409 and "archived" in str(refused.value)
    headers = {"Authorization": f"Bearer {accounts.tokens['alice']}"}
    url = f"{api_url}/v1/models/{name}/versions/1/artifacts/model.safetensors"
    assert httpx.get(url, headers=headers).content == weights  # nothing was deleted
    bad = httpx.patch(f"{api_url}/v1/models/{name}/versions/1", json={}, headers=headers)
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "archived"
    carol = {"Authorization": f"Bearer {accounts.tokens['carol']}"}
    hidden = {"archived": False}
    patch = f"{api_url}/v1/models/{name}/versions/1"
    assert httpx.patch(patch, json=hidden, headers=carol).status_code == 404
    restored = alice.archive_version(name, 1, archived=False)
    assert restored.archived_at is None and restored.archived_by is None
    assert alice.set_alias(name, "candidate", 1).aliases[0].alias == "candidate"


def test_a_version_shows_its_key_metrics_and_the_versions_it_built_on(
    alice: ArchsearchClient, sessions: sessionmaker[Session], service_env: dict[str, str]
) -> None:
    base, child = f"base-{uuid.uuid4().hex[:6]}", f"child-{uuid.uuid4().hex[:6]}"
    pruned, _ = record_job(sessions, service_env, "alpha")
    alice.promote(base, pruned)
    spec = {"method": "transfer", "dataset": {"name": "digits"}, "source_job": str(pruned)}
    transfer, _ = record_job(sessions, service_env, "alpha", JobStatus.succeeded, spec)
    version = alice.promote(child, transfer)
    assert version.key_metrics == ["test_accuracy"]
    (parent,) = version.parents
    assert (parent.field, parent.job_id, parent.model, parent.version) == (
        "source_job",
        pruned,
        base,
        1,
    )
    assert alice.model_version(base, 1).parents == []
    assert version.study_id is None
    with transaction(sessions) as session:  # the transfer was one job of a (finished) study
        study = Study(
            name="s", dataset={"name": "digits"}, base_spec={}, budget=None, seeds=[0],
            config={}, status=StudyStatus.finished, team_id=session.get(Job, transfer).team_id,
        )  # fmt: skip
        session.add(study)
        session.flush()
        session.get(Job, transfer).study_id = study.id
        study_id = study.id
    assert alice.model_version(child, 1).study_id == study_id


def test_models_show_reads_at_80_columns(
    api_url: str,
    alice: ArchsearchClient,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
) -> None:
    name = f"a-long-model-name-for-the-digits-task-{uuid.uuid4().hex[:6]}"
    job_id, _ = record_job(sessions, service_env, "alpha")
    alice.promote(name, job_id, "the first cut, with a description long enough to wrap")
    alice.set_alias(name, "production", 1)
    env = {
        **os.environ,
        "COLUMNS": "80",
        "ARCHSEARCH_URL": api_url,
        "ARCHSEARCH_TOKEN": accounts.tokens["alice"],
    }
    command = [shutil.which("archsearch") or "archsearch", "models", "show", name]
    shown = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, shown.stdout
    # Key metrics first, whole: the accuracy sits on the line after the version's title.
    title = next(i for i, line in enumerate(lines) if line.startswith("version 1 (production)"))
    assert lines[title + 1].split() == ["test", "accuracy", "0.93"], shown.stdout
    assert any(line.split()[:2] == ["job", str(job_id)] for line in lines), shown.stdout
    assert "production: - -> 1 by alice" in shown.stdout
