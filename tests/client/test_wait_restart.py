"""`wait()` outlasts a restart of the server it polls: a real `archsearch serve` is killed
while a job runs and started again on the same port; the same wait() call returns the
finished job."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from archsearch.client import ArchsearchClient
from archsearch.schemas.jobs import JobPublic
from tests.embedded import start_embedded
from tests.service import procs

pytestmark = pytest.mark.slow
LONG_JOB = {
    "method": "train",
    "dataset": {"name": "mnist", "train_subset": 4000},
    "training": {"epochs": 4, "batch_size": 64},
}


def test_wait_survives_a_server_restart(tmp_path: Path) -> None:
    home, port = tmp_path / "home", procs.free_port()
    server = start_embedded(home, port, tmp_path)
    running = threading.Event()
    result: list[JobPublic] = []

    def note(job: JobPublic) -> None:
        if job.status == "running" and job.step > 0:
            running.set()

    try:
        with ArchsearchClient(f"http://127.0.0.1:{port}") as client:
            job_id = client.submit(LONG_JOB).id
            waiter = threading.Thread(
                target=lambda: result.append(client.wait(job_id, timeout=300, on_update=note))
            )
            waiter.start()
            assert running.wait(timeout=180), "the job never started"
            server.kill()
            threading.Event().wait(2.0)  # the server stays away for a while
            assert waiter.is_alive(), "wait() gave up while the server was away"
            server = start_embedded(home, port, tmp_path)
            waiter.join(timeout=300)
    finally:
        server.stop()
    (final,) = result
    assert final.id == job_id and final.status == "succeeded", final.error
    assert final.attempts == 2  # the run the kill interrupted, and the one that finished it
