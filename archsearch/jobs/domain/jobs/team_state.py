"""What the queue page says of a team's limits: its running jobs against its limit, its
device-hours in the quota's window (the last 7 days, rolling) against its weekly quota, and
whether its queued jobs are held, and why. The hold itself is decided by the scheduler's
tick (`usage.quota.update_holds`); this reads what it decided, with the same sums."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.tables import Team
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.queue import TeamQuotaPublic


def team_quotas(
    session: Session, settings: Settings, team_id: uuid.UUID | None
) -> list[TeamQuotaPublic]:
    """The caller's team (`team_id`), or every team for an admin (None)."""
    query = select(Team).order_by(Team.name)
    if team_id is not None:
        query = query.where(Team.id == team_id)
    teams = list(session.scalars(query))
    if not teams:
        return []
    ids = [team.id for team in teams]
    running_query = (
        select(Job.team_id, func.count())
        .where(Job.team_id.in_(ids), Job.status == JobStatus.running)
        .group_by(Job.team_id)
    )
    running = {team: count for team, count in session.execute(running_query)}
    end = utcnow()
    used = quota.used_seconds_by_team(session, ids, end - quota.WINDOW, end)
    return [
        TeamQuotaPublic(
            team=team.name,
            running=running.get(team.id, 0),
            max_running=team.max_running
            if team.max_running is not None
            else settings.max_running_per_team,
            device_hours_used=used.get(team.id, 0.0) / 3600,
            weekly_device_hours=team.weekly_device_hours,
            window_days=quota.WINDOW.days,
            held=team.usage_held_reason is not None,
            held_reason=team.usage_held_reason,
        )
        for team in teams
    ]
