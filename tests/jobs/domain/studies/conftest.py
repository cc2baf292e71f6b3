"""A migrated SQLite database in embedded mode, and a session on it, for the study tests
that drive Optuna's storage beside ours."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from archsearch.jobs.platform.db import make_engine, make_session_factory
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.settings import Settings


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    settings = Settings(home=tmp_path)
    upgrade(settings.resolved_database_url)
    return settings


@pytest.fixture()
def session(settings: Settings) -> Iterator[Session]:
    engine = make_engine(settings.resolved_database_url)
    with make_session_factory(engine)() as session:
        yield session
    engine.dispose()
