"""The claim as one PostgreSQL statement: pick the next job and, when nothing needs a
second look, take it (running, attempt 1, a lease, its event, its usage row) in the same
round trip.

The pick reads the head of the queue from the partial index `ix_jobs_queue` (priority, then
age) without locking it, ranks that window by fair share (the owner's running jobs: one row
of `running_counts` per user, joined to the window), and locks one row with `FOR UPDATE SKIP
LOCKED`, walking the ranks: concurrent claimers never wait on each other and never take the
same job (when they hold the whole window, the first free job beyond it, in the same
statement). The walk reaches each ranked row by the address the head read it at (`ctid`,
valid within the statement's snapshot), not through the primary key's index; as with any
`FOR UPDATE`, a row another claimer changed meanwhile is locked at its newest version and
checked again (`status = 'queued'`). Users and teams at their quota are left out. The job
is taken in the statement only when no quota applies to its owner or team (nothing to
serialise) and it is a first attempt that no one asked to cancel; any other pick comes back
locked for the scheduler to finish under the claim lock.
Callers own the transaction; nothing here commits.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import Timestamp, utcnow
from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.domain.usage.repository import DEVICE_KINDS

# Users and teams at their quota. Only those with a quota are summed: with none (the
# server's default), no count is read.
_FULL = """
full_users AS (
  SELECT u.id FROM users u
  WHERE coalesce(u.max_running, {user_default}) IS NOT NULL
    AND coalesce(u.max_running, {user_default}) <= (
      SELECT coalesce(sum(c.running), 0) FROM running_counts c
      WHERE c.kind = 'user' AND c.subject_id = u.id)),
full_teams AS (
  SELECT t.id FROM teams t
  WHERE coalesce(t.max_running, {team_default}) IS NOT NULL
    AND coalesce(t.max_running, {team_default}) <= (
      SELECT coalesce(sum(c.running), 0) FROM running_counts c
      WHERE c.kind = 'team' AND c.subject_id = t.id)),"""

_NOT_FULL = """
  AND (j.owner_id IS NULL OR j.owner_id NOT IN (SELECT id FROM full_users))
  AND (j.team_id IS NULL OR j.team_id NOT IN (SELECT id FROM full_teams))
  AND (j.team_id IS NULL OR j.team_id NOT IN (
    SELECT id FROM teams WHERE usage_held_reason IS NOT NULL))"""

# The head of the queue in scheduler order, unlocked.
_HEAD = """
head AS MATERIALIZED (
  SELECT j.id, j.ctid AS address, j.priority, j.created_at, j.owner_id FROM jobs j
  WHERE {eligible}
  ORDER BY j.priority DESC, j.created_at, j.id LIMIT {window}),"""

# The head ranked by fair share (the owner's running jobs) among equal priorities; the
# first of it no other claimer holds. A user's running jobs are one row, shard 0 (migration
# 0018 folded the user shards into it and its trigger writes no other), read by a join.
_FAIR_PICK = """
  SELECT j.id, j.attempts, j.cancel_requested, j.owner_id, j.team_id
  FROM (SELECT h.address, row_number() OVER (
          ORDER BY h.priority DESC, coalesce(r.running, 0), h.created_at, h.id) AS rank
        FROM head h LEFT JOIN running_counts r
          ON r.kind = 'user' AND r.subject_id = h.owner_id AND r.shard = 0
        ORDER BY rank) AS ranked
  JOIN jobs j ON j.ctid = ranked.address  -- a TID scan: no index descent per rank
  WHERE j.status = 'queued'
  -- The ranks arrive in order: the join walks them lazily, so only the rows other
  -- claimers hold are passed over before the first free one is locked.
  ORDER BY ranked.rank LIMIT 1 FOR UPDATE OF j SKIP LOCKED"""

# The first free job in scheduler order.
_ORDER_PICK = """
  SELECT j.id, j.attempts, j.cancel_requested, j.owner_id, j.team_id FROM jobs j
  WHERE {eligible}
  ORDER BY j.priority DESC, j.created_at, j.id
  LIMIT 1 FOR UPDATE OF j SKIP LOCKED"""

# Fair share within the head; when other claimers hold all of it, scheduler order beyond
# it. The second pick runs only when the first finds nothing (the limit stops the append).
_FAIR_THEN_ORDER = (
    _HEAD + "\nlocked AS (\n  SELECT * FROM (" + _FAIR_PICK + ") AS fair\n  UNION ALL"
    "\n  SELECT * FROM (" + _ORDER_PICK + ") AS in_order\n  LIMIT 1),"
)

# The run's device time starts with the claim (as `usage.open_attempt` does for the claims
# the scheduler finishes in Python): numbered after the rows already there (a hand-back
# keeps its row), on the device the claiming worker registered, else the job's own kind.
_OPEN_ATTEMPT = """
attempt AS (
  INSERT INTO job_attempts (job_id, attempt, team_id, owner_id, method, device, worker,
                            started_at, last_seen_at, seconds)
  SELECT t.id, (SELECT coalesce(max(a.attempt), 0) + 1 FROM job_attempts a WHERE a.job_id = t.id),
    t.team_id, t.owner_id, t.method,
    coalesce((SELECT w.device FROM workers w WHERE w.name = :worker AND w.device IN {kinds}),
             CASE WHEN t.device IN {kinds} THEN t.device ELSE 'cpu' END),
    :worker, :now, :now, 0
  FROM taken t)"""

_TAKE = """
pick AS (
  SELECT l.id, l.attempts, l.cancel_requested,
    (l.owner_id IS NULL OR coalesce(u.max_running, {user_default}) IS NULL)
    AND (l.team_id IS NULL OR coalesce(t.max_running, {team_default}) IS NULL) AS unlimited
  FROM locked l LEFT JOIN users u ON u.id = l.owner_id LEFT JOIN teams t ON t.id = l.team_id),
taken AS (
  UPDATE jobs SET status = 'running', attempts = jobs.attempts + 1, worker = :worker,
         lease_expires_at = :lease_expires_at, started_at = coalesce(jobs.started_at, :now),
         updated_at = :now
  FROM pick
  WHERE jobs.id = pick.id AND pick.unlimited AND pick.attempts = 0 AND NOT pick.cancel_requested
  RETURNING jobs.id, jobs.owner_id, jobs.team_id, jobs.method, jobs.device),
event AS (
  INSERT INTO job_events (job_id, from_status, to_status, reason, actor, at)
  SELECT id, 'queued', 'running', 'started', :worker, :now FROM taken),"""

_ANSWER = """
SELECT pick.id, pick.unlimited, EXISTS (SELECT 1 FROM taken) AS taken FROM pick"""


@dataclass(frozen=True)
class Pick:
    job_id: uuid.UUID
    taken: bool  # running already, for this worker
    unlimited: bool  # no quota applies to its owner or its team


def device_fits(device: str, gpu_memory: str | None, *, may_be_null: bool = False) -> str:
    """Whether a job `j` fits a worker offering `device` with `gpu_memory` GB (an SQL
    expression; None, or NULL with `may_be_null`: not known, so any request fits). The
    claim and the autoscaler's count (`claimable.py`) both read it from here."""
    accepts = f"j.device IN {_sql_list(Offer(device).accepts)}"
    if device == "cpu":
        return f"({accepts} AND j.min_gpu_memory_gb IS NULL)"  # asks for GPU memory: not here
    if device == "cuda" and gpu_memory is not None:
        return (
            f"({accepts} AND (j.min_gpu_memory_gb IS NULL"
            + (f" OR {gpu_memory} IS NULL" if may_be_null else "")
            + f" OR j.min_gpu_memory_gb <= {gpu_memory}))"
        )
    return f"({accepts})"


def _eligible(offer: Offer) -> str:
    known = offer.device == "cuda" and offer.gpu_memory_gb is not None
    fits = device_fits(offer.device, ":gpu_memory_gb" if known else None)
    return f"j.status = 'queued' AND {fits}" + _NOT_FULL


def _sql_list(words: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{word}'" for word in words) + ")"  # the code's own constants


def _sql_int(value: int | None) -> str:
    return "NULL::integer" if value is None else str(int(value))


@functools.cache
def claim_statement(
    offer: Offer, window: int, defaults: tuple[int | None, int | None]
) -> TextClause:
    """The claim's statement for a worker, built once. What stays the same for a worker
    (its offer, the window, the server's quotas) is written into the text, so that the
    prepared statement's generic plan is as good as a fresh one: PostgreSQL then plans
    it once per connection instead of on every claim."""
    pick = _FAIR_THEN_ORDER.format(eligible=_eligible(offer), window=window)
    sql = ("WITH " + _FULL.strip() + pick + _TAKE + _OPEN_ATTEMPT + _ANSWER).format(
        user_default=_sql_int(defaults[0]),
        team_default=_sql_int(defaults[1]),
        kinds=_sql_list(DEVICE_KINDS),
    )
    return text(sql).bindparams(
        bindparam("now", type_=Timestamp), bindparam("lease_expires_at", type_=Timestamp)
    )


def pick_and_take(
    session: Session,
    offer: Offer,
    worker: str,
    lease_seconds: float,
    defaults: tuple[int | None, int | None],
    window: int,
) -> Pick | None:
    """The next job `offer` may run, locked; taken for `worker` when nothing else needs
    deciding. `window`: fair share among that many jobs of the head of the queue."""
    now: datetime = utcnow()
    params: dict[str, object] = {
        "worker": worker,
        "now": now,
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
    }
    if offer.device == "cuda" and offer.gpu_memory_gb is not None:
        params["gpu_memory_gb"] = offer.gpu_memory_gb
    row = session.execute(claim_statement(offer, window, defaults), params).one_or_none()
    return None if row is None else Pick(row.id, bool(row.taken), bool(row.unlimited))
