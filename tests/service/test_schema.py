"""Migrations and models agree, and processes refuse a database that is behind."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from archsearch.jobs.domain.metadata import metadata
from archsearch.jobs.platform.db import make_engine
from archsearch.jobs.platform.migrate import alembic_config, upgrade
from tests.conftest import REPO_ROOT
from tests.service.procs import create_database, drop_database

pytestmark = pytest.mark.service


def model_migration_drift(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return list(compare_metadata(MigrationContext.configure(connection), metadata))
    finally:
        engine.dispose()


def test_postgres_migrations_match_models(pg_url: str) -> None:
    assert model_migration_drift(pg_url) == []


def test_sqlite_migrations_match_models(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'drift.db'}"
    upgrade(url)
    assert model_migration_drift(url) == []


@pytest.mark.slow
@pytest.mark.parametrize("command", [["api", "--port", "1"], ["worker"]])
def test_processes_refuse_a_database_that_is_behind(command: list[str], tmp_path: Path) -> None:
    name = f"archsearch_stale_{uuid.uuid4().hex[:8]}"
    url = create_database(name)  # exists, but no migration applied
    try:
        env = {
            "ARCHSEARCH_DATABASE_URL": url,
            "ARCHSEARCH_BROKER_URL": "redis://127.0.0.1:6379/13",
            "ARCHSEARCH_HOME": str(tmp_path),
            "PATH": "/usr/bin:/bin",
        }
        result = subprocess.run(
            [sys.executable, "-m", "archsearch.cli.main", *command],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2
        assert "archsearch db upgrade" in result.stderr + result.stdout

        upgraded = subprocess.run(
            [sys.executable, "-m", "archsearch.cli.main", "db", "upgrade"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert upgraded.returncode == 0, upgraded.stderr
        current = subprocess.run(
            [sys.executable, "-m", "archsearch.cli.main", "db", "current"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert current.returncode == 0, current.stdout + current.stderr
    finally:
        drop_database(name)


def test_job_notification_triggers_go_down_to_0019_and_back() -> None:
    name = f"archsearch_notify_{uuid.uuid4().hex[:8]}"
    url = create_database(name)
    try:
        upgrade(url)
        assert _job_triggers(url) == {"jobs_notify_changed", "jobs_notify_deleted"}
        command.downgrade(alembic_config(url), "0019")
        assert _job_triggers(url) == {"jobs_notify_changed"}  # 0019's: updates and deletes
        upgrade(url)
        assert _job_triggers(url) == {"jobs_notify_changed", "jobs_notify_deleted"}
        assert model_migration_drift(url) == []
    finally:
        drop_database(name)


def _job_triggers(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT tgname FROM pg_trigger WHERE tgname LIKE 'jobs_notify_%'")
            )
            return {tgname for (tgname,) in rows}
    finally:
        engine.dispose()
