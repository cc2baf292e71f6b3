"""The sweeps' turn: which one worker runs the fleet's periodic sweeps now.

Expired leases, quota holds, preemption, wake-ups for waiting jobs, the study driver and
the orphan sweep each look at the whole queue or fleet, so run by every worker they cost
the database once per worker per interval. Instead a worker takes the turn when the
`sweeper_turns` row has expired (or is its own), in one upsert, and runs the sweeps while
it holds it; it renews the turn every tick. A holder that dies is replaced once its turn
expires: `TURN_TICKS` ticks later.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import or_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.tables import SweeperTurn

SWEEPS = "sweeps"
TURN_TICKS = 3  # a holder may miss two ticks (a slow pass, a pause) before it is replaced


def take_turn(session: Session, worker: str, tick_seconds: float, name: str = SWEEPS) -> bool:
    """Whether `worker` holds the turn now (taken, or renewed) for `TURN_TICKS` ticks."""
    now = utcnow()
    until = now + timedelta(seconds=TURN_TICKS * tick_seconds)
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = (
        insert(SweeperTurn)
        .values(name=name, holder=worker, expires_at=until)
        .on_conflict_do_update(
            index_elements=[SweeperTurn.name],
            set_={"holder": worker, "expires_at": until},
            where=or_(SweeperTurn.expires_at < now, SweeperTurn.holder == worker),
        )
        .returning(SweeperTurn.holder)
    )
    return session.execute(statement).scalar_one_or_none() == worker


def give_up_turn(session: Session, worker: str, name: str = SWEEPS) -> None:
    """At a worker's stop: the next tick of any other worker takes the turn."""
    session.query(SweeperTurn).filter_by(name=name, holder=worker).delete()
