"""Workers die: a job whose worker is SIGKILLed mid-run is requeued when its lease lapses,
resumes from its checkpoint on another worker, and ends with one set of artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from archsearch.client import ArchsearchClient
from archsearch.jobs.domain.tables import Artifact
from tests.conftest import SUBSET_TRAIN
from tests.service import procs
from tests.service.conftest import start_worker

pytestmark = [pytest.mark.service, pytest.mark.slow]

EPOCHS = 12
# Long enough to kill mid-run (~0.5 s an epoch here: the shipped MNIST's 4,000 images at
# batch 16, 250 steps), short enough for CI.
RESUMABLE_JOB = {
    "method": "train",
    "dataset": {"name": "mnist", "train_subset": SUBSET_TRAIN},
    "training": {"epochs": EPOCHS, "batch_size": 16},
    "label": "sigkill",
}


def test_sigkilled_worker_job_resumes_and_finishes_once(
    api_url: str,
    worker: procs.Proc,
    service_env: dict[str, str],
    log_dir: Path,
    sessions: sessionmaker[Session],
    tmp_path: Path,
    token: str,
) -> None:
    # Take the shared worker out so the doomed one gets the job.
    worker.stop()
    doomed = start_worker(service_env, log_dir, "doomed")
    with ArchsearchClient(api_url, token=token) as client:
        job_id = client.submit(RESUMABLE_JOB).id
        # Kill after at least two epochs were checkpointed, before the job ends.
        procs.wait_until(
            lambda: 2 <= len(client.metrics(job_id).get("test_accuracy", [])) < EPOCHS - 1,
            120,
            "the job never checkpointed two epochs",
        )
        doomed.kill()  # SIGKILL to the whole process group: main process and pool child
        assert client.get_job(job_id).status == "running"

        rescuer = start_worker(service_env, log_dir, "rescuer")
        try:
            final = client.wait(job_id, timeout=240)
        finally:
            rescuer.stop()
            worker.replace_with(
                start_worker(service_env, log_dir, "worker")
            )  # restore the shared one

        assert final.status == "succeeded", final.error
        assert final.attempts == 2
        reasons = [(e.to_status, e.reason) for e in client.events(job_id)]
        assert ("queued", reasons[2][1]) == reasons[2] and "lease expired" in reasons[2][1]
        assert reasons[3][0] == "running" and "resuming from checkpoint" in reasons[3][1]
        assert reasons[-1][0] == "succeeded"

        # One set of artifacts, and a history with every epoch exactly once.
        with sessions() as session:
            names = list(session.scalars(select(Artifact.name).where(Artifact.job_id == job_id)))
        assert len(names) == len(set(names)) and {"model.safetensors", "metrics.json"} <= set(names)
        path = client.download_artifact(job_id, "metrics.json", tmp_path / "metrics.json")
        history = json.loads(path.read_text())["history"]
        assert [row["epoch"] for row in history] == [float(e) for e in range(1, EPOCHS + 1)]
        steps = [p.step for p in client.metrics(job_id)["test_accuracy"]]
        assert len(steps) == EPOCHS == len(set(steps))
