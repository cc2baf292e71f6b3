"""An eviction is not a failure: a worker (or `archsearch serve`) that gets SIGTERM hands its
running job back to the queue, without spending an attempt, and another run resumes it from
the checkpoint; the model is byte-identical to an uninterrupted run of the same seed.

The SIGTERMs go to the worker's main process only, as Kubernetes sends them to a pod's
PID 1; the worker forwards the request to its pool process. Half the workers have no grace
(`ARCHSEARCH_STOP_GRACE_SECONDS=0`: the job stops at its next step and resumes from its
previous checkpoint), half a long one (the job stops right after its next checkpoint).
"""

from __future__ import annotations

import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from archsearch.client import ArchsearchClient
from archsearch.schemas.jobs import JobPublic
from tests.embedded import start_embedded
from tests.service import procs
from tests.service.conftest import start_worker

pytestmark = [pytest.mark.service, pytest.mark.slow]

JOBS = 5
# On digits an epoch takes ~0.06 s on a quiet CPU: enough epochs that a SIGTERM sent in the
# first quarter lands seconds before the job could end, however fast the machine is.
EPOCHS = 60
SPEC = {
    "method": "train",
    "dataset": {"name": "digits"},
    "training": {"epochs": EPOCHS, "batch_size": 32},
    "label": "graceful",
}
GRACES = ("0", "30")  # seconds a stopping worker waits for the job's next checkpoint
ONE_THREAD = {"ARCHSEARCH_TORCH_THREADS": "1"}  # a tiny model: threads only add contention


def wait_until(predicate, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise TimeoutError(what)


@dataclass
class Run:
    """What one job's interrupted run looked like, for the test's printed table."""

    epochs_before_sigterm: int
    preempted_reason: str
    seconds_to_exit: float
    attempts: int


def fingerprint(client: ArchsearchClient, job: JobPublic) -> tuple[object, ...]:
    """Every metric point (name, step, value) and the model's sha256."""
    points = sorted(
        (name, p.step, p.value) for name, series in client.metrics(job.id).items() for p in series
    )
    (model,) = [a.sha256 for a in client.artifacts(job.id) if a.name == "model.safetensors"]
    return tuple(points), model


def sigterm_mid_run(
    client: ArchsearchClient, job_id: str, doomed: procs.Proc, rng: random.Random
) -> tuple[int, float]:
    """SIGTERM `doomed`'s main process after a random number of epochs (in the first
    quarter: the job must still be training when the signal lands)."""
    epochs = rng.randint(0, EPOCHS // 4)
    wait_until(
        lambda: (
            client.get_job(job_id).status == "running"
            and len(client.metrics(job_id).get("test_accuracy", [])) >= epochs
        ),
        120,
        "the job never ran",
    )
    time.sleep(rng.uniform(0.0, 0.3))
    assert client.get_job(job_id).status == "running"
    doomed.popen.send_signal(signal.SIGTERM)
    started = time.monotonic()
    doomed.popen.wait(timeout=90)
    return epochs, time.monotonic() - started


def test_sigterm_hands_jobs_back_without_spending_an_attempt(
    api_url: str,
    worker: procs.Proc,
    service_env: dict[str, str],
    log_dir: Path,
    token: str,
) -> None:
    worker.stop()  # the shared worker out: each job meets the worker this test stops
    rng, runs = random.Random(25), []
    current = start_worker({**service_env, **ONE_THREAD}, log_dir, "graceful")
    try:
        with ArchsearchClient(api_url, token=token) as client:
            reference = client.wait(client.submit(SPEC).id, timeout=240)
            assert reference.status == "succeeded" and reference.attempts == 1
            expected = fingerprint(client, reference)
            for i in range(JOBS):
                job_id = str(client.submit(SPEC).id)
                epochs, seconds = sigterm_mid_run(client, job_id, current, rng)
                assert current.popen.returncode == 0, current.log()
                job = client.get_job(job_id)
                assert (job.status, job.attempts) == ("queued", 0), current.log()
                grace = {"ARCHSEARCH_STOP_GRACE_SECONDS": GRACES[i % 2]}
                env = {**service_env, **ONE_THREAD, **grace}
                current = start_worker(env, log_dir, f"graceful{i}")
                final = client.wait(job_id, timeout=240)
                assert (final.status, final.attempts) == ("succeeded", 1), final.error
                events = [(e.to_status, e.reason) for e in client.events(job_id)]
                preempted = [r for s, r in events if r.startswith("preempted")]
                assert len(preempted) == 1 and ("queued", preempted[0]) in events, events
                assert "worker stopping (SIGTERM)" in preempted[0]
                assert not [r for _, r in events if "lease expired" in r]
                assert fingerprint(client, final) == expected
                runs.append(Run(epochs, preempted[0], seconds, final.attempts))
    finally:
        current.stop()
        worker.replace_with(start_worker(service_env, log_dir, "worker"))
    for run in runs:
        print(run)  # the figures (pytest -s)


def test_serve_hands_its_jobs_back_on_sigterm(
    tmp_path: Path, log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCHSEARCH_TORCH_THREADS", "1")  # the server inherits it
    port = procs.free_port()
    server = start_embedded(tmp_path / "home", port, log_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        with ArchsearchClient(url) as client:
            job_id = str(client.submit(SPEC).id)
            sigterm_mid_run(client, job_id, server, random.Random(7))
            assert server.popen.returncode == 0, server.log()
            server = start_embedded(tmp_path / "home", port, log_dir)
            final = client.wait(job_id, timeout=240)
            assert (final.status, final.attempts) == ("succeeded", 1), final.error
            reasons = [e.reason for e in client.events(job_id)]
            assert [r for r in reasons if r.startswith("preempted: server stopping")], reasons
            assert not [r for r in reasons if "server restarted" in r]
            history = client.metrics(job_id)["test_accuracy"]
            assert [p.step for p in history] == sorted({p.step for p in history})
            assert len(history) == EPOCHS
    finally:
        server.stop()
