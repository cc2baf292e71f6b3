"""`python -m archsearch.worker <device> [celery arguments]`: the Celery worker of one device
("cpu" or "cuda"), queues and settings from the environment.

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
    app.worker_main(["worker", "--loglevel=INFO", "--concurrency=1", "-Q", queues, *extra])


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2:])
