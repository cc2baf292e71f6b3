"""GET /v1/jobs/{id} answered from memory, kept exactly fresh by PostgreSQL LISTEN/NOTIFY.

Clients poll a job's read route, so one API process keeps the presented JSON of recently
read jobs. A trigger on `jobs` (and on `users`, whose name the answer shows) notifies the
changed job's id on the `job_changed` channel when the change commits (migration 0019);
every API process listens on one connection of its own and forgets that job. A job that was
queued has no kept answer, so its changes (a claim among them) notify nothing.

Notifications travel asynchronously, so on its own this would leave a window: a GET
arriving just after another process's commit could beat the notification. Before serving
from memory the process therefore passes a catch-up barrier: a bare Sync message of the
extended query protocol on the listening connection (libpq pipeline mode), which PostgreSQL
answers with ReadyForQuery only after sending every notification committed before it
(postgres.c delivers pending notifies before ReadyForQuery, whatever the message). One Sync
serves every request that reached it in the same turn of the event loop, and Syncs are
pipelined, so a request waits one round trip at most; it is far cheaper than reading and
presenting the row.

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
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import psycopg
from cachetools import LRUCache
from psycopg import pq
from psycopg.conninfo import make_conninfo
from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

CHANNEL = "job_changed"
EVERY_JOB = "*"  # the payload of a change that may touch any answer (a user's name)
ANSWERS_KEPT = 10_000  # the least recently used go first beyond it
# Notifications are read as they arrive; while no request waits, one Sync this often checks
# that the listening connection still answers (a cut network shows no error of its own).
DRAIN_SECONDS = 1.0
BARRIER_TIMEOUT_SECONDS = 2.0  # a barrier slower than this counts as a lost connection
RELISTEN_SECONDS = 1.0
APPLICATION_NAME = "archsearch-job-answers"  # how the connection shows in pg_stat_activity


@dataclass(frozen=True)
class Answer:
    body: bytes  # the JSON of JobPublic
    team_id: uuid.UUID | None  # the job's team: who may be shown it


class Barrier(Protocol):
    def wait(self) -> Awaitable[None]:
        """Done once every notification committed before the call has been applied."""
        ...


class SyncBarrier:
    """The listening connection, driven at libpq level in pipeline mode.

    A barrier is a bare Sync message: PostgreSQL answers it with ReadyForQuery only, after
    every pending notification, with no query to parse, plan or run. Notifications are read
    as they arrive (an event-loop reader on the socket). A caller finding no Sync in flight
    sends one at once; the callers after it in one turn of the event loop share the Sync
    sent at the end of that turn. Syncs in flight are pipelined, so a caller waits for one
    round trip at most. The connection takes no other command
    once this holds it."""

    def __init__(self, pgconn: pq.abc.PGconn, forget: Callable[[str], None]) -> None:
        self._pgconn, self._forget = pgconn, forget
        self._loop = asyncio.get_running_loop()
        self._socket = pgconn.socket
        self._in_flight: deque[list[asyncio.Future[None]]] = deque()  # oldest Sync first
        self._unsent: list[asyncio.Future[None]] | None = None  # waiters of the next Sync
        # Done, with the reason, once the connection is lost or closed.
        self.lost: asyncio.Future[BaseException] = self._loop.create_future()
        pgconn.enter_pipeline_mode()
        self._loop.add_reader(self._socket, self._on_readable)

    def wait(self) -> asyncio.Future[None]:
        # One future per caller, not one shared: a caller that goes away cancels only its own.
        waiter: asyncio.Future[None] = self._loop.create_future()
        if self.lost.done():
            waiter.set_exception(ConnectionLost("the listening connection is closed"))
            return waiter
        if self._unsent is None and not self._in_flight:
            # Nothing in flight (a lone poller's case): a Sync sent now covers this caller
            # and saves a turn of the loop; callers after it in this turn share the next.
            self._send([waiter])
            return waiter
        if self._unsent is None:
            self._unsent = []
            self._loop.call_soon(self._send_unsent)
        self._unsent.append(waiter)
        return waiter

    def close(self, why: BaseException) -> None:
        """Stop reading and fail every waiter with `why` (a lost connection, a timeout)."""
        if self.lost.done():
            return
        self._loop.remove_reader(self._socket)
        self._loop.remove_writer(self._socket)
        self.lost.set_result(why)
        waiting = [*self._in_flight, self._unsent or []]
        self._in_flight.clear()
        self._unsent = None
        for waiters in waiting:
            _settle(waiters, why)

    def _send_unsent(self) -> None:
        waiters, self._unsent = self._unsent or [], None
        self._send(waiters)

    def _send(self, waiters: list[asyncio.Future[None]]) -> None:
        if self.lost.done():
            _settle(waiters, ConnectionLost("the listening connection is closed"))
            return
        try:
            self._pgconn.pipeline_sync()
            if self._pgconn.flush():  # the socket is full: finish when it drains
                self._loop.add_writer(self._socket, self._flush)
        except psycopg.Error as error:
            _settle(waiters, error)
            self.close(error)
            return
        self._in_flight.append(waiters)

    def _flush(self) -> None:
        try:
            if not self._pgconn.flush():
                self._loop.remove_writer(self._socket)
        except psycopg.Error as error:
            self.close(error)

    def _on_readable(self) -> None:
        try:
            self._pgconn.consume_input()
            self._read_results()
        except psycopg.Error as error:
            self.close(error)

    def _read_results(self) -> None:
        while not self._pgconn.is_busy():
            result = self._pgconn.get_result()
            if result is None:
                break
            if result.status != pq.ExecStatus.PIPELINE_SYNC:
                message = result.error_message.decode(errors="replace")
                raise psycopg.OperationalError(message or "unexpected result on the listener")
            # Every notification sent before this ReadyForQuery is parsed by now: apply
            # them before releasing the Sync's waiters.
            self._read_notifications()
            _settle(self._in_flight.popleft(), None)
        self._read_notifications()

    def _read_notifications(self) -> None:
        while (notice := self._pgconn.notifies()) is not None:
            self._forget(notice.extra.decode(errors="replace"))


class ConnectionLost(psycopg.OperationalError):
    """The listening connection closed while a barrier waited for it."""


def _settle(waiters: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for waiter in waiters:
        if waiter.done():
            continue  # its caller went away
        if error is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(error)


class JobAnswers:
    """The presented answers of one API process, with the rules of the module docstring."""

    def __init__(self, maxsize: int = ANSWERS_KEPT) -> None:
        self._answers: LRUCache[uuid.UUID, Answer] = LRUCache(maxsize=maxsize)
        self.generation = 0
        self._barrier: Barrier | None = None  # on the listening connection, while it lives

    def __len__(self) -> int:
        return len(self._answers)

    @property
    def listening(self) -> bool:
        """A listening connection is up (its barrier exists only while it lives)."""
        return self._barrier is not None

    async def fresh(self, job_id: uuid.UUID, team_filter: uuid.UUID | None) -> bytes | None:
        """The kept answer, once every change committed before this call is applied."""
        barrier = self._barrier
        if barrier is None or self.lookup(job_id, team_filter) is None:
            return None  # a miss needs no barrier
        try:
            await barrier.wait()
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

    def start_listening(self, barrier: Barrier) -> None:
        self._reset()
        self._barrier = barrier

    def stop_listening(self, why: BaseException | None = None) -> None:
        if self.listening and why is not None:
            log.warning("job answers off: listening connection lost (%r)", why)
        self._reset()
        self._barrier = None

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
    try:
        await connection.execute(f"LISTEN {CHANNEL}")
        barrier = SyncBarrier(connection.pgconn, answers.forget)
        answers.start_listening(barrier)
        try:
            await _watch(barrier)
        finally:
            barrier.close(ConnectionLost("the listener stopped"))
    finally:
        await connection.close()


async def _watch(barrier: SyncBarrier) -> None:
    """Return when the connection is lost; every `DRAIN_SECONDS` of quiet, one Sync checks
    that it still answers (a cut network shows no error): a hung one fails every waiter."""
    while True:
        await asyncio.wait([barrier.lost], timeout=DRAIN_SECONDS)
        if barrier.lost.done():
            raise barrier.lost.result()
        try:
            async with asyncio.timeout(BARRIER_TIMEOUT_SECONDS):
                await barrier.wait()
        except TimeoutError as error:
            barrier.close(error)
            raise
