"""Real PostgreSQL, Redis, API and Celery worker processes for the service tests.

Each test session gets its own PostgreSQL database (migrated with Alembic), its own Redis
database and queue name, and its own artifact folder. A missing service fails the suite
with a message; it is never skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import redis
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ArchsearchClient
from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.secret_keys import new_key
from tests.conftest import TEST_DATASETS
from tests.service import procs
from tests.service.procs import PG_ADMIN, REDIS_URL, create_database, drop_database

# The service processes' webhook-secret keys: a fresh key per test session, newest first.
SECRET_KEYS = new_key()


def _require_services() -> None:
    try:
        psycopg.connect(PG_ADMIN, connect_timeout=3).close()
    except psycopg.Error as exc:
        pytest.fail(f"PostgreSQL is not answering at 127.0.0.1:5432 ({exc}); .ci/run starts it")
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=3).ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is not answering at 127.0.0.1:6379 ({exc}); .ci/run starts it")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    _require_services()
    name = f"archsearch_test_{uuid.uuid4().hex[:10]}"
    url = create_database(name)
    upgrade(url)
    yield url
    drop_database(name)


@pytest.fixture(scope="session")
def service_env(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("service-home")
    queue = f"archsearch-test-{uuid.uuid4().hex[:8]}"
    return {
        "ARCHSEARCH_DATABASE_URL": pg_url,
        "ARCHSEARCH_BROKER_URL": REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": queue,
        "ARCHSEARCH_HOME": str(home),
        "ARCHSEARCH_ARTIFACT_ROOT": str(home / "artifacts"),
        "ARCHSEARCH_DATA_DIR": str(TEST_DATASETS),
        # Short leases so a killed worker's job comes back within seconds in tests.
        "ARCHSEARCH_LEASE_SECONDS": "3",
        "ARCHSEARCH_AUTH": "token",
        # Webhook receivers of the tests listen on loopback (an admin's setting in team
        # mode); failed deliveries are retried within a second.
        "ARCHSEARCH_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
        "ARCHSEARCH_WEBHOOK_POLL_SECONDS": "0.2",
        "ARCHSEARCH_WEBHOOK_BACKOFF_MAX_SECONDS": "1",
        "ARCHSEARCH_WEBHOOK_TIMEOUT_SECONDS": "1",
        # Team mode encrypts webhook secrets under this; every process gets the same keys.
        "ARCHSEARCH_SECRET_KEYS": SECRET_KEYS,
        # Every test calls from 127.0.0.1, many with wrong tokens on purpose: the shared API
        # must not throttle them (tests/service/test_auth_throttle.py runs its own).
        "ARCHSEARCH_AUTH_FAILURES_PER_MINUTE": "1000000",
    }


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="session")
def api_url(service_env: dict[str, str], log_dir: Path) -> Iterator[str]:
    port = procs.free_port()
    proc = procs.start("api", ["api", "--port", str(port)], service_env, log_dir)
    url = f"http://127.0.0.1:{port}"
    procs.wait_http(f"{url}/healthz", proc)
    yield url
    proc.stop()


def start_worker(service_env: dict[str, str], log_dir: Path, name: str) -> procs.Proc:
    proc = procs.start(
        name, ["worker", "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h"], service_env, log_dir
    )
    procs.wait_log(proc, "ready.", timeout=90)
    return proc


@pytest.fixture(scope="session")
def worker(service_env: dict[str, str], log_dir: Path) -> Iterator[procs.Proc]:
    proc = start_worker(service_env, log_dir, "worker")
    yield proc
    proc.stop()


@dataclass
class Accounts:
    """Two teams of two users each, and an admin; a submit token per user."""

    tokens: dict[str, str]
    admin_token: str


@pytest.fixture(scope="session")
def accounts(pg_url: str) -> Accounts:
    engine = make_engine(pg_url)
    tokens = {}
    with transaction(make_session_factory(engine)) as session:
        teams = {
            name: account_repo.create_team(session, name, None) for name in ("alpha", "beta", "ops")
        }
        for user, team in (
            ("alice", "alpha"),
            ("bob", "alpha"),
            ("carol", "beta"),
            ("dave", "beta"),
        ):
            account_repo.create_user(session, teams[team], user, False, None)
            tokens[user] = issue_token(session, user, "submit", 1)
        account_repo.create_user(session, teams["ops"], "root", True, None)
        admin_token = issue_token(session, "root", "admin", 1)
    engine.dispose()
    return Accounts(tokens, admin_token)


@pytest.fixture(scope="session")
def token(accounts: Accounts) -> str:
    return accounts.tokens["alice"]


@pytest.fixture(scope="session")
def auth_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture()
def client(api_url: str, worker: procs.Proc, token: str) -> Iterator[ArchsearchClient]:
    with ArchsearchClient(api_url, token=token) as c:
        yield c


@pytest.fixture(scope="session")
def sessions(pg_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(pg_url)
    yield make_session_factory(engine)
    engine.dispose()
