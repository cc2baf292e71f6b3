"""The sweeps' turn (jobs/domain/jobs/sweeper.py) on SQLite; tests/service/test_sweeper.py
runs the same rules on PostgreSQL, where many workers race for it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.jobs import sweeper
from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction
from archsearch.jobs.platform.migrate import upgrade


@pytest.fixture()
def sessions(tmp_path: Path) -> sessionmaker[Session]:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    return make_session_factory(make_engine(url))


def turn(sessions: sessionmaker[Session], worker: str, tick: float = 0.05) -> bool:
    with transaction(sessions) as session:
        return sweeper.take_turn(session, worker, tick)


def test_one_worker_holds_the_turn_until_it_expires(sessions: sessionmaker[Session]) -> None:
    assert turn(sessions, "a")
    assert not turn(sessions, "b")
    assert turn(sessions, "a")  # renewed by its holder
    time.sleep(sweeper.TURN_TICKS * 0.05 + 0.05)  # a missed three ticks: it may be dead
    assert turn(sessions, "b")
    assert not turn(sessions, "a")


def test_a_stopping_worker_gives_the_turn_up(sessions: sessionmaker[Session]) -> None:
    assert turn(sessions, "a", tick=60)
    with transaction(sessions) as session:
        sweeper.give_up_turn(session, "a")
    assert turn(sessions, "b", tick=60)
