"""The sweeps' turn on PostgreSQL: of many workers taking it at once, exactly one holds it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.jobs import sweeper
from archsearch.jobs.platform.db import transaction

pytestmark = pytest.mark.service


def test_of_many_workers_at_once_exactly_one_holds_the_turn(
    sessions: sessionmaker[Session],
) -> None:
    def take(worker: str) -> bool:
        with transaction(sessions) as session:
            return sweeper.take_turn(session, worker, 60, name="race")

    with ThreadPoolExecutor(16) as pool:
        held = list(pool.map(take, [f"w{k}" for k in range(64)]))
    assert sum(held) == 1
    (holder,) = [f"w{k}" for k, won in enumerate(held) if won]
    assert take(holder) and not take("late")
