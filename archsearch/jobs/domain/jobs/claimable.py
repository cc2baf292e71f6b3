"""How many jobs workers of one device kind may claim now: the autoscaler's count, as a
PostgreSQL function (`archsearch_claimable`) that migration 0022 installs and each KEDA
ScaledObject calls, so no manifest holds a copy of the scheduling rule.

The count is what the claim (`claim_sql.py`, `scheduler.claim_next`) hands out to an
unbounded fleet of every kind claiming at once, in the scheduler's order, plus the jobs
running on that kind. Its parts come from the claim's own text: which devices a kind
accepts and how much GPU memory it offers (`claim_sql.device_fits`), and the quotas as the
claim reads them (a user's or team's own `max_running`, else the server default; 0 is
paused), over the running counts of every device. A held team's jobs, a job asking for
more GPU memory than the fleet's workers offer, and a job no claim would start (a cancel
asked, attempts used up) count for no kind. An `auto` job counts once: for CPU, the kind
whose claim it reaches first when both kinds claim at once (the claim offers it to both).

Because every user's jobs carry the user's team, a team's quota is shared only by its own
members, so teams are independent: the jobs under no team quota are counted with window
functions (each user's first `room` jobs), and each team with a quota is filled in the
claim's fair-share order (priority, then the owner's running jobs, then age), one job at
a time, to learn which device kinds its room goes to. The claim ranks fair share within
the head of the queue (`scheduler.CANDIDATE_WINDOW` jobs); with more jobs waiting than
that, a contested team room may go to another kind than the count says (the total stays).

The arguments come from the settings the manifests render: the server-default quotas, the
GPU memory of the fleet's CUDA workers (NULL: every request fits) and `max_attempts`.
SQLite (embedded, one runner that takes every job) has no autoscaler and no function; its
claim (`scheduler._claim_in_process`) applies the same rules in Python: the same device and
GPU memory filter (`queue_repository.eligible_queued_jobs`), quotas with 0 paused, held
teams, and fair share within the same window.
"""

from __future__ import annotations

from archsearch.jobs.domain.jobs.claim_sql import device_fits

FUNCTION_NAME = "archsearch_claimable"

# Every queued job some kind may claim now, with what deciding its kind needs. A user's
# (team's) room is its quota less its running jobs; NULL: no quota.
_CANDIDATES = """
CREATE OR REPLACE FUNCTION archsearch_claim_candidates(
    per_user integer, per_team integer, gpu_memory_gb double precision, max_attempts integer)
RETURNS TABLE (id uuid, kind text, owner_id uuid, team_id uuid, priority integer,
               created_at timestamptz, owner_running bigint, user_room bigint,
               team_room bigint, nth_of_owner bigint)
LANGUAGE sql STABLE AS $fn$
  WITH users_room AS (
    SELECT u.id, coalesce(c.running, 0) AS running,
           coalesce(u.max_running, per_user) - coalesce(c.running, 0) AS room
    FROM users u LEFT JOIN (
      SELECT subject_id, sum(running) AS running FROM running_counts
      WHERE kind = 'user' GROUP BY subject_id) c ON c.subject_id = u.id),
  teams_room AS (
    SELECT t.id, t.usage_held_reason IS NOT NULL AS held,
           coalesce(t.max_running, per_team) - coalesce(c.running, 0) AS room
    FROM teams t LEFT JOIN (
      SELECT subject_id, sum(running) AS running FROM running_counts
      WHERE kind = 'team' GROUP BY subject_id) c ON c.subject_id = t.id),
  waiting AS (
    SELECT j.id,
           CASE WHEN {fits_cpu} THEN 'cpu' ELSE 'cuda' END AS kind,
           j.owner_id, j.team_id, j.priority, j.created_at,
           coalesce(ur.running, 0) AS owner_running, ur.room AS user_room, tr.room AS team_room
    FROM jobs j
    LEFT JOIN users_room ur ON ur.id = j.owner_id
    LEFT JOIN teams_room tr ON tr.id = j.team_id
    WHERE j.status = 'queued' AND NOT j.cancel_requested AND j.attempts < max_attempts
      AND ({fits_cpu} OR {fits_cuda})
      AND NOT coalesce(tr.held, false)
      AND coalesce(ur.room, 1) > 0 AND coalesce(tr.room, 1) > 0)
  SELECT w.*, row_number() OVER (
           PARTITION BY coalesce(w.owner_id, w.id)
           ORDER BY w.priority DESC, w.created_at, w.id) AS nth_of_owner
  FROM waiting w
$fn$;
"""

# The count, in one statement. Jobs outside team quotas: each owner's first `room`. Jobs
# under a team quota: each team's room filled in fair-share order (`archsearch_fill_team`),
# from the team's candidates in scheduler order (no owner brings more than its room).
_COUNT = """
CREATE OR REPLACE FUNCTION archsearch_claimable(
    kind text, per_user integer DEFAULT NULL, per_team integer DEFAULT NULL,
    gpu_memory_gb double precision DEFAULT NULL, max_attempts integer DEFAULT 3)
RETURNS bigint LANGUAGE sql STABLE AS $fn$
  WITH candidates AS MATERIALIZED (
    SELECT * FROM archsearch_claim_candidates(per_user, per_team, gpu_memory_gb, max_attempts)),
  free AS (
    SELECT count(*) AS n FROM candidates c
    WHERE c.team_room IS NULL AND c.kind = archsearch_claimable.kind
      AND (c.user_room IS NULL OR c.nth_of_owner <= c.user_room)),
  teams AS (
    SELECT c.team_room,
      array_agg(c.kind ORDER BY c.priority DESC, c.created_at, c.id) AS kinds,
      array_agg(coalesce(c.owner_id, c.id) ORDER BY c.priority DESC, c.created_at, c.id)
        AS owners,
      array_agg(c.priority ORDER BY c.priority DESC, c.created_at, c.id) AS priorities,
      array_agg(c.owner_running ORDER BY c.priority DESC, c.created_at, c.id) AS running,
      array_agg(coalesce(c.user_room, c.team_room) ORDER BY c.priority DESC, c.created_at, c.id)
        AS rooms
    FROM candidates c
    WHERE c.team_room IS NOT NULL AND c.nth_of_owner <= least(c.user_room, c.team_room)
    GROUP BY c.team_id, c.team_room)
  SELECT (SELECT n FROM free)
    + (SELECT coalesce(sum(archsearch_fill_team(archsearch_claimable.kind, t.team_room,
         t.kinds, t.owners, t.priorities, t.running, t.rooms)), 0)::bigint FROM teams t)
    + (SELECT count(*) FROM jobs j LEFT JOIN workers w ON w.name = j.worker
       WHERE j.status = 'running'
         AND coalesce(w.device, CASE WHEN j.device = 'cuda' THEN 'cuda' ELSE 'cpu' END)
           = archsearch_claimable.kind)
$fn$;
"""

# One team's room, filled as the claim would: the best job by (priority, the owner's
# running jobs, position in scheduler order), while its owner has room. The jobs arrive in
# scheduler order, each with its owner's running jobs and room, which are then kept here.
_FILL_TEAM = """
CREATE OR REPLACE FUNCTION archsearch_fill_team(
    wanted text, room bigint, kinds text[], owners uuid[], priorities integer[],
    owners_running bigint[], owners_room bigint[])
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
  n integer := coalesce(array_length(kinds, 1), 0);
  taken boolean[] := array_fill(false, ARRAY[greatest(n, 1)]);
  running jsonb := '{}';
  left_room jsonb := '{}';
  counted bigint := 0;
  best integer;
  step bigint;
  i integer;
BEGIN
  FOR i IN 1 .. n LOOP
    running := running || jsonb_build_object(owners[i]::text, owners_running[i]);
    left_room := left_room || jsonb_build_object(owners[i]::text, owners_room[i]);
  END LOOP;
  FOR step IN 1 .. room LOOP
    best := NULL;
    FOR i IN 1 .. n LOOP
      CONTINUE WHEN taken[i] OR (left_room ->> owners[i]::text)::bigint <= 0;
      IF best IS NULL OR priorities[i] > priorities[best]
         OR (priorities[i] = priorities[best]
             AND (running ->> owners[i]::text)::bigint
                 < (running ->> owners[best]::text)::bigint) THEN
        best := i;
      END IF;
    END LOOP;
    EXIT WHEN best IS NULL;
    taken[best] := true;
    running := jsonb_set(running, ARRAY[owners[best]::text],
                         to_jsonb((running ->> owners[best]::text)::bigint + 1));
    left_room := jsonb_set(left_room, ARRAY[owners[best]::text],
                           to_jsonb((left_room ->> owners[best]::text)::bigint - 1));
    IF kinds[best] = wanted THEN counted := counted + 1; END IF;
  END LOOP;
  RETURN counted;
END
$fn$;
"""


def install_sql() -> str:
    """The statements that (re)create the function and its helpers."""
    candidates = _CANDIDATES.format(
        fits_cpu=device_fits("cpu", None),
        fits_cuda=device_fits("cuda", "gpu_memory_gb", may_be_null=True),
    )
    return candidates + _FILL_TEAM + _COUNT


def function_bodies() -> dict[str, str]:
    """Each function's body as PostgreSQL stores it (`pg_proc.prosrc`), by name."""
    bodies = {}
    for statement in install_sql().split("CREATE OR REPLACE FUNCTION ")[1:]:
        name = statement.split("(", 1)[0]
        bodies[name] = statement.split("$fn$")[1]
    return bodies


def drop_sql() -> str:
    return (
        "DROP FUNCTION IF EXISTS archsearch_claimable(text, integer, integer, double precision,"
        " integer);\nDROP FUNCTION IF EXISTS archsearch_fill_team(text, bigint, text[],"
        " uuid[], integer[], bigint[], bigint[]);\n"
        "DROP FUNCTION IF EXISTS archsearch_claim_candidates(integer, integer,"
        " double precision, integer);\n"
    )


def _literal(value: float | None) -> str:
    return "NULL" if value is None else f"{value:g}"


def count_query(
    kind: str,
    defaults: tuple[int | None, int | None],
    gpu_memory_gb: float | None,
    max_attempts: int,
) -> str:
    """The one line a ScaledObject runs for `kind` with these settings."""
    return (
        f"SELECT {FUNCTION_NAME}('{kind}', per_user => {_literal(defaults[0])}, "
        f"per_team => {_literal(defaults[1])}, gpu_memory_gb => {_literal(gpu_memory_gb)}, "
        f"max_attempts => {max_attempts})"
    )
