"""The typed client of the archsearch REST API: answers come back as the API's own pydantic
models (`archsearch.schemas`), not as dicts.

Reads (GET, HEAD) are retried on connection errors and on 502/503/504, a bounded number of
times with exponential backoff (httpx-retries); a submit (POST) is never repeated, since a
lost answer may hide a job that was created. `wait()` outlasts a server restart.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
from httpx_retries import Retry, RetryTransport
from pydantic import BaseModel

from archsearch.client.errors import (
    AmbiguousJobId,
    ApiError,
    ClientError,
    ServerStoppedAnswering,
    ServerUnreachable,
)
from archsearch.client.streams import Follower, NoStreams, parse_events
from archsearch.client.studies import StudiesMixin
from archsearch.schemas.artifacts import ArtifactPublic, ArtifactsPublic
from archsearch.schemas.datasets import DatasetPublic, DatasetsPublic, UploadedDatasetPublic
from archsearch.schemas.jobs import (
    EventPublic,
    EventsPublic,
    JobPublic,
    JobsPublic,
    MetricPoint,
    MetricsPublic,
    Priority,
    PriorityUpdate,
)
from archsearch.schemas.logs import JobLogLinePublic, JobLogsPublic
from archsearch.schemas.queue import QueuePublic, WorkerPublic, WorkersPublic

DEFAULT_URL = "http://127.0.0.1:8000"
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
HEX_DIGITS = frozenset("0123456789abcdef")
RETRY_STATUSES = frozenset({502, 503, 504})  # a proxy or a server starting up or going down
STREAM_SILENCE_SECONDS = 40.0  # the server pings a stream every 15 s
JobRef = str | uuid.UUID
Model = TypeVar("Model", bound=BaseModel)


def read_retry(attempts: int) -> Retry:
    """GET and HEAD only: safe to send twice. Waits about 0.2, 0.4, 0.8 s (with jitter)."""
    return Retry(
        total=attempts,
        backoff_factor=0.1,
        allowed_methods=["GET", "HEAD"],
        status_forcelist=sorted(RETRY_STATUSES),
    )


class ArchsearchClient(StudiesMixin):
    """A session with one archsearch server; use it as a context manager."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        timeout: float = 30.0,
        token: str | None = None,
        retries: int = 3,
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            headers=headers,
            transport=RetryTransport(retry=read_retry(retries)),
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ArchsearchClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- plumbing ----------------------------------------------------------------------

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; an error answer raises ApiError, no server raises ServerUnreachable."""
        try:
            response = self.http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(self.url) from exc
        except httpx.TransportError as exc:
            raise ServerStoppedAnswering(self.url, exc) from exc
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        return response

    def _get(self, model: type[Model], path: str, **kwargs: Any) -> Model:
        return model.model_validate_json(self._send("GET", path, **kwargs).content)

    # ---- jobs --------------------------------------------------------------------------

    def submit(
        self,
        spec: Mapping[str, Any],
        priority: str | None = None,
        tags: Sequence[str] = (),
    ) -> JobPublic:
        """Submit a job spec with its tags; sent once, never retried."""
        params: dict[str, Any] = {"tag": list(tags)}
        if priority:
            params["priority"] = priority
        response = self._send("POST", "/v1/jobs", json=dict(spec), params=params)
        return JobPublic.model_validate_json(response.content)

    def get_job(self, job_id: JobRef) -> JobPublic:
        return self._get(JobPublic, f"/v1/jobs/{job_id}")

    def list_jobs(
        self,
        status: list[str] | None = None,
        method: list[str] | None = None,
        limit: int = 50,
        cursor: str | None = None,
        id_prefix: str | None = None,
        tag: Sequence[str] = (),
    ) -> JobsPublic:
        """A page of jobs, newest first; `tag` keeps the jobs carrying every tag given."""
        params: dict[str, Any] = {"limit": limit, "status": status or [], "method": method or []}
        params["tag"] = list(tag)
        if cursor:
            params["cursor"] = cursor
        if id_prefix:
            params["id_prefix"] = id_prefix
        return self._get(JobsPublic, "/v1/jobs", params=params)

    def iter_jobs(self, **filters: Any) -> Iterator[JobPublic]:
        cursor = None
        while True:
            page = self.list_jobs(cursor=cursor, **filters)
            yield from page.data
            if not (cursor := page.next_cursor):
                return

    def resolve_job_id(self, id_or_prefix: JobRef) -> uuid.UUID:
        """The full id of the caller's one job whose id starts with `id_or_prefix`."""
        if isinstance(id_or_prefix, uuid.UUID):
            return id_or_prefix
        try:
            return uuid.UUID(id_or_prefix)
        except ValueError:
            pass
        prefix = id_or_prefix.strip().lower()
        hex_digits = prefix.replace("-", "")
        if not hex_digits or not all(c in HEX_DIGITS for c in hex_digits):
            raise ClientError(f"{id_or_prefix!r} is not a job id nor the start of one (hex digits)")
        matches = self.list_jobs(id_prefix=hex_digits, limit=5).data
        if not matches:
            raise ApiError(404, "not_found", f"no job id starts with {prefix!r}")
        if len(matches) > 1:
            raise AmbiguousJobId(prefix, [str(job.id) for job in matches])
        return matches[0].id

    def cancel(self, job_id: JobRef) -> JobPublic:
        return JobPublic.model_validate_json(
            self._send("POST", f"/v1/jobs/{job_id}/cancel").content
        )

    def set_priority(self, job_id: JobRef, priority: Priority) -> JobPublic:
        """Re-prioritise a job (admins)."""
        body = PriorityUpdate(priority=priority).model_dump()
        response = self._send("PATCH", f"/v1/jobs/{job_id}", json=body)
        return JobPublic.model_validate_json(response.content)

    def metrics(self, job_id: JobRef) -> dict[str, list[MetricPoint]]:
        return self._get(MetricsPublic, f"/v1/jobs/{job_id}/metrics").series

    def events(self, job_id: JobRef) -> list[EventPublic]:
        return self._get(EventsPublic, f"/v1/jobs/{job_id}/events").data

    def logs(self, job_id: JobRef, after: int = 0, limit: int = 1000) -> JobLogsPublic:
        """One page of a job's log lines after line id `after` (0: from the start)."""
        params = {"after": after, "limit": limit}
        return self._get(JobLogsPublic, f"/v1/jobs/{job_id}/logs", params=params)

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
            if self.get_job(job_id).status in TERMINAL:
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
        return job if job.status in TERMINAL else None

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

    # ---- the queue and the workers -----------------------------------------------------

    def queue(self) -> QueuePublic:
        """Running and waiting jobs as the scheduler sees them, and the workers."""
        return self._get(QueuePublic, "/v1/queue")

    def workers(self) -> list[WorkerPublic]:
        return self._get(WorkersPublic, "/v1/workers").data

    # ---- artifacts ---------------------------------------------------------------------

    def artifacts(self, job_id: JobRef) -> list[ArtifactPublic]:
        return self._get(ArtifactsPublic, f"/v1/jobs/{job_id}/artifacts").data

    def download_artifact(self, job_id: JobRef, name: str, destination: Path) -> Path:
        """Stream one artifact to `destination`, checking its sha256."""
        digest = hashlib.sha256()
        try:
            with self.http.stream("GET", f"/v1/jobs/{job_id}/artifacts/{name}") as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError.from_response(response)
                destination.parent.mkdir(parents=True, exist_ok=True)
                with open(destination, "wb") as handle:
                    for chunk in response.iter_bytes():
                        digest.update(chunk)
                        handle.write(chunk)
                expected = response.headers.get("x-content-sha256")
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(self.url) from exc
        except httpx.TransportError as exc:
            raise ServerStoppedAnswering(self.url, exc) from exc
        if expected and digest.hexdigest() != expected:
            destination.unlink()
            raise ApiError(200, "checksum_mismatch", f"{name}: sha256 differs from the server's")
        return destination

    def download_all(self, job_id: JobRef, folder: str | Path) -> list[Path]:
        folder = Path(folder)
        return [
            self.download_artifact(job_id, a.name, folder / a.name) for a in self.artifacts(job_id)
        ]

    # ---- datasets ----------------------------------------------------------------------

    def datasets(self) -> list[DatasetPublic]:
        return self._get(DatasetsPublic, "/v1/datasets").data

    def upload_dataset(
        self, path: str | Path, timeout: float = 600.0, **options: Any
    ) -> UploadedDatasetPublic:
        """Upload a .npz, .csv or .zip file (streamed); options: name, label_column,
        test_fraction, split_seed, num_classes. The same file twice gives the same dataset."""
        path = Path(path)
        fields = {k: str(v) for k, v in options.items() if v is not None}
        with open(path, "rb") as handle:
            response = self._send(
                "POST",
                "/v1/datasets",
                files={"file": (path.name, handle)},
                data=fields,
                timeout=timeout,
            )
        return UploadedDatasetPublic.model_validate_json(response.content)

    def get_dataset(self, dataset_id: str) -> UploadedDatasetPublic:
        return self._get(UploadedDatasetPublic, f"/v1/datasets/{dataset_id}")

    def delete_dataset(self, dataset_id: str) -> None:
        self._send("DELETE", f"/v1/datasets/{dataset_id}")

    def dataset_preview(self, dataset_id: str) -> bytes:
        return self._send("GET", f"/v1/datasets/{dataset_id}/preview.png").content


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
