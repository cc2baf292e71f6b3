"""Waiting on a job, mixed into `ArchsearchClient`: `wait()` follows the job's live stream
(Server-Sent Events, `client.streams`) and falls back to polling on a server without
streams; `follow_logs()` reads its log lines as they are written. Both outlast a server
restart: they back off while it is away and resume from the last event or line received.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import httpx

from archsearch.client.errors import ApiError, ServerStoppedAnswering, ServerUnreachable
from archsearch.client.streams import Follower, NoStreams, parse_events
from archsearch.schemas.jobs import JobPublic
from archsearch.schemas.logs import JobLogLinePublic

RETRY_STATUSES = frozenset({502, 503, 504})  # a proxy or a server starting up or going down
STREAM_SILENCE_SECONDS = 40.0  # the server pings a stream every 15 s
JobRef = str | uuid.UUID


class FollowingMixin:
    """Needs the host class's `http`, `url` and `get_job` (see `ArchsearchClient`)."""

    http: httpx.Client
    url: str

    def get_job(self, job_id: JobRef) -> JobPublic:
        raise NotImplementedError

    def follow_logs(
        self, job_id: JobRef, reconnect_after: float = 1.0, outage_timeout: float = 120.0
    ) -> Iterator[JobLogLinePublic]:
        """A job's log lines as they are written (the server streams them), until the job
        has finished and every line was read. A dropped stream or a restarted server is
        followed by a reconnect that reads on after the last line received."""
        after, outage_since = 0, None
        while True:
            try:
                for line in self._log_stream(job_id, after):
                    after, outage_since = line.id, None
                    yield line
            except (ServerUnreachable, ServerStoppedAnswering):
                outage_since = outage_since or time.monotonic()
                if time.monotonic() - outage_since > outage_timeout:
                    raise
                time.sleep(reconnect_after)
                continue
            if self.get_job(job_id).status.terminal:
                return  # the server ends a stream early only at its time limit

    def _log_stream(self, job_id: JobRef, after: int) -> Iterator[JobLogLinePublic]:
        params: dict[str, str | int] = {"follow": "true", "after": after}
        timeout = httpx.Timeout(self.http.timeout.connect, read=None)  # lines may be far apart
        try:
            path = f"/v1/jobs/{job_id}/logs"
            with self.http.stream("GET", path, params=params, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError.from_response(response)
                for raw in response.iter_lines():
                    if raw:
                        yield JobLogLinePublic.model_validate_json(raw)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(self.url) from exc
        except httpx.TransportError as exc:
            raise ServerStoppedAnswering(self.url, exc) from exc

    def wait(
        self,
        job_id: JobRef,
        poll: float = 0.5,
        timeout: float | None = None,
        on_update: Callable[[JobPublic], None] | None = None,
        outage_timeout: float = 120.0,
        follow: bool = True,
    ) -> JobPublic:
        """Wait until the job is terminal and return it.

        Follows the job's live stream (`on_update` gets the job at each change of state or
        progress); a server without streams, or `follow=False`, is polled every `poll`
        seconds. A server that goes away (a restart, a deploy) is waited for with backoff,
        up to `outage_timeout` seconds at a stretch, and the stream resumed from the last
        event received; `timeout` bounds the whole wait.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        outage = _Outage(outage_timeout, first_delay=poll)
        follower = Follower(on_update)
        while True:
            try:
                if follow:
                    finished = self._follow_stream(job_id, follower, outage, deadline)
                else:
                    finished = self._poll_once(job_id, on_update, outage)
            except NoStreams:
                follow = False
                continue
            except (ServerUnreachable, ServerStoppedAnswering, ApiError) as exc:
                if isinstance(exc, ApiError) and exc.status not in RETRY_STATUSES:
                    raise
                _check_deadline(deadline, f"job {job_id}: the server was unreachable")
                time.sleep(outage.next_delay(exc))
                continue
            if finished is not None:
                return finished
            _check_deadline(deadline, f"job {job_id} not finished after {timeout}s")
            time.sleep(poll)  # polled, or the server closed the stream: read again

    def _poll_once(
        self, job_id: JobRef, on_update: Callable[[JobPublic], None] | None, outage: _Outage
    ) -> JobPublic | None:
        job = self.get_job(job_id)
        outage.reset()
        if on_update:
            on_update(job)
        return job if job.status.terminal else None

    def _follow_stream(
        self, job_id: JobRef, follower: Follower, outage: _Outage, deadline: float | None
    ) -> JobPublic | None:
        """Read the job's stream from where `follower` stopped; the finished job at `end`,
        None when the server closed the stream before (it dropped a lagging reader)."""
        headers = {"Last-Event-ID": follower.position} if follower.position else {}
        # Pings come every 15 s: a longer silence is a dead connection.
        timeout = httpx.Timeout(self.http.timeout.connect, read=STREAM_SILENCE_SECONDS)
        path = f"/v1/jobs/{job_id}/stream"
        try:
            with self.http.stream("GET", path, headers=headers, timeout=timeout) as response:
                if response.status_code >= 400:
                    self._refuse_stream(job_id, response)
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    raise NoStreams()  # a server (or proxy) that answers the path with JSON
                outage.reset()
                for event in parse_events(response.iter_lines()):
                    if event is not None and (finished := follower.take(event)) is not None:
                        return finished
                    _check_deadline(deadline, f"job {job_id} not finished in time")
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(self.url) from exc
        except httpx.TransportError as exc:
            raise ServerStoppedAnswering(self.url, exc) from exc
        return None

    def _refuse_stream(self, job_id: JobRef, response: httpx.Response) -> None:
        response.read()
        error = ApiError.from_response(response)
        if response.status_code in (404, 405):
            self.get_job(job_id)  # raises if the job is missing (or another team's)
            raise NoStreams()  # the job exists: a server from before streams
        raise error


class _Outage:
    """Backoff while the server is away; gives up after `limit` seconds at a stretch."""

    MAX_DELAY = 5.0

    def __init__(self, limit: float, first_delay: float) -> None:
        self.limit, self.first_delay = limit, first_delay
        self.started: float | None = None
        self.delay = first_delay

    def next_delay(self, error: Exception) -> float:
        now = time.monotonic()
        self.started = self.started if self.started is not None else now
        if now - self.started > self.limit:
            raise error
        self.delay = min(self.delay * 2, self.MAX_DELAY)
        return self.delay

    def reset(self) -> None:
        self.started, self.delay = None, self.first_delay


def _check_deadline(deadline: float | None, message: str) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError(message)
