"""The peer of the service benchmark: a bare FastAPI route returning a job-sized JSON body,
served by uvicorn exactly as `archsearch api` serves ours (one process, sync handler)."""

from __future__ import annotations

import sys

import uvicorn
from fastapi import FastAPI

app = FastAPI()
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
def read_job(job_id: str) -> dict[str, object]:
    return {**BODY, "id": job_id}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
