"""The one feed of job changes in an API process: whatever reacts to a job subscribes here.

Subscribers are the kept GET answers (`answers.py`), the live streams' poller
(`broadcast.py`) and the webhook sender's wake-up; each is called with the changed job's id,
or `EVERY_JOB` when any job may have changed (a user's name, which every answer of theirs
shows; a feed that lost or regained its connection).

Why one feed and not one mechanism per reader: every mechanism of its own meant one more
listening connection per process, or one more poll of the jobs table per process, and its
own story of how fresh it is. Here there is one of each per process, and one rule of what
notifies.

On PostgreSQL the feed is one listening connection on the `job_changed` channel, which a
trigger on `jobs` notifies when a job's *state* changes (status, cancel, priority, attempts,
worker, error, ...; migration 0021): a few notifications in a job's whole life. Progress
writes (twice a second per running job) notify nothing, since every notifying commit takes
PostgreSQL's single notification lock: those who show progress read it where they show it.
The feed is then `exact`: `caught_up()` returns once every change committed before the call
has reached the subscribers (a catch-up barrier, `barrier.py`), so a reader that needs to be
as fresh as the database can be. On SQLite (embedded mode, one machine) there is no
notification: the feed is a timed check that tells its subscribers every
`CHECK_SECONDS` that anything may have changed, and is never exact.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg
from psycopg.conninfo import make_conninfo
from sqlalchemy.engine import make_url

from archsearch.api.live.barrier import ConnectionLost, SyncBarrier

log = logging.getLogger(__name__)

CHANNEL = "job_changed"
EVERY_JOB = "*"  # the payload of a change that may touch any job
APPLICATION_NAME = "archsearch-job-feed"  # how the connection shows in pg_stat_activity
CHECK_SECONDS = 1.0  # the timed check's period, where nothing notifies
# While no reader waits, one Sync this often checks that the listening connection still
# answers (a cut network shows no error of its own).
QUIET_CHECK_SECONDS = 1.0
BARRIER_TIMEOUT_SECONDS = 2.0  # a barrier slower than this counts as a lost connection
RELISTEN_SECONDS = 1.0

Subscriber = Callable[[str], None]


class NotExact(Exception):
    """The feed cannot promise that every committed change has arrived (no connection)."""


class JobFeed:
    """The subscribers, and what every feed offers them."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> None:
        """`subscriber(payload)` is called on the event loop for every change."""
        self._subscribers.append(subscriber)

    def publish(self, payload: str) -> None:
        for subscriber in self._subscribers:
            subscriber(payload)

    @property
    def exact(self) -> bool:
        """`caught_up()` can be awaited now."""
        return False

    async def caught_up(self) -> None:
        """Return once every change committed before the call has been published."""
        raise NotExact("this feed is a timed check")

    async def run(self) -> None:
        """Feed the subscribers for the life of the process; cancel the task to stop."""
        raise NotImplementedError


class TimedFeed(JobFeed):
    """Where the database notifies nothing: anything may have changed, every so often."""

    def __init__(self, check_seconds: float = CHECK_SECONDS) -> None:
        super().__init__()
        self._check_seconds = check_seconds

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._check_seconds)
            self.publish(EVERY_JOB)


class ListeningFeed(JobFeed):
    """PostgreSQL's notifications on one connection of the process's own, reconnected after
    any failure; exact while that connection is up."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self._url = url
        self._barrier: SyncBarrier | None = None  # on the listening connection, while it lives

    @property
    def exact(self) -> bool:
        return self._barrier is not None

    async def caught_up(self) -> None:
        barrier = self._barrier
        if barrier is None:
            raise NotExact("the listening connection is down")
        try:
            await barrier.wait()
        except (psycopg.Error, OSError) as error:
            self._lose(barrier, error)
            raise NotExact(str(error)) from error

    async def run(self) -> None:
        while True:
            try:
                await self._listen_once()
            except (psycopg.Error, OSError, TimeoutError) as error:
                log.warning("job feed: listening connection lost (%r); reconnecting", error)
            await asyncio.sleep(RELISTEN_SECONDS)

    async def _listen_once(self) -> None:
        connection = await psycopg.AsyncConnection.connect(
            make_conninfo(self._url, application_name=APPLICATION_NAME), autocommit=True
        )
        try:
            await connection.execute(f"LISTEN {CHANNEL}")
            barrier = SyncBarrier(connection.pgconn, self.publish)
            self._barrier = barrier
            # What changed while nobody listened is unknown: every reader starts afresh.
            self.publish(EVERY_JOB)
            try:
                await _watch(barrier)
            finally:
                self._lose(barrier, ConnectionLost("the listener stopped"))
        finally:
            await connection.close()

    def _lose(self, barrier: SyncBarrier, why: BaseException) -> None:
        barrier.close(why)
        if self._barrier is barrier:
            self._barrier = None
            self.publish(EVERY_JOB)  # from now on changes go unseen: nothing kept is fresh


async def _watch(barrier: SyncBarrier) -> None:
    """Return when the connection is lost; every `QUIET_CHECK_SECONDS` of quiet, one Sync
    checks that it still answers: a hung one fails every waiter."""
    while True:
        await asyncio.wait([barrier.lost], timeout=QUIET_CHECK_SECONDS)
        if barrier.lost.done():
            raise barrier.lost.result()
        try:
            async with asyncio.timeout(BARRIER_TIMEOUT_SECONDS):
                await barrier.wait()
        except TimeoutError as error:
            barrier.close(error)
            raise


def feed_for(database_url: str) -> JobFeed:
    """A listening feed on PostgreSQL, a timed check on SQLite."""
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        return TimedFeed()
    return ListeningFeed(url.set(drivername="postgresql").render_as_string(hide_password=False))
