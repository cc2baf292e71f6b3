"""The catch-up barrier on the feed's listening connection (libpq pipeline mode).

A barrier answers "has every job change committed before now reached this process?" with
one bare Sync message of the extended query protocol: PostgreSQL answers a Sync with
ReadyForQuery only, and delivers every pending notification before any ReadyForQuery
(postgres.c, whatever the message), with no query to parse, plan or run. Notifications are
read as they arrive (an event-loop reader on the socket) and handed to the feed.

At most one Sync is in flight. A caller finding none sends one at once (a lone poller waits
one round trip); callers arriving while one is in flight share the next, sent when it comes
back: that Sync left after they arrived, so it covers them, and however many requests a
busy process serves, it sends one Sync per round trip (each caller waits two at most).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

import psycopg
from psycopg import pq


class Barrier(Protocol):
    def wait(self) -> Awaitable[None]:
        """Done once every notification committed before the call has been applied."""
        ...


class ConnectionLost(psycopg.OperationalError):
    """The listening connection closed while a barrier waited for it."""


class SyncBarrier:
    """The listening connection, driven at libpq level; it takes no other command once this
    holds it."""

    def __init__(self, pgconn: pq.abc.PGconn, notified: Callable[[str], None]) -> None:
        self._pgconn, self._notified = pgconn, notified
        self._loop = asyncio.get_running_loop()
        self._socket = pgconn.socket
        self._in_flight: list[asyncio.Future[None]] | None = None  # waiters of the Sync sent
        self._next: list[asyncio.Future[None]] = []  # waiters of the Sync sent after it
        # Done, with the reason, once the connection is lost or closed.
        self.lost: asyncio.Future[BaseException] = self._loop.create_future()
        pgconn.enter_pipeline_mode()
        self._loop.add_reader(self._socket, self._on_readable)

    def wait(self) -> asyncio.Future[None]:
        # One future per caller, not one shared: a caller that goes away cancels only its own.
        waiter: asyncio.Future[None] = self._loop.create_future()
        if self.lost.done():
            waiter.set_exception(ConnectionLost("the listening connection is closed"))
        elif self._in_flight is None:
            self._send([waiter])
        else:
            self._next.append(waiter)
        return waiter

    def close(self, why: BaseException) -> None:
        """Stop reading and fail every waiter with `why` (a lost connection, a timeout)."""
        if self.lost.done():
            return
        self._loop.remove_reader(self._socket)
        self._loop.remove_writer(self._socket)
        self.lost.set_result(why)
        waiting = [*(self._in_flight or []), *self._next]
        self._in_flight, self._next = None, []
        _settle(waiting, why)

    def _send(self, waiters: list[asyncio.Future[None]]) -> None:
        try:
            self._pgconn.pipeline_sync()
            if self._pgconn.flush():  # the socket is full: finish when it drains
                self._loop.add_writer(self._socket, self._flush)
        except psycopg.Error as error:
            _settle(waiters, error)
            self.close(error)
            return
        self._in_flight = waiters

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
            self._sync_returned()
        self._read_notifications()

    def _sync_returned(self) -> None:
        done, self._in_flight = self._in_flight or [], None
        _settle(done, None)
        if self._next:
            waiters, self._next = self._next, []
            self._send(waiters)

    def _read_notifications(self) -> None:
        while (notice := self._pgconn.notifies()) is not None:
            self._notified(notice.extra.decode(errors="replace"))


def _settle(waiters: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for waiter in waiters:
        if waiter.done():
            continue  # its caller went away
        if error is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(error)
