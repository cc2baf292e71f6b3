"""A small Python client of the archsearch REST API; the CLI is built on it.

client = ArchsearchClient("http://127.0.0.1:8000")
job = client.submit({"method": "train", "dataset": {"name": "digits"}})
job = client.wait(job["id"])
client.download_all(job["id"], "out/")
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

TERMINAL = {"succeeded", "failed", "cancelled"}
DEFAULT_URL = "http://127.0.0.1:8000"


class ApiError(Exception):
    """An error answer of the API, with its status, code and detail."""

    def __init__(self, status: int, error: str, detail: Any) -> None:
        super().__init__(f"HTTP {status} {error}: {format_detail(detail)}")
        self.status, self.error, self.detail = status, error, detail


def format_detail(detail: Any) -> str:
    if isinstance(detail, list):
        return "; ".join(f"{d.get('field')}: {d.get('message')}" for d in detail)
    return str(detail)


class ArchsearchClient:
    def __init__(
        self, url: str = DEFAULT_URL, timeout: float = 30.0, token: str | None = None
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout, headers=headers)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ArchsearchClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                body = response.json()
                raise ApiError(response.status_code, body.get("error", "error"), body.get("detail"))
            except ValueError:
                raise ApiError(response.status_code, "error", response.text) from None
        return response.json()

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", "/v1/jobs", json=spec)  # type: ignore[no-any-return]

    def get_job(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/jobs/{job_id}")  # type: ignore[no-any-return]

    def list_jobs(
        self,
        status: list[str] | None = None,
        method: list[str] | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit, "status": status or [], "method": method or []}
        if cursor:
            params["cursor"] = cursor
        return self._json("GET", "/v1/jobs", params=params)  # type: ignore[no-any-return]

    def iter_jobs(self, **filters: Any) -> Iterator[dict[str, Any]]:
        cursor = None
        while True:
            page = self.list_jobs(cursor=cursor, **filters)
            yield from page["data"]
            if not (cursor := page["next_cursor"]):
                return

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{job_id}/cancel")  # type: ignore[no-any-return]

    def metrics(self, job_id: str) -> dict[str, list[dict[str, float]]]:
        return self._json("GET", f"/v1/jobs/{job_id}/metrics")["series"]  # type: ignore[no-any-return]

    def events(self, job_id: str) -> list[dict[str, Any]]:
        return self._json("GET", f"/v1/jobs/{job_id}/events")["data"]  # type: ignore[no-any-return]

    def artifacts(self, job_id: str) -> list[dict[str, Any]]:
        return self._json("GET", f"/v1/jobs/{job_id}/artifacts")["data"]  # type: ignore[no-any-return]

    def datasets(self) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/datasets")["data"]  # type: ignore[no-any-return]

    def wait(
        self,
        job_id: str,
        poll: float = 0.5,
        timeout: float | None = None,
        on_update: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Poll until the job is terminal; returns the final job."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get_job(job_id)
            if on_update:
                on_update(job)
            if job["status"] in TERMINAL:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job['status']} after {timeout}s")
            time.sleep(poll)

    def download_artifact(self, job_id: str, name: str, destination: Path) -> Path:
        """Stream one artifact to `destination`, checking its sha256."""
        digest = hashlib.sha256()
        with self.http.stream("GET", f"/v1/jobs/{job_id}/artifacts/{name}") as response:
            if response.status_code >= 400:
                response.read()
                body = response.json()
                raise ApiError(response.status_code, body.get("error", "error"), body.get("detail"))
            destination.parent.mkdir(parents=True, exist_ok=True)
            with open(destination, "wb") as handle:
                for chunk in response.iter_bytes():
                    digest.update(chunk)
                    handle.write(chunk)
            expected = response.headers.get("x-content-sha256")
        if expected and digest.hexdigest() != expected:
            destination.unlink()
            raise ApiError(200, "checksum_mismatch", f"{name}: sha256 differs from the server's")
        return destination

    def download_all(self, job_id: str, folder: str | Path) -> list[Path]:
        folder = Path(folder)
        return [
            self.download_artifact(job_id, a["name"], folder / a["name"])
            for a in self.artifacts(job_id)
        ]

    # ---- uploaded datasets (issue 7) --------------------------------------------------

    def upload_dataset(
        self, path: str | Path, timeout: float = 600.0, **options: Any
    ) -> dict[str, Any]:
        """Upload a .npz, .csv or .zip file (streamed); options: name, label_column,
        test_fraction, split_seed, num_classes. The same file twice gives the same dataset."""
        path = Path(path)
        fields = {k: str(v) for k, v in options.items() if v is not None}
        with open(path, "rb") as handle:
            return self._json(  # type: ignore[no-any-return]
                "POST",
                "/v1/datasets",
                files={"file": (path.name, handle)},
                data=fields,
                timeout=timeout,
            )

    def get_dataset(self, dataset_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/datasets/{dataset_id}")  # type: ignore[no-any-return]

    def delete_dataset(self, dataset_id: str) -> None:
        response = self.http.delete(f"/v1/datasets/{dataset_id}")
        if response.status_code >= 400:
            body = response.json()
            raise ApiError(response.status_code, body.get("error", "error"), body.get("detail"))

    def dataset_preview(self, dataset_id: str) -> bytes:
        response = self.http.get(f"/v1/datasets/{dataset_id}/preview.png")
        if response.status_code >= 400:
            body = response.json()
            raise ApiError(response.status_code, body.get("error", "error"), body.get("detail"))
        return response.content
