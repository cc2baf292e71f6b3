"""A running worker keeps its alive file fresh (every heartbeat, a third of a lease: one
second here), so `archsearch worker alive`, the pods' liveness probe, passes against it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.service import procs

pytestmark = pytest.mark.service


def test_a_running_worker_keeps_its_alive_file_fresh(
    worker: procs.Proc, service_env: dict[str, str]
) -> None:
    alive = Path(service_env["ARCHSEARCH_HOME"]) / "worker-alive"
    first = procs.wait_until(
        lambda: alive.exists() and alive.stat().st_mtime, timeout=30, what="a first heartbeat"
    )
    procs.wait_until(lambda: alive.stat().st_mtime > first, timeout=30, what="a second heartbeat")
    command = [sys.executable, "-m", "archsearch.cli.main", "worker", "alive", "--max-age", "10"]
    env = {**os.environ, **service_env}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert time.time() - alive.stat().st_mtime < 10
