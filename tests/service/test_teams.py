"""Team mode over HTTP: tokens, scopes, team isolation on every route, and actors."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ApiError, ArchsearchClient
from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.accounts.tokens import new_token, token_digest
from archsearch.schemas.jobs import JobPublic
from tests.service import procs
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service

QUICK = {
    "method": "train",
    "dataset": {"name": "digits", "train_subset": 200},
    "training": {"epochs": 1},
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def alice_job(api_url: str, worker: procs.Proc, accounts: Accounts) -> JobPublic:
    with ArchsearchClient(api_url, token=accounts.tokens["alice"]) as alice:
        return alice.wait(alice.submit(QUICK).id, timeout=120)


def job_routes(api_url: str) -> list[tuple[str, str]]:
    """Every route of the OpenAPI schema that names a job, with its method."""
    schema = httpx.get(f"{api_url}/openapi.json").json()
    return [
        (method.upper(), path)
        for path, ops in schema["paths"].items()
        if "{job_id}" in path
        for method in ops
    ]


def test_another_team_cannot_see_or_touch_a_job(
    api_url: str, accounts: Accounts, alice_job: JobPublic
) -> None:
    assert alice_job.status == "succeeded"
    routes = job_routes(api_url)
    assert len(routes) >= 7  # read, cancel, patch, metrics, events, artifacts, artifact
    absent, present = str(uuid.uuid4()), str(alice_job.id)

    def call(method: str, path: str, job_id: str, token: str) -> httpx.Response:
        url = api_url + path.replace("{job_id}", job_id).replace("{name}", "model.safetensors")
        bodies = {"PATCH": {"priority": "high"}, "PUT": {"tags": ["x"]}}  # valid: 404, not 422
        return httpx.request(method, url, headers=bearer(token), json=bodies.get(method))

    for method, path in routes:
        for user in ("carol", "dave"):
            foreign = call(method, path, str(alice_job.id), accounts.tokens[user])
            missing = call(method, path, absent, accounts.tokens[user])
            # Re-prioritising is for admins whatever the job: 403 says nothing of its existence.
            assert foreign.status_code == (403 if method == "PATCH" else 404), (user, method, path)
            # Indistinguishable from a job that does not exist.
            assert foreign.status_code == missing.status_code
            assert foreign.text.replace(present, "ID") == missing.text.replace(absent, "ID")
        same_team = call(method, path, str(alice_job.id), accounts.tokens["bob"])
        assert same_team.status_code not in (401, 404), (method, path)

    with ArchsearchClient(api_url, token=accounts.tokens["carol"]) as carol:
        assert alice_job.id not in [j.id for j in carol.iter_jobs()]
        queue = carol.queue()
        assert all(j.team_id != alice_job.team_id for j in queue.running + queue.waiting)
    with ArchsearchClient(api_url, token=accounts.admin_token) as admin:
        assert admin.get_job(alice_job.id).id == alice_job.id
        assert alice_job.id in [j.id for j in admin.iter_jobs()]


def test_bad_tokens_are_refused_with_a_clear_message(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    url = f"{api_url}/v1/jobs"
    missing = httpx.get(url)
    assert missing.status_code == 401 and "Bearer" in missing.json()["detail"]
    assert missing.headers["www-authenticate"] == "Bearer"
    assert httpx.get(url, headers={"Authorization": "Basic abc"}).status_code == 401
    assert "malformed" in httpx.get(url, headers=bearer("not-a-token")).json()["detail"]
    assert httpx.get(url, headers=bearer(new_token())).json()["detail"] == "unknown token"

    with sessions() as session, session.begin():
        user = account_repo.user_by_name(session, "alice")
        expired, revoked, reader = new_token(), new_token(), new_token()
        account_repo.add_token(
            session,
            user,
            token_digest(expired),
            expired[:12],
            "submit",
            datetime.now(UTC) - timedelta(minutes=1),
        )
        account_repo.add_token(session, user, token_digest(revoked), revoked[:12], "submit", None)
        account_repo.add_token(session, user, token_digest(reader), reader[:12], "read", None)
    with sessions() as session, session.begin():
        account_repo.token_by_prefix(session, revoked[:12]).revoked_at = datetime.now(UTC)

    assert "expired" in httpx.get(url, headers=bearer(expired)).json()["detail"]
    assert "revoked" in httpx.get(url, headers=bearer(revoked)).json()["detail"]
    assert httpx.get(url, headers=bearer(reader)).status_code == 200
    refused = httpx.post(url, headers=bearer(reader), json=QUICK)
    assert refused.status_code == 403 and "'submit'" in refused.json()["detail"]
    urgent = httpx.post(
        url, headers=bearer(accounts.tokens["alice"]), json=QUICK, params={"priority": "urgent"}
    )
    assert urgent.status_code == 403 and "admins" in urgent.json()["detail"]


def test_the_database_holds_no_token_in_clear(
    accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    with sessions() as session:
        dump = " ".join(str(row) for row in session.execute(text("SELECT * FROM api_tokens")))
        digests = set(session.scalars(text("SELECT token_sha256 FROM api_tokens")))
    for token in [*accounts.tokens.values(), accounts.admin_token]:
        assert token not in dump and token[12:] not in dump
        assert hashlib.sha256(token.encode()).hexdigest() in digests


def test_events_record_who_did_what(api_url: str, worker: procs.Proc, accounts: Accounts) -> None:
    with (
        ArchsearchClient(api_url, token=accounts.tokens["alice"]) as alice,
        ArchsearchClient(api_url, token=accounts.tokens["bob"]) as bob,
        ArchsearchClient(api_url, token=accounts.admin_token) as admin,
    ):
        long_job = alice.submit(  # a minute of training, cancelled long before its end
            {"method": "train", "dataset": {"name": "mnist"}, "training": {"epochs": 500}}
        )
        queued = alice.submit(QUICK)
        assert admin.set_priority(queued.id, "low").priority == -10
        while alice.get_job(long_job.id).status != "running":
            pass
        bob.cancel(queued.id)
        bob.cancel(long_job.id)
        alice.wait(long_job.id, timeout=60)
        actors = [(e.to_status, e.actor) for e in alice.events(long_job.id)]
        assert actors[0] == ("queued", "alice")
        assert actors[1][0] == "running" and ":" in actors[1][1]  # host:pid of the worker
        assert actors[-1] == ("cancelled", "bob")
        assert [(e.to_status, e.actor) for e in alice.events(queued.id)][-1] == (
            "cancelled",
            "bob",
        )
        assert any(w.alive and w.device == "cpu" for w in admin.workers())


def test_uploaded_datasets_belong_to_their_team(api_url: str, accounts: Accounts, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    rng = np.random.default_rng(0)
    path = tmp_path / "team.npz"
    np.savez(path, x=rng.normal(size=(60, 4)).astype(np.float32), y=np.repeat(np.arange(3), 20))
    with (
        ArchsearchClient(api_url, token=accounts.tokens["alice"]) as alice,
        ArchsearchClient(api_url, token=accounts.tokens["carol"]) as carol,
        ArchsearchClient(api_url, token=accounts.tokens["bob"]) as bob,
    ):
        mine = alice.upload_dataset(path)
        assert bob.get_dataset(mine.id).id == mine.id  # same team
        with pytest.raises(ApiError) as hidden:
            carol.get_dataset(mine.id)
        assert hidden.value.status == 404
        assert mine.id not in [d.id for d in carol.datasets()]
        with pytest.raises(ApiError) as refused:
            carol.submit({"method": "train", "dataset": {"id": mine.id}})
        assert refused.value.status == 422
        theirs = carol.upload_dataset(path)  # the same bytes make a dataset of carol's team
        assert theirs.id != mine.id
