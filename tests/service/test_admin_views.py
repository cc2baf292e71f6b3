"""An admin token sees every team's models and webhooks, as it sees every team's jobs; a
team's token sees its own alone. A model name that several teams use is refused to an
admin by name with the teams named (names are unique per team only)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session, sessionmaker

from archsearch.cli.main import main
from tests.service.conftest import Accounts
from tests.service.test_models import record_job
from tests.service.test_webhooks import bearer, subscribe
from tests.service.webhook_receiver import Receiver

pytestmark = pytest.mark.service


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    started = Receiver()
    started.start()
    yield started
    started.stop()


def promote(api: str, headers: dict[str, str], name: str, job_id: uuid.UUID) -> None:
    answer = httpx.post(
        f"{api}/v1/models/{name}/versions", json={"job_id": str(job_id)}, headers=headers
    )
    assert answer.status_code == 201, answer.text


def test_an_admin_sees_every_teams_models(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session], service_env: dict[str, str]
) -> None:
    alice, carol = bearer(accounts, "alice"), bearer(accounts, "carol")
    admin = {"Authorization": f"Bearer {accounts.admin_token}"}
    shared, betas = f"shared-{uuid.uuid4().hex[:6]}", f"beta-only-{uuid.uuid4().hex[:6]}"
    promote(api_url, alice, shared, record_job(sessions, service_env, "alpha")[0])
    promote(api_url, carol, shared, record_job(sessions, service_env, "beta")[0])
    beta_job, weights = record_job(sessions, service_env, "beta")
    promote(api_url, carol, betas, beta_job)

    listed = httpx.get(f"{api_url}/v1/models", headers=admin).json()["data"]
    teams = {m["team_id"] for m in listed if m["name"] == shared}
    assert len(teams) == 2 and None not in teams
    assert betas not in [
        m["name"] for m in httpx.get(f"{api_url}/v1/models", headers=alice).json()["data"]
    ]

    assert httpx.get(f"{api_url}/v1/models/{betas}", headers=alice).status_code == 404
    read = httpx.get(f"{api_url}/v1/models/{betas}", headers=admin)
    assert read.status_code == 200 and read.json()["latest_version"] == 1
    file = httpx.get(
        f"{api_url}/v1/models/{betas}/versions/1/artifacts/model.safetensors", headers=admin
    )
    assert file.status_code == 200 and file.content == weights
    archive = {"archived": True}
    change = httpx.patch(f"{api_url}/v1/models/{betas}/versions/1", json=archive, headers=admin)
    assert change.status_code == 403 and "own team" in change.json()["detail"], change.text

    ambiguous = httpx.get(f"{api_url}/v1/models/{shared}", headers=admin)
    assert ambiguous.status_code == 409, ambiguous.text
    assert all(team in ambiguous.json()["detail"] for team in teams)

    env = {"ARCHSEARCH_URL": api_url, "ARCHSEARCH_TOKEN": accounts.admin_token}
    listing = CliRunner(env=env).invoke(main, ["models", "list"])
    assert listing.exit_code == 0, listing.output
    assert all(team[:8] in listing.output for team in teams)


def test_an_admin_sees_every_teams_webhooks(
    api_url: str, accounts: Accounts, receiver: Receiver
) -> None:
    created = subscribe(api_url, bearer(accounts, "carol"), receiver.url, ["job.failed"])
    admin = {"Authorization": f"Bearer {accounts.admin_token}"}
    listed = httpx.get(f"{api_url}/v1/webhooks", headers=admin).json()["data"]
    (seen,) = [w for w in listed if w["id"] == created["id"]]
    assert seen["team_id"] and "secret" not in seen
    path = f"{api_url}/v1/webhooks/{created['id']}"
    assert httpx.get(path, headers=admin).status_code == 200
    assert httpx.get(f"{path}/deliveries", headers=admin).status_code == 200
    assert httpx.get(path, headers=bearer(accounts, "alice")).status_code == 404
    assert httpx.delete(path, headers=admin).status_code == 204
    assert httpx.get(path, headers=bearer(accounts, "carol")).status_code == 404
