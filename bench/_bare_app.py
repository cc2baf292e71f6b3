"""The peers of the service benchmark, served by uvicorn exactly as `archsearch api` serves
ours (one process): a bare route returning a job-sized JSON body, written `async def` as anyone
would write a route that does no I/O (the cheapest FastAPI route: no thread-pool hop), the
same route as a sync handler at /sync/v1/jobs/{job_id} (the service bench prints it for
information: FastAPI runs it in its thread pool), and a bare
`FileResponse` of an artifact's file under the artifact root given as the second argument
(no database, no token, no checks), the floor an artifact download is measured against."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from fastapi.responses import FileResponse

app = FastAPI()
ROOT = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(".")
BODY = {
    "id": "",
    "method": "train",
    "status": "succeeded",
    "progress": 1.0,
    "latest_metrics": {"test_accuracy": 0.95},
    "spec": {"method": "train", "dataset": {"name": "digits"}},
    "error": None,
    "attempts": 1,
}


@app.get("/v1/jobs/{job_id}")
async def read_job(job_id: str) -> dict[str, object]:
    return {**BODY, "id": job_id}


@app.get("/sync/v1/jobs/{job_id}")
def read_job_sync(job_id: str) -> dict[str, object]:
    return {**BODY, "id": job_id}


@app.api_route("/v1/jobs/{job_id}/artifacts/{name}", methods=["GET", "HEAD"])
async def download(job_id: uuid.UUID, name: str) -> FileResponse:
    return FileResponse(ROOT / "jobs" / job_id.hex / name, filename=name)


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
