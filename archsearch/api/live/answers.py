"""GET /v1/jobs/{id} answered from memory, kept fresh by the job feed (`feed.py`).

Clients poll a job's read route, so one API process keeps the presented JSON of recently
read jobs, and forgets a job's answer when the feed says the job changed. Before serving
from memory a request waits until the feed has caught up (`JobFeed.caught_up`): every state
change committed before the request arrived has then been applied, on whichever process it
was made, so the state an answer shows (status, cancel, priority, attempts, error, ...) is
as fresh as a database read.

Progress notifies nothing (written every 1-2 s per running job; see the feed), so
a running job's answer is kept at most the workers' interval between progress writes
(`Settings.progress_flush_seconds`): its progress figures are then at most that much older
than the database's, which is itself up to that much behind the job.

Three more rules keep a stale answer out:
- A generation counter, bumped by every change: a read that started before a change and
  finishes after its notification does not store what it read.
- While the feed is not exact (no listening connection, or SQLite) nothing is kept or served
  from memory; the feed tells every subscriber `EVERY_JOB` when it loses or regains its
  connection, so nothing kept across a gap survives.
- Queued jobs are never kept: their position and pending reason depend on other jobs.

Authorisation stays per request: an entry carries its job's team, and a caller of another
team goes the database way (and gets its 404 there).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from cachetools import LRUCache

from archsearch.api.live.feed import EVERY_JOB, JobFeed, NotExact

ANSWERS_KEPT = 10_000  # the least recently used go first beyond it
PROGRESS_SECONDS = 1.0  # the default of `Settings.progress_flush_seconds`


@dataclass(frozen=True)
class Answer:
    body: bytes  # the JSON of JobPublic
    team_id: uuid.UUID | None  # the job's team: who may be shown it
    running: bool = False  # its progress moves without a notification


@dataclass(frozen=True)
class _Kept:
    answer: Answer
    until: float  # time.monotonic() after which it is not served


class JobAnswers:
    """The presented answers of one API process, with the rules of the module docstring."""

    def __init__(
        self, feed: JobFeed, maxsize: int = ANSWERS_KEPT, progress_seconds: float = PROGRESS_SECONDS
    ) -> None:
        self._feed, self._progress_seconds = feed, progress_seconds
        self._kept: LRUCache[uuid.UUID, _Kept] = LRUCache(maxsize=maxsize)
        self.generation = 0
        feed.subscribe(self.forget)

    def __len__(self) -> int:
        return len(self._kept)

    async def fresh(self, job_id: uuid.UUID, team_filter: uuid.UUID | None) -> bytes | None:
        """The kept answer, once every change committed before this call is applied."""
        if self.lookup(job_id, team_filter) is None:
            return None  # a miss needs no catch-up
        try:
            await self._feed.caught_up()
        except NotExact:
            return None
        return self.lookup(job_id, team_filter)

    def lookup(self, job_id: uuid.UUID, team_filter: uuid.UUID | None) -> bytes | None:
        """The kept answer, if any and the caller may see it (`team_filter` None: an admin)."""
        kept = self._kept.get(job_id) if self._feed.exact else None
        if kept is None or kept.until < time.monotonic():
            return None
        if team_filter is not None and kept.answer.team_id != team_filter:
            return None
        return kept.answer.body

    def store(self, job_id: uuid.UUID, read_at_generation: int, answer: Answer) -> None:
        """Keep an answer read when the generation was `read_at_generation`, unless
        anything was invalidated since (it may be what was read) or the feed is not exact."""
        if self._feed.exact and read_at_generation == self.generation:
            until = time.monotonic() + self._progress_seconds if answer.running else float("inf")
            self._kept[job_id] = _Kept(answer, until)

    def forget(self, payload: str) -> None:
        """A change from the feed: one job's id, or `EVERY_JOB`."""
        self.generation += 1
        if payload == EVERY_JOB:
            self._kept.clear()
            return
        try:
            self._kept.pop(uuid.UUID(payload), None)
        except ValueError:
            self._kept.clear()  # not ours to read: the safe answer is to keep nothing
