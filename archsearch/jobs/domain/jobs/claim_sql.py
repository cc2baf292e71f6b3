"""The claim as one PostgreSQL statement: pick the next job and, when nothing needs a
second look, take it (running, attempt 1, a lease, its event) in the same round trip.

The pick reads the head of the queue from the partial index `ix_jobs_queue` (priority, then
age) without locking it, orders that window by fair share (the owner's running jobs, from
`running_counts`), and locks one row with `FOR UPDATE SKIP LOCKED`: concurrent claimers
never wait on each other and never take the same job. Users and teams at their quota are
left out. The job is taken in the statement only when no quota applies to its owner or
team (nothing to serialise) and it is a first attempt that no one asked to cancel; any
other pick comes back locked for the scheduler to finish under the claim lock.
Callers own the transaction; nothing here commits.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import Timestamp, utcnow
from archsearch.jobs.domain.jobs.offer import Offer

_NOT_FULL = """
  AND NOT EXISTS (SELECT 1 FROM running_counts c JOIN users u ON u.id = c.subject_id
                  WHERE c.kind = 'user' AND c.subject_id = j.owner_id
                    AND c.running >= coalesce(u.max_running, :user_default))
  AND NOT EXISTS (SELECT 1 FROM running_counts c JOIN teams t ON t.id = c.subject_id
                  WHERE c.kind = 'team' AND c.subject_id = j.team_id
                    AND c.running >= coalesce(t.max_running, :team_default))"""

_UNLIMITED = """
  (j.owner_id IS NULL OR coalesce(u.max_running, :user_default) IS NULL)
  AND (j.team_id IS NULL OR coalesce(t.max_running, :team_default) IS NULL)"""

# The head of the queue in scheduler order, then fair share among it.
_FAIR_PICK = """
head AS (
  SELECT j.id, j.priority, j.created_at, j.owner_id FROM jobs j
  WHERE {eligible}
  ORDER BY j.priority DESC, j.created_at, j.id LIMIT :window),
pick AS (
  SELECT j.id, j.attempts, j.cancel_requested, {unlimited} AS unlimited
  FROM head h JOIN jobs j ON j.id = h.id
  LEFT JOIN running_counts rc ON rc.kind = 'user' AND rc.subject_id = h.owner_id
  LEFT JOIN users u ON u.id = j.owner_id LEFT JOIN teams t ON t.id = j.team_id
  WHERE j.status = 'queued'
  ORDER BY h.priority DESC, coalesce(rc.running, 0), h.created_at, h.id
  LIMIT 1 FOR UPDATE OF j SKIP LOCKED)"""

# Every row of the window held by other claimers: the first free one in scheduler order.
_ORDER_PICK = """
pick AS (
  SELECT j.id, j.attempts, j.cancel_requested, {unlimited} AS unlimited
  FROM jobs j LEFT JOIN users u ON u.id = j.owner_id LEFT JOIN teams t ON t.id = j.team_id
  WHERE {eligible}
  ORDER BY j.priority DESC, j.created_at, j.id
  LIMIT 1 FOR UPDATE OF j SKIP LOCKED)"""

_TAKE = """,
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


def _eligible(offer: Offer) -> str:
    where = "j.status = 'queued' AND j.device IN :accepts"
    if offer.device == "cpu":
        where += " AND j.min_gpu_memory_gb IS NULL"  # asks for GPU memory: not here
    elif offer.device == "cuda" and offer.gpu_memory_gb is not None:
        where += " AND (j.min_gpu_memory_gb IS NULL OR j.min_gpu_memory_gb <= :gpu_memory_gb)"
    return where + _NOT_FULL


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
    template = _FAIR_PICK if window is not None else _ORDER_PICK
    pick = template.format(eligible=_eligible(offer), unlimited=_UNLIMITED)
    statement = text("WITH " + pick.strip() + _TAKE).bindparams(
        bindparam("accepts", expanding=True),
        bindparam("now", type_=Timestamp),
        bindparam("lease_expires_at", type_=Timestamp),
    )
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
    if offer.device == "cuda" and offer.gpu_memory_gb is not None:
        params["gpu_memory_gb"] = offer.gpu_memory_gb
    row = session.execute(statement, params).one_or_none()
    return None if row is None else Pick(row.id, bool(row.taken), bool(row.unlimited))
