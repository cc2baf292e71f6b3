"""Usage reports: the device-seconds of the attempts that overlap a window, grouped by
user, team or method and by device. An attempt that straddles an edge of the window counts
only its part inside; one still running counts up to its last lease renewal."""

from __future__ import annotations

import csv
import io
import uuid
from collections import defaultdict
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from archsearch.core.errors import UserError
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.base import as_utc, utcnow
from archsearch.jobs.domain.usage import repository
from archsearch.jobs.domain.usage.tables import JobAttempt
from archsearch.schemas.usage import UsageGroup, UsagePublic, UsageRow

DEFAULT_WINDOW = timedelta(days=7)


class InvalidWindow(UserError):
    field = "to"


def window(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """[start, end): by default the last seven days up to now."""
    end = as_utc(end) if end is not None else utcnow()
    start = as_utc(start) if start is not None else end - DEFAULT_WINDOW
    if start >= end:
        raise InvalidWindow(f"'to' ({end.isoformat()}) must be after 'from' ({start.isoformat()})")
    return start, end


def _overlap(attempt: JobAttempt, start: datetime, end: datetime) -> float:
    began = max(as_utc(attempt.started_at), start)
    ended = min(as_utc(attempt.last_seen_at), end)
    return max(0.0, (ended - began).total_seconds())


def report(
    session: Session,
    principal: Principal,
    start: datetime | None,
    end: datetime | None,
    group_by: UsageGroup,
) -> UsagePublic:
    """A user sees their team's usage; an admin every team's."""
    start, end = window(start, end)
    team: uuid.UUID | None = principal.team_filter
    seconds: dict[tuple[str, str], float] = defaultdict(float)
    attempts: dict[tuple[str, str], int] = defaultdict(int)
    jobs: dict[tuple[str, str], set[uuid.UUID]] = defaultdict(set)
    for attempt, team_name, user_name in repository.attempts_between(session, start, end, team):
        group = {"user": user_name, "team": team_name, "method": attempt.method}[group_by]
        key = (group or "none", attempt.device)
        seconds[key] += _overlap(attempt, start, end)
        attempts[key] += 1
        jobs[key].add(attempt.job_id)
    rows = [
        UsageRow(
            group=group,
            device=device,
            device_seconds=round(total, 3),
            device_hours=round(total / 3600, 6),
            attempts=attempts[(group, device)],
            jobs=len(jobs[(group, device)]),
        )
        for (group, device), total in sorted(seconds.items())
    ]
    return UsagePublic(start=start, end=end, group_by=group_by, data=rows)


def as_csv(usage: UsagePublic) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [usage.group_by, "device", "device_seconds", "device_hours", "attempts", "jobs"]
    )
    for row in usage.data:
        writer.writerow(
            [row.group, row.device, row.device_seconds, row.device_hours, row.attempts, row.jobs]
        )
    return out.getvalue()
