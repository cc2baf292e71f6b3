"""The typed client of the archsearch REST API: answers come back as the API's own pydantic
models (`archsearch.schemas`), not as dicts.

Reads (GET, HEAD) are retried on connection errors and on 502/503/504, a bounded number of
times with exponential backoff (httpx-retries); a submit (POST) is never repeated, since a
lost answer may hide a job that was created. `wait()` outlasts a server restart.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
from httpx_retries import Retry, RetryTransport
from pydantic import BaseModel

from archsearch.client.errors import (
    ApiError,
    ServerStoppedAnswering,
    ServerUnreachable,
)
from archsearch.client.following import RETRY_STATUSES, FollowingMixin, JobRef
from archsearch.client.ids import resolve_id
from archsearch.client.models import ModelsMixin
from archsearch.client.studies import StudiesMixin
from archsearch.client.usage import UsageMixin
from archsearch.client.webhooks import WebhooksMixin
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
from archsearch.schemas.logs import JobLogsPublic
from archsearch.schemas.queue import QueuePublic, WorkerPublic, WorkersPublic
from archsearch.specs import JobBase

DEFAULT_URL = "http://127.0.0.1:8000"
Model = TypeVar("Model", bound=BaseModel)


def read_retry(attempts: int) -> Retry:
    """GET and HEAD only: safe to send twice. Waits about 0.2, 0.4, 0.8 s (with jitter)."""
    return Retry(
        total=attempts,
        backoff_factor=0.1,
        allowed_methods=["GET", "HEAD"],
        status_forcelist=sorted(RETRY_STATUSES),
    )


class ArchsearchClient(FollowingMixin, StudiesMixin, ModelsMixin, WebhooksMixin, UsageMixin):
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
        spec: JobBase | Mapping[str, Any],
        priority: Priority | None = None,
        tags: Sequence[str] = (),
    ) -> JobPublic:
        """Submit a job spec (a typed spec such as `TrainJob(...)`, or its JSON as a mapping)
        with its tags; sent once, never retried. The server validates either form."""
        params: dict[str, Any] = {"tag": list(tags)}
        if priority:
            params["priority"] = priority
        body = spec.model_dump(mode="json") if isinstance(spec, JobBase) else dict(spec)
        response = self._send("POST", "/v1/jobs", json=body, params=params)
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
        study: JobRef | None = None,
        sort: str = "-created_at",
        study_jobs: bool = True,
    ) -> JobsPublic:
        """A page of jobs in `sort` order (newest first by default; `-test_accuracy`,
        `duration`, ...); `tag` keeps the jobs carrying every tag given, `study` the jobs of
        that study, `study_jobs=False` leaves out every study's jobs."""
        params: dict[str, Any] = {"limit": limit, "status": status or [], "method": method or []}
        params.update(tag=list(tag), sort=sort, study_jobs=str(study_jobs).lower())
        optional = {"cursor": cursor, "id_prefix": id_prefix, "study": study}
        params.update({name: str(value) for name, value in optional.items() if value})
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
        return resolve_id(id_or_prefix, "job", self._job_ids_starting)

    def _job_ids_starting(self, hex_digits: str) -> list[uuid.UUID]:
        return [job.id for job in self.list_jobs(id_prefix=hex_digits, limit=5).data]

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
        return self._stream_to(f"/v1/jobs/{job_id}/artifacts/{name}", name, destination)

    def _stream_to(self, path: str, name: str, destination: Path) -> Path:
        """Stream the file at `path` to `destination`, checking the server's sha256."""
        digest = hashlib.sha256()
        try:
            with self.http.stream("GET", path) as response:
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
