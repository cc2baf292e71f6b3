"""GET /v1/jobs/{id} answered from memory, kept exactly fresh by PostgreSQL LISTEN/NOTIFY.

Clients poll a job's read route, so one API process keeps the presented JSON of recently
read jobs. A trigger on `jobs` (and on `users`, whose name the answer shows) notifies the
changed job's id on the `job_changed` channel when the change commits (migration 0019);
every API process listens on one connection of its own and forgets that job. A job that was
queued has no kept answer, so its changes (a claim among them) notify nothing.

Notifications travel asynchronously, so on its own this would leave a window: a GET
arriving just after another process's commit could beat the notification. Before serving
from memory the process therefore passes a catch-up barrier: a trivial query on the
listening connection, which PostgreSQL answers only after sending every notification
committed before it (postgres.c delivers pending notifies before ReadyForQuery). One such
round trip serves every request that arrived before it was sent, so concurrent pollers
share it; it is still far cheaper than reading and presenting the row.

Three more rules keep a stale answer out:
- A generation counter, bumped by every invalidation: a read that started before a change
  and finishes after its notification does not store what it read.
- Without a live listening connection the cache is off and empty; it comes back only once
  LISTEN is in place again (a database outage still answers 503 through the normal path).
- Queued jobs are never kept: their position and pending reason depend on other jobs.

Authorisation stays per request: an entry carries its job's team, and a caller of another
team goes the database way (and gets its 404 there).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import psycopg
from cachetools import LRUCache
from psycopg.conninfo import make_conninfo
from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

CHANNEL = "job_changed"
EVERY_JOB = "*"  # the payload of a change that may touch any answer (a user's name)
ANSWERS_KEPT = 10_000  # the least recently used go first beyond it
# While idle the listening connection still reads its notifications this often (an unread
# backlog would hold PostgreSQL's notification queue back); the same trip checks it lives.
DRAIN_SECONDS = 1.0
BARRIER_TIMEOUT_SECONDS = 2.0  # a barrier slower than this counts as a lost connection
RELISTEN_SECONDS = 1.0
APPLICATION_NAME = "archsearch-job-answers"  # how the connection shows in pg_stat_activity


@dataclass(frozen=True)
class Answer:
    body: bytes  # the JSON of JobPublic
    team_id: uuid.UUID | None  # the job's team: who may be shown it


class CatchUp:
    """Round trips on one connection, each shared by every caller that arrived before it
    was sent: `wait` returns after a round trip that started after the call."""

    def __init__(self, round_trip: Callable[[], Awaitable[object]]) -> None:
        self._round_trip = round_trip
        self._started = self._completed = 0
        self._in_flight: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        ticket = self._started + 1  # a trip in flight now may have been sent too early
        while self._completed < ticket:
            if self._in_flight is None:
                self._started += 1
                self._in_flight = asyncio.ensure_future(self._trip(self._started))
            # Shielded: a caller that goes away does not cancel the others' trip.
            await asyncio.shield(self._in_flight)

    async def _trip(self, number: int) -> None:
        try:
            # One timeout per trip, not per caller: a hung connection fails them all.
            async with asyncio.timeout(BARRIER_TIMEOUT_SECONDS):
                await self._round_trip()
            self._completed = number
        finally:
            self._in_flight = None


class JobAnswers:
    """The presented answers of one API process, with the rules of the module docstring."""

    def __init__(self, maxsize: int = ANSWERS_KEPT) -> None:
        self._answers: LRUCache[uuid.UUID, Answer] = LRUCache(maxsize=maxsize)
        self.generation = 0
        self._catch_up: CatchUp | None = None  # on the listening connection, while it lives

    def __len__(self) -> int:
        return len(self._answers)

    @property
    def listening(self) -> bool:
        """A listening connection is up (its barrier exists only while it lives)."""
        return self._catch_up is not None

    async def fresh(self, job_id: uuid.UUID, team_filter: uuid.UUID | None) -> bytes | None:
        """The kept answer, once every change committed before this call is applied."""
        catch_up = self._catch_up
        if catch_up is None or self.lookup(job_id, team_filter) is None:
            return None  # a miss needs no barrier
        try:
            await catch_up.wait()
        except (psycopg.Error, OSError, TimeoutError) as error:
            self.stop_listening(error)
            return None
        return self.lookup(job_id, team_filter)

    def lookup(self, job_id: uuid.UUID, team_filter: uuid.UUID | None) -> bytes | None:
        """The kept answer, if any and the caller may see it (`team_filter` None: an admin)."""
        answer = self._answers.get(job_id) if self.listening else None
        if answer is None or (team_filter is not None and answer.team_id != team_filter):
            return None
        return answer.body

    def store(self, job_id: uuid.UUID, read_at_generation: int, answer: Answer) -> None:
        """Keep an answer read when the generation was `read_at_generation`, unless
        anything was invalidated since (it may be what was read) or nobody listens."""
        if self.listening and read_at_generation == self.generation:
            self._answers[job_id] = answer

    def forget(self, payload: str) -> None:
        """A notification: one job's id, or `EVERY_JOB`."""
        self.generation += 1
        if payload == EVERY_JOB:
            self._answers.clear()
            return
        try:
            self._answers.pop(uuid.UUID(payload), None)
        except ValueError:
            self._answers.clear()  # not ours to read: the safe answer is to keep nothing

    def start_listening(self, catch_up: CatchUp) -> None:
        self._reset()
        self._catch_up = catch_up

    def stop_listening(self, why: BaseException | None = None) -> None:
        if self.listening and why is not None:
            log.warning("job answers off: listening connection lost (%r)", why)
        self._reset()
        self._catch_up = None

    def _reset(self) -> None:
        self.generation += 1
        self._answers.clear()


def listen_url(database_url: str) -> str | None:
    """The libpq URL of the database to listen on; None for SQLite (no cache there)."""
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        return None
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


async def keep_listening(answers: JobAnswers, url: str) -> None:
    """Listen on `CHANNEL` for the life of the process, reconnecting after any failure;
    the cache is on only while a listening connection is up. Cancel the task to stop."""
    while True:
        try:
            await _listen_once(answers, url)
        except (psycopg.Error, OSError, TimeoutError) as error:
            answers.stop_listening(error)
        finally:
            answers.stop_listening()
        await asyncio.sleep(RELISTEN_SECONDS)


async def _listen_once(answers: JobAnswers, url: str) -> None:
    connection = await psycopg.AsyncConnection.connect(
        make_conninfo(url, application_name=APPLICATION_NAME), autocommit=True
    )
    async with connection:
        connection.add_notify_handler(lambda notice: answers.forget(notice.payload))
        await connection.execute(f"LISTEN {CHANNEL}")
        catch_up = CatchUp(lambda: connection.execute("SELECT 1"))
        answers.start_listening(catch_up)
        # Each trip reads the notifications that arrived meanwhile; one that fails or
        # hangs (a cut network) ends the connection, and with it the cache.
        while answers.listening:
            await asyncio.sleep(DRAIN_SECONDS)
            await catch_up.wait()
