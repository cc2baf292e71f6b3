"""`python -m archsearch.worker <device> [celery arguments]`: the Celery worker of one device
("cpu" or "cuda"), queues and settings from the environment, with one pool process per
slot (`ARCHSEARCH_WORKER_SLOTS`, default 1).

`archsearch worker` replaces itself with this (exec) once its checks passed, so that the
Celery main process is a fresh interpreter holding the worker's modules only: every pool
process is forked from it and counts its pages in its own resident set, and the command
line's modules (the API, uvicorn, Alembic, rich: some 15 MB) have no use there.
"""

from __future__ import annotations

import sys

from archsearch.jobs.platform.settings import Settings
from archsearch.worker.app import create_app


def run(device: str, extra: list[str]) -> None:
    settings = Settings(worker_device=device)
    queues = f"{settings.queue_name},{settings.queue_name}.{device}"
    app = create_app(settings)
    # One pool process per slot: each runs one job at a time, capped to its share of the
    # device (`ARCHSEARCH_WORKER_SLOTS`; docs/cluster.md, "Slots").
    slots = f"--concurrency={settings.worker_slots}"
    app.worker_main(["worker", "--loglevel=INFO", slots, "-Q", queues, *extra])


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2:])
