"""The shared poller of live job streams: one per API process (why: `streaming.py`).

It ticks every `TICK_SECONDS` while any stream is open, and at once when the job feed
(`feed.py`) says a job changed state, so a status or end event follows its commit by the
feed's delay rather than by half a tick; progress and metric points, which notify nothing,
are read by the tick. Each tick reads, for every watched job at once, the rows that
changed, and turns them into SSE frames for each client: a job's stream gets its new metric
points and events (each with the position it reached as `id:`), `status`/`progress` when
the job changed, and `end` once it has finished and every row before that was sent; the
jobs stream gets `job`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from archsearch.api.live.feed import EVERY_JOB, JobFeed
from archsearch.api.live.streaming import (
    LIST_OVERLAP,
    LIST_PROGRESS_SECONDS,
    PING_SECONDS,
    READ_LIMIT,
    TICK_SECONDS,
    WOKEN_TICK_GAP_SECONDS,
    JobWatch,
    ListWatch,
    Shown,
    TickReads,
    by_job,
    metric_frames,
    progress_of,
    sse_frame,
    state_of,
)
from archsearch.api.presenters import job_with_queue_state
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import streams_repository
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.jobs import EventPublic, JobPublic, JobStatus
from archsearch.schemas.streams import StreamPosition, StreamProgress

log = logging.getLogger(__name__)


class Broadcaster:
    """Registers stream clients and runs the poller while any is connected."""

    def __init__(
        self,
        reader: AsyncEngine,
        settings: Settings,
        feed: JobFeed,
        tick_seconds: float = TICK_SECONDS,
    ) -> None:
        self._reader, self._settings, self._tick_seconds = reader, settings, tick_seconds
        self._woken = asyncio.Event()
        feed.subscribe(self._job_changed)
        self._jobs: dict[uuid.UUID, set[JobWatch]] = {}
        self._lists: set[ListWatch] = set()
        self._task: asyncio.Task[None] | None = None
        self._list_since: datetime | None = None
        self._shown: dict[uuid.UUID, Shown] = {}  # what the jobs stream last sent, per job
        self._server: Any = None

    # ---- clients -------------------------------------------------------------------

    def watch_job(self, job: JobPublic, position: StreamPosition) -> JobWatch:
        watch = JobWatch(
            job.id, position.metric_seq, position.event_id, state_of(job), progress_of(job)
        )
        self._jobs.setdefault(job.id, set()).add(watch)
        self._ensure_running()
        return watch

    def watch_list(
        self, team_id: uuid.UUID | None, statuses: frozenset[str], methods: frozenset[str]
    ) -> ListWatch:
        if not self._lists:
            self._list_since, self._shown = utcnow(), {}
        watch = ListWatch(team_id, statuses, methods)
        self._lists.add(watch)
        self._ensure_running()
        return watch

    def forget(self, watch: JobWatch | ListWatch) -> None:
        if isinstance(watch, ListWatch):
            self._lists.discard(watch)
            return
        watches = self._jobs.get(watch.job_id)
        if watches is not None:
            watches.discard(watch)
            if not watches:
                del self._jobs[watch.job_id]

    async def frames(self, watch: JobWatch | ListWatch, first: bytes = b"") -> AsyncIterator[bytes]:
        """A client's stream: `first`, then what the poller queues, with a keep-alive
        comment when idle; ends when the poller closes it (or the client goes)."""
        try:
            if first:
                yield first
            while True:
                try:
                    chunk = await asyncio.wait_for(watch.queue.get(), PING_SECONDS)
                except TimeoutError:
                    yield b": ping\n\n"
                    continue
                if chunk is None:
                    return
                yield chunk
        finally:
            self.forget(watch)

    def close_with_server(self) -> None:
        """Close every stream when uvicorn starts to shut down: it waits for open
        responses before the app's shutdown, and a stream of a running job would never
        end on its own. uvicorn's SIGTERM handler is a method of its Server."""
        handler = signal.getsignal(signal.SIGTERM)
        self._server = getattr(handler, "__self__", None)

    async def close(self) -> None:
        watches: list[JobWatch | ListWatch] = [*self._lists]
        for job_watches in self._jobs.values():
            watches.extend(job_watches)
        for watch in watches:
            _end(watch)
        self._jobs, self._lists = {}, set()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    # ---- the poller ----------------------------------------------------------------

    def _job_changed(self, payload: str) -> None:
        """The feed's subscriber: tick now if a stream shows that job."""
        if self._lists or payload == EVERY_JOB or _job_id(payload) in self._jobs:
            self._woken.set()

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._jobs or self._lists:
            started = time.monotonic()
            if getattr(self._server, "should_exit", False):
                await self.close()
                return
            self._woken.clear()  # a change from here on is read by this tick or the next
            try:
                await self._tick()
            except Exception:  # a database outage: streams stay open and catch up after
                log.warning("live streams could not read the database", exc_info=True)
                await asyncio.sleep(1.0)
            await self._until_next_tick(started)

    async def _until_next_tick(self, started: float) -> None:
        """Sleep out the tick, or less when the feed wakes the poller (never closer than
        `WOKEN_TICK_GAP_SECONDS` to the last tick: a burst of changes is read together)."""
        remaining = self._tick_seconds - (time.monotonic() - started)
        try:
            async with asyncio.timeout(max(0.0, remaining)):
                await self._woken.wait()
        except TimeoutError:
            return
        await asyncio.sleep(max(0.0, WOKEN_TICK_GAP_SECONDS - (time.monotonic() - started)))

    async def _tick(self) -> None:
        jobs = {job_id: list(watches) for job_id, watches in self._jobs.items()}
        lists = list(self._lists)
        since = self._list_since - LIST_OVERLAP if lists and self._list_since else None
        async with AsyncSession(self._reader, expire_on_commit=False) as session:
            reads = await session.run_sync(self._read, jobs, since)
        for watches in jobs.values():
            for watch in watches:
                self._send_job(watch, reads)
        if lists and since is not None:
            self._send_list(lists, reads, since)

    def _read(
        self, session: Session, jobs: dict[uuid.UUID, list[JobWatch]], since: datetime | None
    ) -> TickReads:
        # Job rows first: a job seen finished here had all its points and events committed
        # before, so the two reads after it see them all.
        rows = streams_repository.watched_jobs(session, list(jobs), since)
        metric_after = {j: min(w.metric_seq for w in ws) for j, ws in jobs.items()}
        event_after = {j: min(w.event_id for w in ws) for j, ws in jobs.items()}
        metrics = streams_repository.metrics_after(session, metric_after, READ_LIMIT)
        events = streams_repository.events_after(session, event_after, READ_LIMIT)
        complete = len(metrics) < READ_LIMIT and len(events) < READ_LIMIT
        reads = TickReads({row.id: row for row in rows}, by_job(metrics), by_job(events), complete)
        changed = self._jobs_to_show(jobs, reads, since)
        for row in streams_repository.job_rows(session, changed):
            reads.publics[row.id] = job_with_queue_state(session, row, self._settings)
        return reads

    def _jobs_to_show(
        self, jobs: dict[uuid.UUID, list[JobWatch]], reads: TickReads, since: datetime | None
    ) -> set[uuid.UUID]:
        """Jobs whose full row a client needs this tick (a new state, or its end)."""
        wanted = set()
        for job_id, watches in jobs.items():
            row = reads.rows.get(job_id)
            if row is not None and (
                any(w.state != state_of(row) for w in watches)
                or (reads.complete and row.status in _TERMINAL)
            ):
                wanted.add(job_id)
        if since is not None:
            wanted |= self._list_due(reads, since)
        return wanted

    # ---- frames --------------------------------------------------------------------

    def _send_job(self, watch: JobWatch, reads: TickReads) -> None:
        row = reads.rows.get(watch.job_id)
        frames = [metric_frames(watch, reads.metrics.get(watch.job_id, ()))]
        for event in reads.events.get(watch.job_id, ()):
            if event.id > watch.event_id:
                watch.event_id = event.id
                data_json = EventPublic.model_validate(event).model_dump_json()
                frames.append(sse_frame("event", data_json, watch.position))
        ended = row is None or (reads.complete and row.status in _TERMINAL)  # None: deleted
        if row is not None:
            frames.extend(self._job_changes(watch, row, reads))
        if not _put(watch, b"".join(frames), end=ended):
            self.forget(watch)

    def _job_changes(self, watch: JobWatch, row: Any, reads: TickReads) -> list[bytes]:
        frames = []
        public = reads.publics.get(watch.job_id)
        if watch.state != state_of(row) and public is not None:
            watch.state = state_of(row)
            frames.append(sse_frame("status", public.model_dump_json(), watch.position))
        if watch.progress != progress_of(row):
            watch.progress = progress_of(row)
            data = StreamProgress(
                step=row.step, total=row.total_steps, metrics=row.latest_metrics or {}
            )
            frames.append(sse_frame("progress", data.model_dump_json(), watch.position))
        if reads.complete and row.status in _TERMINAL and public is not None:
            frames.append(sse_frame("end", public.model_dump_json(), watch.position))
        return frames

    def _list_due(self, reads: TickReads, since: datetime) -> set[uuid.UUID]:
        """Jobs the jobs stream sends this tick: a new state at once, progress at most
        every LIST_PROGRESS_SECONDS (a held-back change is still in the window later)."""
        now, due = time.monotonic(), set()
        for row in reads.rows.values():
            if row.updated_at <= since:
                continue  # read for a job's stream only
            shown = self._shown.get(row.id)
            if shown is None or shown.state != state_of(row):
                due.add(row.id)
            elif shown.progress != progress_of(row) and now - shown.at >= LIST_PROGRESS_SECONDS:
                due.add(row.id)
        return due

    def _send_list(self, lists: list[ListWatch], reads: TickReads, since: datetime) -> None:
        now, chunks = time.monotonic(), {}
        for row in reads.rows.values():
            self._list_since = max(self._list_since or row.updated_at, row.updated_at)
            public = reads.publics.get(row.id)
            if row.updated_at <= since or public is None:
                continue
            shown = self._shown.get(row.id)
            if shown and (shown.state, shown.progress) == (state_of(row), progress_of(row)):
                continue  # read again for the overlap, unchanged
            self._shown[row.id] = Shown(state_of(row), progress_of(row), now)
            chunks[row.id] = sse_frame("job", public.model_dump_json())
        self._shown = {k: v for k, v in self._shown.items() if k in reads.rows}
        for watch in lists:
            frames = [chunk for job_id, chunk in chunks.items() if watch.wants(reads.rows[job_id])]
            if not _put(watch, b"".join(frames)):
                self.forget(watch)


_TERMINAL = frozenset(status for status in JobStatus if status.terminal)


def _job_id(payload: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(payload)
    except ValueError:
        return None


def _put(watch: JobWatch | ListWatch, chunk: bytes, end: bool = False) -> bool:
    """Queue a tick's frames; False when the stream is closed by it: at its end, or when
    the client lags QUEUE_TICKS behind and is dropped (it resumes from its Last-Event-ID),
    so a slow reader holds neither memory nor the poller."""
    try:
        if chunk:
            watch.queue.put_nowait(chunk)
        if end:
            watch.queue.put_nowait(None)
        return not end
    except asyncio.QueueFull:
        _end(watch)
        return False


def _end(watch: JobWatch | ListWatch) -> None:
    while not watch.queue.empty():
        watch.queue.get_nowait()
    watch.queue.put_nowait(None)
