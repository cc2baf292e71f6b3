"""`archsearch serve` with no configuration: SQLite, local artifacts, local runner."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from archsearch.client import ArchsearchClient
from tests.conftest import SUBSET_TRAIN, TEST_DATASETS
from tests.service import procs

pytestmark = pytest.mark.slow


def start_embedded(home: Path, port: int, log_dir: Path) -> procs.Proc:
    env = {
        "ARCHSEARCH_HOME": str(home),
        "ARCHSEARCH_DATA_DIR": str(TEST_DATASETS),
        "ARCHSEARCH_LEASE_SECONDS": "3",
    }
    for name in ("ARCHSEARCH_DATABASE_URL", "ARCHSEARCH_BROKER_URL", "ARCHSEARCH_ARTIFACT_ROOT"):
        env[name] = ""  # make sure nothing of a team setup leaks in
    proc = procs.start("serve", ["serve", "--port", str(port)], env, log_dir)
    procs.wait_http(f"http://127.0.0.1:{port}/readyz", proc)
    return proc


def test_embedded_serve_runs_jobs_and_survives_a_restart(tmp_path: Path) -> None:
    home, port = tmp_path / "home", procs.free_port()
    server = start_embedded(home, port, tmp_path)
    try:
        with ArchsearchClient(f"http://127.0.0.1:{port}") as client:
            quick = client.wait(
                client.submit({"method": "train", "dataset": {"name": "digits"}}).id, timeout=120
            )
            assert quick.status == "succeeded", quick.error
            files = client.download_all(quick.id, tmp_path / "quick")
            # model.onnx: the export's child process, forked from a runner thread of the server
            assert {"model.safetensors", "architecture.json", "curves.png", "model.onnx"} <= {
                p.name for p in files
            }

            # A job interrupted by a crash of the whole server resumes when it comes back.
            long_spec = {
                "method": "train",
                "dataset": {"name": "mnist", "train_subset": SUBSET_TRAIN},
                "training": {"epochs": 8, "batch_size": 16},  # ~0.5 s an epoch
            }
            long_id = client.submit(long_spec).id
            deadline = time.monotonic() + 120
            while len(client.metrics(long_id).get("test_accuracy", [])) < 2:
                assert time.monotonic() < deadline, "no epoch finished"
                time.sleep(0.1)
        server.kill()
        server = start_embedded(home, port, tmp_path)
        with ArchsearchClient(f"http://127.0.0.1:{port}") as client:
            final = client.wait(long_id, timeout=180)
            assert final.status == "succeeded", final.error
            assert final.attempts == 2
            assert any("resuming from checkpoint" in e.reason for e in client.events(long_id))
    finally:
        server.stop()
    assert (home / "archsearch.db").is_file()
    with sqlite3.connect(home / "archsearch.db") as db:
        assert db.execute("select count(*) from jobs where status = 'succeeded'").fetchone()[0] == 2


def test_embedded_mode_without_tokens_refuses_a_public_address(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {"ARCHSEARCH_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "archsearch.cli.main", "serve", "--host", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "only binds to localhost" in result.stderr
