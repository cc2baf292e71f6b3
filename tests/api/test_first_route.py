"""GET /v1/jobs/{id} claimed before the router tree (api/first_route.py) answers exactly as
the tree does: the same requests reach it, and every answer (the checks' 401, 403 and 422,
the 404s, the job) is the same, byte for byte, headers included, as an app without it gives.

Two apps on one SQLite database in team mode (tokens required), one of them with the first
route taken out, are asked the same requests side by side.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi import APIRouter, Depends, Request, Response
from fastapi.testclient import TestClient
from starlette.routing import Match

from archsearch.api.app import create_app
from archsearch.api.first_route import FirstRoute
from archsearch.api.routes import jobs
from archsearch.api.v1_checks import checked_v1_request
from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.runner import LocalRunner

JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}
COMPARED_HEADERS = (
    "content-type",
    "content-length",
    "x-content-type-options",
    "www-authenticate",
    "allow",
    "location",
)


@dataclass(frozen=True)
class Clients:
    first: TestClient  # the app as built: GET job claimed by `FirstRoute`
    tree: TestClient  # the same app without it: every request walks the router tree
    tokens: dict[str, str]


def _tokens(database_url: str) -> dict[str, str]:
    engine = make_engine(database_url)
    with transaction(make_session_factory(engine)) as session:
        alpha = account_repo.create_team(session, "alpha", None)
        beta = account_repo.create_team(session, "beta", None)
        account_repo.create_user(session, alpha, "alice", False, None)
        account_repo.create_user(session, beta, "carol", False, None)
        account_repo.create_user(session, alpha, "root", True, None)
        tokens = {
            "alice": issue_token(session, "alice", "submit", 1),
            "carol": issue_token(session, "carol", "read", 1),
            "scraper": issue_token(session, "root", "metrics", 1),
        }
    engine.dispose()
    return tokens


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clients]:
    home = tmp_path_factory.mktemp("first-route")
    settings = Settings(
        home=home,
        database_url=f"sqlite:///{home / 'archsearch.db'}",
        broker_url=None,
        artifact_root=home / "artifacts",
        auth="token",
    )
    upgrade(settings.resolved_database_url)
    tokens = _tokens(settings.resolved_database_url)
    services = Services.from_settings(settings)
    first, tree = (create_app(services, LocalRunner(services)) for _ in range(2))
    assert isinstance(tree.router.routes.pop(0), FirstRoute)
    with TestClient(first) as first_client, TestClient(tree) as tree_client:
        yield Clients(first_client, tree_client, tokens)
    services.engine.dispose()


def _answer(client: TestClient, method: str, path: str, token: str | None) -> tuple[object, ...]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    response = client.request(method, path, headers=headers, follow_redirects=False)
    kept = tuple(response.headers.get(name) for name in COMPARED_HEADERS)
    return response.status_code, response.content, kept


def test_every_answer_is_the_tree_s_answer(clients: Clients) -> None:
    alice, carol, scraper = (clients.tokens[n] for n in ("alice", "carol", "scraper"))
    submitted = clients.first.post(
        "/v1/jobs", json=JOB, headers={"Authorization": f"Bearer {alice}"}
    )
    job = submitted.raise_for_status().json()["id"]
    cases = [
        ("GET", f"/v1/jobs/{job}", alice, 200),
        ("GET", f"/v1/jobs/{job.upper()}", alice, 200),
        ("GET", f"/v1/jobs/{{{job}}}", alice, 200),
        ("GET", f"/v1/jobs/{job}", None, 401),
        ("GET", f"/v1/jobs/{job}", "not-a-token", 401),
        ("GET", f"/v1/jobs/{job}?bogus=1", scraper, 403),
        ("GET", f"/v1/jobs/{job}?bogus=1", alice, 422),
        ("GET", f"/v1/jobs/{job}?x=%00", alice, 422),
        ("GET", f"/v1/jobs/{job}", carol, 404),  # another team's job
        ("GET", f"/v1/jobs/{uuid.uuid4()}", alice, 404),
        ("GET", "/v1/jobs/not-an-id", alice, 404),
        ("GET", "/v1/jobs/not%00an-id", alice, 422),
        ("GET", f"/v1/jobs/{job}/", alice, 307),
        ("HEAD", f"/v1/jobs/{job}", alice, 405),
        ("DELETE", f"/v1/jobs/{job}", alice, 405),
        ("GET", f"/v1/jobs/{job}/events", alice, 200),
    ]
    for method, path, token, status in cases:
        first = _answer(clients.first, method, path, token)
        assert first == _answer(clients.tree, method, path, token), (method, path)
        assert first[0] == status, (method, path, first)


def test_it_claims_a_get_of_a_job_id_and_nothing_else(clients: Clients) -> None:
    first_route = clients.first.app.router.routes[0]  # type: ignore[attr-defined]
    assert isinstance(first_route, FirstRoute)
    job = str(uuid.uuid4())

    def claims(method: str, path: str, root_path: str = "") -> bool:
        scope = {"type": "http", "method": method, "path": path, "root_path": root_path}
        match, child = first_route.matches(scope)
        assert match is Match.NONE or child["route"] is jobs.read_job_route()
        return match is Match.FULL

    assert claims("GET", f"/v1/jobs/{job}")
    assert claims("GET", f"/v1/jobs/{job.replace('-', '')}")
    for method, path in [
        ("GET", "/v1/jobs/stream"),  # the streams router's, matched before the jobs router
        ("GET", "/v1/jobs/not-an-id"),
        ("GET", f"/v1/jobs/{job}/stream"),
        ("GET", f"/v1/jobs/{job}/"),
        ("GET", "/v1/jobs/"),
        ("POST", f"/v1/jobs/{job}"),
        ("PATCH", f"/v1/jobs/{job}"),
        ("HEAD", f"/v1/jobs/{job}"),
    ]:
        assert not claims(method, path), (method, path)
    assert not claims("GET", f"/prefix/v1/jobs/{job}", root_path="/prefix")


def test_a_route_that_takes_more_than_it_passes_is_refused() -> None:
    router = APIRouter(prefix="/v1/things")

    @router.get("/{job_id}")
    async def read_thing(job_id: str, request: Request, verbose: bool = False) -> Response:
        return Response()

    route = router.routes[0]
    with pytest.raises(TypeError, match="takes more than FirstRoute passes"):
        FirstRoute(router, route, [Depends(checked_v1_request)])  # type: ignore[arg-type]


def test_a_router_included_with_more_than_the_one_check_is_refused() -> None:
    route = jobs.read_job_route()

    async def another_check(request: Request) -> None:
        return None

    for included_with in (
        [],
        [Depends(checked_v1_request), Depends(another_check)],
        [Depends(jobs.read_job)],  # not a check of the request alone
    ):
        with pytest.raises(TypeError, match="one check of the request"):
            FirstRoute(jobs.router, route, included_with)
    assert (
        FirstRoute(jobs.router, route, [Depends(checked_v1_request)]).checks is checked_v1_request
    )
