"""Fixtures of the domain's tests on SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings


@pytest.fixture()
def services(tmp_path: Path) -> Services:
    """Embedded-mode services on a migrated SQLite file and a local artifact folder."""
    settings = Settings(
        home=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        artifact_root=tmp_path / "artifacts",
        broker_url=None,
    )
    upgrade(settings.resolved_database_url)
    return Services.from_settings(settings)
