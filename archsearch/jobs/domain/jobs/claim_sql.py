"""The claim as one PostgreSQL statement: pick the next job and, when nothing needs a
second look, take it (running, attempt 1, a lease, its event) in the same round trip.

The pick reads the head of the queue from the partial index `ix_jobs_queue` (priority, then
age) without locking it, ranks that window by fair share (the owner's running jobs, from
`running_counts`), and locks one row with `FOR UPDATE SKIP LOCKED`, walking the ranks:
concurrent claimers never wait on each other and never take the same job. Users and teams
at their quota are left out. The job is taken in the statement only when no quota applies
to its owner or team (nothing to serialise) and it is a first attempt that no one asked to
cancel; any other pick comes back locked for the scheduler to finish under the claim lock.
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

# Users and teams at their quota. Only those with a quota are summed: with none (the
# server's default), nothing is read.
_FULL = """
full_users AS (
  SELECT u.id FROM users u WHERE coalesce(u.max_running, :user_default) <= (
    SELECT coalesce(sum(c.running), 0) FROM running_counts c
    WHERE c.kind = 'user' AND c.subject_id = u.id)),
full_teams AS (
  SELECT t.id FROM teams t WHERE coalesce(t.max_running, :team_default) <= (
    SELECT coalesce(sum(c.running), 0) FROM running_counts c
    WHERE c.kind = 'team' AND c.subject_id = t.id)),"""

_NOT_FULL = """
  AND (j.owner_id IS NULL OR j.owner_id NOT IN (SELECT id FROM full_users))
  AND (j.team_id IS NULL OR j.team_id NOT IN (SELECT id FROM full_teams))
  AND (j.team_id IS NULL OR j.team_id NOT IN (
    SELECT id FROM teams WHERE usage_held_reason IS NOT NULL))"""

# The head of the queue in scheduler order, unlocked; ranked by fair share (the owner's
# running jobs) among equal priorities; then the first of it no other claimer holds.
_FAIR_PICK = """
head AS MATERIALIZED (
  SELECT j.id, j.priority, j.created_at, j.owner_id FROM jobs j
  WHERE {eligible}
  ORDER BY j.priority DESC, j.created_at, j.id LIMIT :window),
running AS (
  SELECT o.owner_id, (SELECT sum(c.running) FROM running_counts c
                      WHERE c.kind = 'user' AND c.subject_id = o.owner_id) AS n
  FROM (SELECT DISTINCT owner_id FROM head WHERE owner_id IS NOT NULL) o),
locked AS (
  SELECT j.id, j.attempts, j.cancel_requested, j.owner_id, j.team_id
  FROM (SELECT h.id, row_number() OVER (
          ORDER BY h.priority DESC, coalesce(r.n, 0), h.created_at, h.id) AS rank
        FROM head h LEFT JOIN running r ON r.owner_id = h.owner_id
        ORDER BY rank) AS ranked
  JOIN jobs j ON j.id = ranked.id
  WHERE j.status = 'queued'
  -- The ranks arrive in order: the join walks them lazily, so only the rows other
  -- claimers hold are passed over before the first free one is locked.
  ORDER BY ranked.rank LIMIT 1 FOR UPDATE OF j SKIP LOCKED),"""

# Every row of the window held by other claimers: the first free one in scheduler order.
_ORDER_PICK = """
locked AS (
  SELECT j.id, j.attempts, j.cancel_requested, j.owner_id, j.team_id FROM jobs j
  WHERE {eligible}
  ORDER BY j.priority DESC, j.created_at, j.id
  LIMIT 1 FOR UPDATE OF j SKIP LOCKED),"""

_TAKE = """
pick AS (
  SELECT l.id, l.attempts, l.cancel_requested,
    (l.owner_id IS NULL OR coalesce(u.max_running, :user_default) IS NULL)
    AND (l.team_id IS NULL OR coalesce(t.max_running, :team_default) IS NULL) AS unlimited
  FROM locked l LEFT JOIN users u ON u.id = l.owner_id LEFT JOIN teams t ON t.id = l.team_id),
taken AS (
  UPDATE jobs SET status = 'running', attempts = jobs.attempts + 1, worker = :worker,
         lease_expires_at = :lease_expires_at, started_at = coalesce(jobs.started_at, :now),
         updated_at = :now
  FROM pick
  WHERE jobs.id = pick.id AND pick.unlimited AND pick.attempts = 0 AND NOT pick.cancel_requested
  RETURNING jobs.id),
event AS (
  INSERT INTO job_events (job_id, from_status, to_status, reason, actor, at)
  SELECT id, 'queued', 'running', 'started', :worker, :now FROM taken)
SELECT pick.id, pick.unlimited, EXISTS (SELECT 1 FROM taken) AS taken FROM pick"""


@dataclass(frozen=True)
class Pick:
    job_id: uuid.UUID
    taken: bool  # running already, for this worker
    unlimited: bool  # no quota applies to its owner or its team


def _eligible(device: str, gpu_limited: bool) -> str:
    where = "j.status = 'queued' AND j.device IN :accepts"
    if device == "cpu":
        where += " AND j.min_gpu_memory_gb IS NULL"  # asks for GPU memory: not here
    elif device == "cuda" and gpu_limited:
        where += " AND (j.min_gpu_memory_gb IS NULL OR j.min_gpu_memory_gb <= :gpu_memory_gb)"
    return where + _NOT_FULL


@functools.cache
def _statement(device: str, gpu_limited: bool, fair: bool) -> TextClause:
    """The claim's statement for an offer's kind, built once (the same text each time also
    lets the driver prepare it on each connection)."""
    pick = (_FAIR_PICK if fair else _ORDER_PICK).format(eligible=_eligible(device, gpu_limited))
    return text("WITH " + _FULL.strip() + pick + _TAKE).bindparams(
        bindparam("accepts", expanding=True),
        bindparam("now", type_=Timestamp),
        bindparam("lease_expires_at", type_=Timestamp),
    )


def pick_and_take(
    session: Session,
    offer: Offer,
    worker: str,
    lease_seconds: float,
    defaults: tuple[int | None, int | None],
    window: int | None,
) -> Pick | None:
    """The next job `offer` may run, locked; taken for `worker` when nothing else needs
    deciding. `window`: fair share among that many jobs of the head; None: scheduler order
    only (for when other claimers hold the whole window)."""
    gpu_limited = offer.device == "cuda" and offer.gpu_memory_gb is not None
    now: datetime = utcnow()
    params: dict[str, object] = {
        "accepts": list(offer.accepts),
        "user_default": defaults[0],
        "team_default": defaults[1],
        "worker": worker,
        "now": now,
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
    }
    if window is not None:
        params["window"] = window
    if gpu_limited:
        params["gpu_memory_gb"] = offer.gpu_memory_gb
    statement = _statement(offer.device, gpu_limited, window is not None)
    row = session.execute(statement, params).one_or_none()
    return None if row is None else Pick(row.id, bool(row.taken), bool(row.unlimited))
