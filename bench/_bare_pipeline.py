"""The bare pipeline that archsearch's submit -> running is measured against
(`bench/service.py`): the same parts, built without archsearch.

- `api`: a FastAPI app served by uvicorn (one process, as `archsearch api`). `POST /jobs`
  inserts a row in PostgreSQL (created_at written by the handler, as archsearch's insert
  does), commits, then sends a Celery message; `GET /jobs/{id}` reads the row back.
- `worker`: a Celery worker on the same broker with archsearch's settings that matter here
  (prefork pool, one process, late acks, prefetch 1, JSON): the task marks the row running
  (started_at) and then succeeded.

    python bench/_bare_pipeline.py api PORT DATABASE_URL BROKER_URL QUEUE
    python bench/_bare_pipeline.py worker DATABASE_URL BROKER_URL QUEUE
"""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, create_engine, text

TASK = "bare.run"
CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS bare_jobs (
    id uuid PRIMARY KEY, status text NOT NULL, spec json NOT NULL,
    created_at timestamptz NOT NULL, started_at timestamptz, finished_at timestamptz
)"""


def engine_of(url: str) -> Engine:
    return create_engine("postgresql+psycopg://" + url.removeprefix("postgresql://"))


def celery_app(broker_url: str, queue: str) -> Any:
    from celery import Celery

    app = Celery("bare")
    app.conf.update(
        broker_url=broker_url,
        task_default_queue=queue,
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
    )
    return app


def serve(port: int, database_url: str, broker_url: str, queue: str) -> None:
    import uvicorn
    from fastapi import Body, FastAPI

    app, engine, celery = FastAPI(), engine_of(database_url), celery_app(broker_url, queue)

    @app.post("/jobs", status_code=201)
    def create_job(spec: dict[str, Any] = Body()) -> dict[str, str]:  # noqa: B008
        job_id = uuid.uuid4()
        with engine.begin() as connection:
            connection.execute(
                text("INSERT INTO bare_jobs VALUES (:id, 'queued', :spec, :now, NULL, NULL)"),
                {"id": job_id, "spec": _json(spec), "now": datetime.now(UTC)},
            )
        celery.send_task(TASK, args=[str(job_id)])
        return {"id": str(job_id), "status": "queued"}

    @app.get("/jobs/{job_id}")
    def read_job(job_id: uuid.UUID) -> dict[str, Any]:
        with engine.connect() as connection:
            row = connection.execute(
                text("SELECT status, created_at, started_at FROM bare_jobs WHERE id = :id"),
                {"id": job_id},
            ).one()
        return dict(row._mapping)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def work(database_url: str, broker_url: str, queue: str) -> None:
    from celery import signals

    app, engines = celery_app(broker_url, queue), []

    @signals.worker_process_init.connect(weak=False)
    def open_engine(**_: object) -> None:
        engines.append(engine_of(database_url))  # in the pool process, after the fork

    def run(job_id: str) -> None:
        with engines[0].begin() as connection:
            connection.execute(
                text("UPDATE bare_jobs SET status = 'running', started_at = :now WHERE id = :id"),
                {"id": job_id, "now": datetime.now(UTC)},
            )
        with engines[0].begin() as connection:
            connection.execute(
                text(
                    "UPDATE bare_jobs SET status = 'succeeded', finished_at = now() WHERE id = :id"
                ),
                {"id": job_id},
            )

    app.task(name=TASK)(run)
    app.worker_main(["worker", "--loglevel=INFO", "--concurrency=1", "-P", "prefork", "-Q", queue])


if __name__ == "__main__":
    if sys.argv[1] == "api":
        serve(int(sys.argv[2]), *sys.argv[3:6])
    else:
        work(*sys.argv[2:5])
