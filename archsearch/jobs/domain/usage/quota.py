"""A team's optional quota of device-hours per rolling 7 days, from the device time its jobs'
attempts recorded (`job_attempts`).

The scheduler's tick (`runtime/reaper.py`) sums each team's last 7 days and, while a team's
quota is used up, keeps the reason on the team row (`usage_held_reason`); a claim leaves the
queued jobs of a held team out (one clause of `claim_sql.py`), `pending_reason` shows the
reason, and the KEDA query scales no worker up for them. Running jobs are not stopped: a run
started under the quota finishes. Setting the quota re-decides at once (`update_holds`).

The week is summed by PostgreSQL in one aggregate over each team's attempts seen within it
(a range of `ix_job_attempts_team_id_last_seen_at`), and a hold is written by one UPDATE
per team whose hold changed: no team row is locked while Python reads, so claims and
ticks never queue behind the check. SQLite (one process, few rows) sums in Python.
Callers own the transaction; nothing here commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.tables import Team
from archsearch.jobs.domain.base import as_utc, utcnow
from archsearch.jobs.domain.usage.repository import attempts_between
from archsearch.jobs.domain.usage.tables import JobAttempt

WINDOW = timedelta(days=7)


def held_teams(session: Session) -> set[uuid.UUID]:
    """Teams whose weekly device-hours are used up, as the last tick found."""
    return set(session.scalars(select(Team.id).where(Team.usage_held_reason.is_not(None))))


def used_seconds(session: Session, team_id: uuid.UUID, start: datetime, end: datetime) -> float:
    """Device-seconds the team's runs were charged within [start, end): each run's time
    there times its share of the device."""
    total = 0.0
    for attempt, _, _ in attempts_between(session, start, end, team_id):
        begun, last = max(as_utc(attempt.started_at), start), min(as_utc(attempt.last_seen_at), end)
        total += max(0.0, (last - begun).total_seconds()) * attempt.device_share
    return total


def hold_reason(team: Team | _Quota, seconds: float) -> str | None:
    """Why the team's jobs wait, or None while it has device-hours left."""
    if team.weekly_device_hours is None or seconds < team.weekly_device_hours * 3600:
        return None
    return (
        f"team {team.name} used {seconds / 3600:.2f} of {team.weekly_device_hours:g} "
        "device-hours in the last 7 days"
    )


class _Quota(NamedTuple):
    id: uuid.UUID
    name: str
    weekly_device_hours: float | None
    usage_held_reason: str | None


def used_seconds_by_team(
    session: Session, team_ids: list[uuid.UUID], start: datetime, end: datetime
) -> dict[uuid.UUID, float]:
    """Device-seconds each team's attempts spent within [start, end)."""
    if not team_ids:
        return {}
    if session.get_bind().dialect.name != "postgresql":
        return {team_id: used_seconds(session, team_id, start, end) for team_id in team_ids}
    within = func.least(JobAttempt.last_seen_at, end) - func.greatest(JobAttempt.started_at, start)
    held = func.greatest(0.0, func.extract("epoch", within))
    seconds = func.sum(held * JobAttempt.device_share)  # a slot's run: its share
    query = (
        select(JobAttempt.team_id, seconds)
        .where(
            JobAttempt.team_id.in_(team_ids),
            JobAttempt.last_seen_at > start,
            JobAttempt.started_at < end,
        )
        .group_by(JobAttempt.team_id)
    )
    return {team_id: float(total or 0.0) for team_id, total in session.execute(query)}


def update_holds(
    session: Session, now: datetime | None = None, team_ids: Iterable[uuid.UUID] | None = None
) -> dict[str, str | None]:
    """Hold or release each team with a quota (or a hold left from one); `team_ids`: only
    those. Returns the teams whose hold changed, by name, with their new reason."""
    end = now or utcnow()
    query = select(Team.id, Team.name, Team.weekly_device_hours, Team.usage_held_reason).where(
        or_(Team.weekly_device_hours.is_not(None), Team.usage_held_reason.is_not(None))
    )
    if team_ids is not None:
        query = query.where(Team.id.in_(list(team_ids)))
    teams = [_Quota(*row) for row in session.execute(query)]
    used = used_seconds_by_team(session, [team.id for team in teams], end - WINDOW, end)
    changed = {}
    for team in teams:
        reason = hold_reason(team, used.get(team.id, 0.0))
        if reason != team.usage_held_reason:
            session.execute(update(Team).where(Team.id == team.id).values(usage_held_reason=reason))
            changed[team.name] = reason
    return changed
