"""A worker killed right after writing a checkpoint loses no metric point: the resumed job
has every epoch's points exactly once.

The doomed worker is the real `archsearch worker`, started through a small launcher that
SIGKILLs its whole process group the moment its second checkpoint is written (fault
injection at that one point; database, broker and torch stay real). The launcher also
lets metrics wait for the checkpoint instead of flushing on a timer, so an epoch's points
are never stored early by luck: before the fix the checkpoint went first and that epoch's
points vanished (seen once in 20 random kills; here every time).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from archsearch.client import ArchsearchClient
from tests.service import procs
from tests.service.conftest import start_worker

pytestmark = [pytest.mark.service, pytest.mark.slow]

EPOCHS = 5
KILL_AFTER_CHECKPOINT = 2
JOB = {
    "method": "train",
    "dataset": {"name": "digits"},
    "training": {"epochs": EPOCHS, "batch_size": 64},
    "label": "killed-after-checkpoint",
}

LAUNCHER = """
import os, runpy, signal, sys

from archsearch.jobs.platform.store import ArtifactStore
from archsearch.jobs.runtime.context import DbRunContext

DbRunContext.__init__.__defaults__ = (3600.0,)  # flush_seconds: only at checkpoints and the end
write_checkpoint = ArtifactStore.write_checkpoint
written = 0


def write_then_die(self, job_id, data):
    global written
    write_checkpoint(self, job_id, data)
    written += 1
    if written == {kill_after}:
        os.killpg(0, signal.SIGKILL)  # the worker and its pool child, as a crash would


ArtifactStore.write_checkpoint = write_then_die
# The worker's own entry point, in this process: `archsearch worker` would exec a fresh
# interpreter, which would not carry the patch above.
sys.argv = ["archsearch.worker", *sys.argv[1:]]
runpy.run_module("archsearch.worker", run_name="__main__")
"""


def test_worker_killed_after_a_checkpoint_loses_no_metric_point(
    api_url: str,
    worker: procs.Proc,
    service_env: dict[str, str],
    log_dir: Path,
    tmp_path: Path,
    token: str,
) -> None:
    launcher = tmp_path / "doomed_worker.py"
    launcher.write_text(LAUNCHER.replace("{kill_after}", str(KILL_AFTER_CHECKPOINT)))
    worker.stop()  # the doomed worker must be the one that takes the job
    argv = [sys.executable, str(launcher), "cpu", "-n", f"doomed-{uuid.uuid4().hex[:6]}@%h"]
    doomed = procs.start_program("doomed", argv, service_env, log_dir)
    try:
        procs.wait_log(doomed, "ready.", timeout=90)
        with ArchsearchClient(api_url, token=token) as client:
            job_id = client.submit(JOB).id
            doomed.popen.wait(timeout=180)  # it kills itself after the second checkpoint
            assert client.get_job(job_id).status == "running"
            with_checkpoint = client.metrics(job_id)["test_accuracy"]
            assert len(with_checkpoint) == KILL_AFTER_CHECKPOINT, with_checkpoint

            rescuer = start_worker(service_env, log_dir, "rescuer")
            try:
                final = client.wait(job_id, timeout=240)
            finally:
                rescuer.stop()
            assert final.status == "succeeded", final.error
            assert final.attempts == 2
            assert any("resuming from checkpoint" in e.reason for e in client.events(job_id))

            series = client.metrics(job_id)
            epochs = series["test_accuracy"]
            steps = [p.step for p in epochs]
            per_epoch = steps[0]
            assert steps == [per_epoch * (e + 1) for e in range(EPOCHS)], steps
            for name in ("test_loss", "lr"):
                assert [p.step for p in series[name]] == steps, name
    finally:
        doomed.stop()
        worker.replace_with(start_worker(service_env, log_dir, "worker"))
