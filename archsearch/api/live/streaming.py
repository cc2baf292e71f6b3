"""Live job streams: the SSE frames, the clients' watches and what a tick read,
fanned out from one shared poller per API process (`broadcast.py`).

Why a poller of the database as well as the job feed: the feed carries state changes only,
while a stream shows every metric point and progress step, which notify nothing (they are
written twice a second per running job); a notification would still need a read to fetch
the rows; and the same code serves embedded SQLite, which notifies nothing. The feed wakes
the poller for a state change; otherwise it runs only while
a stream is open; each tick (every `TICK_SECONDS`) reads what changed for every watched
job with one query per kind (light job rows, metric points, events, then the full rows of
the jobs that changed), whatever the number of clients, and pushes ready-made SSE frames
into each client's bounded queue. A client too slow to drain its queue is dropped: its
stream closes and it reconnects with Last-Event-ID. Positions come from the database
(`metrics.seq`, event ids; see `streams_repository`), so a resume after an API or worker
restart has no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from archsearch.jobs.domain.jobs.streams_repository import MetricRow
from archsearch.jobs.domain.tables import JobEvent
from archsearch.schemas.jobs import JobPublic
from archsearch.schemas.streams import StreamMetric, StreamPosition

RowT = TypeVar("RowT", MetricRow, JobEvent)

TICK_SECONDS = 0.1  # a point waits half a tick on average before it is read
WOKEN_TICK_GAP_SECONDS = 0.02  # the feed's wake-ups come no closer than this to a tick
PING_SECONDS = 15.0  # proxies close connections idle for about a minute
QUEUE_TICKS = 512  # how many ticks of frames a client may lag before it is dropped
READ_LIMIT = 5000  # rows per kind and tick: a long backlog arrives over a few ticks
# A new client of a job (no position) gets its current state and this many of its latest
# metric points, not its whole history: one indexed read at connect, and the shared poller
# reads on from there, so a late client of a long job costs the others nothing.
RECENT_METRICS = 200
# The jobs stream re-reads rows updated this long before the newest it saw: writers' clocks
# and commit order differ a little; a row seen twice unchanged is not sent twice.
LIST_OVERLAP = timedelta(seconds=5)
LIST_PROGRESS_SECONDS = 1.0  # progress of one job at most this often on the jobs stream


def sse_frame(event: str, data: str, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n".encode()


def state_of(job: Any) -> tuple[Any, ...]:
    """What a `status` event reports a change of (a row or a JobPublic)."""
    return (str(job.status), job.cancel_requested, job.priority, job.attempts, job.worker)


def progress_of(job: Any) -> tuple[int, int]:
    return (job.step, job.total_steps)


@dataclass(eq=False)
class JobWatch:
    """One client of one job's stream, and how far it has been sent."""

    job_id: uuid.UUID
    metric_seq: int
    event_id: int
    state: tuple[Any, ...]
    progress: tuple[int, int]
    queue: asyncio.Queue[bytes | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=QUEUE_TICKS)
    )

    @property
    def position(self) -> str:
        return str(StreamPosition(metric_seq=self.metric_seq, event_id=self.event_id))


@dataclass(eq=False)
class ListWatch:
    """One client of the jobs stream, with its team scope (None: every job) and filters."""

    team_id: uuid.UUID | None
    statuses: frozenset[str]
    methods: frozenset[str]
    queue: asyncio.Queue[bytes | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=QUEUE_TICKS)
    )

    def wants(self, row: Any) -> bool:
        return (
            (self.team_id is None or row.team_id == self.team_id)
            and (not self.statuses or str(row.status) in self.statuses)
            and (not self.methods or row.method in self.methods)
        )


@dataclass
class TickReads:
    """What one tick read: light rows by id, new points and events, full public rows."""

    rows: dict[uuid.UUID, Any]
    metrics: dict[uuid.UUID, list[MetricRow]]  # per job, oldest first
    events: dict[uuid.UUID, list[JobEvent]]
    complete: bool  # every new row was read (no limit hit): a job may end on this tick
    publics: dict[uuid.UUID, JobPublic] = field(default_factory=dict)


def metric_frames(watch: JobWatch, points: Sequence[MetricRow]) -> bytes:
    """`metric` frames of `points` (oldest first) past the watch's position, which they
    move on."""
    frames = []
    for point in points:
        if point.seq > watch.metric_seq:
            watch.metric_seq = point.seq
            data = StreamMetric(step=point.step, name=point.name, value=point.value)
            frames.append(sse_frame("metric", data.model_dump_json(), watch.position))
    return b"".join(frames)


def by_job(rows: Sequence[RowT]) -> dict[uuid.UUID, list[RowT]]:
    grouped: dict[uuid.UUID, list[RowT]] = {}
    for row in rows:
        grouped.setdefault(row.job_id, []).append(row)
    return grouped


@dataclass
class Shown:
    state: tuple[Any, ...]
    progress: tuple[int, int]
    at: float
