"""An eviction is not a failure: a worker (or `archsearch serve`) that gets SIGTERM hands its
running job back to the queue, without spending an attempt, and another run resumes it from
the checkpoint; the model is byte-identical to an uninterrupted run of the same seed.

The SIGTERMs go to the worker's main process only, as Kubernetes sends them to a pod's
PID 1; the worker forwards the request to its pool process. Ten jobs, ten SIGTERMs, each to
the worker running that job. Starting a worker (imports, warm-up) is what costs time, so warm
spare workers stand by: the job resumes on one at once, and the stopped worker's replacement
starts while the next jobs run. Workers alternate between no grace
(`ARCHSEARCH_STOP_GRACE_SECONDS=0`: the job stops at its next step and resumes from its
previous checkpoint) and a long one (the job stops right after its next checkpoint).
"""

from __future__ import annotations

import itertools
import random
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from archsearch.client import ArchsearchClient
from archsearch.schemas.jobs import JobPublic
from tests.embedded import start_embedded
from tests.service import procs
from tests.service.conftest import start_worker

pytestmark = [pytest.mark.service, pytest.mark.slow]

JOBS = 10
SPARES = 2  # warm workers beside the one running the job
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


@dataclass
class Run:
    """What one job's interrupted run looked like, for the test's printed table."""

    worker_pid: int
    epochs_before_sigterm: int
    grace: str
    preempted_reason: str
    attempts: int
    seconds_to_exit: float = 0.0


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
    epochs = wait_for_epochs(client, job_id, rng)
    doomed.popen.send_signal(signal.SIGTERM)
    started = time.monotonic()
    doomed.popen.wait(timeout=90)
    return epochs, time.monotonic() - started


def wait_for_epochs(client: ArchsearchClient, job_id: str, rng: random.Random) -> int:
    """Wait until the job runs and has a random number of epochs (first quarter) done."""
    epochs = rng.randint(0, EPOCHS // 4)
    procs.wait_until(
        lambda: (
            client.get_job(job_id).status == "running"
            and len(client.metrics(job_id).get("test_accuracy", [])) >= epochs
        ),
        240,
        "the job never ran",
        interval=0.05,
    )
    time.sleep(rng.uniform(0.0, 0.3))
    assert client.get_job(job_id).status == "running"
    return epochs


class Workers:
    """Live worker processes, started without waiting; each knows its grace."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.live: dict[int, tuple[procs.Proc, str]] = {}  # main pid -> (process, grace)
        self.exits: dict[int, tuple[procs.Proc, float]] = {}  # pid -> (process, seconds)
        self._graces = itertools.cycle(GRACES)
        self._numbers = itertools.count()

    def start(self) -> None:
        grace = next(self._graces)
        name = f"graceful{next(self._numbers)}"
        env = {**self.env, "ARCHSEARCH_STOP_GRACE_SECONDS": grace}
        args = ["worker", "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h", "--without-mingle"]
        proc = procs.start(name, args, env, self.log_dir)
        self.live[proc.popen.pid] = (proc, grace)

    def running(self, worker: str) -> tuple[procs.Proc, str]:
        """The worker whose pool process `worker` (host:pid) is."""
        pid = int(worker.rsplit(":", 1)[1])
        stat = Path(f"/proc/{pid}/stat").read_text()
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        return self.live[parent]

    def sigterm(self, proc: procs.Proc) -> None:
        """SIGTERM `proc`'s main process; its exit is timed in the background."""
        del self.live[proc.popen.pid]
        proc.popen.send_signal(signal.SIGTERM)
        sent = time.monotonic()

        def timed() -> None:
            proc.popen.wait(timeout=120)
            self.exits[proc.popen.pid] = (proc, time.monotonic() - sent)

        threading.Thread(target=timed, daemon=True).start()

    def stop_all(self) -> None:
        for proc, _ in self.live.values():
            proc.stop()


def interrupt_once(
    client: ArchsearchClient, workers: Workers, rng: random.Random
) -> tuple[str, Run]:
    """Submit a job, SIGTERM the worker that runs it mid-run, start its replacement."""
    job_id = str(client.submit(SPEC).id)
    epochs = wait_for_epochs(client, job_id, rng)
    worker = client.get_job(job_id).worker
    assert worker is not None
    doomed, grace = workers.running(worker)
    workers.sigterm(doomed)
    workers.start()
    return job_id, Run(doomed.popen.pid, epochs, grace, "", 0)


def assert_each_run_kept_its_figures(api_url: str, token: str, job_id: str) -> None:
    """The handed-back run and the one that finished each report what they used."""
    headers = {"Authorization": f"Bearer {token}"}
    answer = httpx.get(f"{api_url}/v1/usage/jobs/{job_id}", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    runs = answer.json()["runs"]
    assert [run["given_back"] for run in runs] == [True, False], runs
    for run in runs:
        assert run["device_name"] and run["peak_memory_mb"] > 0, run
        assert run["utilization"] is not None, run


def test_sigterm_hands_jobs_back_without_spending_an_attempt(
    api_url: str,
    worker: procs.Proc,
    service_env: dict[str, str],
    log_dir: Path,
    token: str,
) -> None:
    worker.stop()  # the shared worker out: each job meets the workers this test stops
    rng, runs = random.Random(25), []
    workers = Workers({**service_env, **ONE_THREAD}, log_dir)
    for _ in range(1 + SPARES):
        workers.start()
    try:
        with ArchsearchClient(api_url, token=token) as client:
            # The uninterrupted run goes on beside the first interrupted ones.
            reference_id, finals = client.submit(SPEC).id, []
            for _ in range(JOBS):
                job_id, run = interrupt_once(client, workers, rng)
                final = client.wait(job_id, timeout=240)
                assert (final.status, final.attempts) == ("succeeded", 1), final.error
                events = [(e.to_status, e.reason) for e in client.events(job_id)]
                preempted = [r for s, r in events if r.startswith("preempted")]
                assert len(preempted) == 1 and ("queued", preempted[0]) in events, events
                assert "worker stopping (SIGTERM)" in preempted[0]
                assert not [r for _, r in events if "lease expired" in r]
                run.preempted_reason, run.attempts = preempted[0], final.attempts
                assert_each_run_kept_its_figures(api_url, token, job_id)
                runs.append(run)
                finals.append(final)
            reference = client.wait(reference_id, timeout=240)
            assert reference.status == "succeeded" and reference.attempts == 1
            expected = fingerprint(client, reference)
            for final in finals:
                assert fingerprint(client, final) == expected, final.id
        procs.wait_until(
            lambda: len(workers.exits) == JOBS, 120, "a stopped worker never exited", interval=0.05
        )
        for stopped, _ in workers.exits.values():
            assert stopped.popen.returncode == 0, stopped.log()
    finally:
        workers.stop_all()
        worker.replace_with(start_worker(service_env, log_dir, "worker"))
    for run in runs:
        run.seconds_to_exit = workers.exits[run.worker_pid][1]
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
