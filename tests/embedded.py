"""A real `archsearch serve` process on a free port with its own data home, for the tests
of the light side (client, CLI, README) that need a server to talk to."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import TEST_DATASETS
from tests.service import procs

TEAM_SETTINGS = ("ARCHSEARCH_DATABASE_URL", "ARCHSEARCH_BROKER_URL", "ARCHSEARCH_ARTIFACT_ROOT")


def embedded_env(home: Path) -> dict[str, str]:
    env = {"ARCHSEARCH_HOME": str(home), "ARCHSEARCH_DATA_DIR": str(TEST_DATASETS)}
    return env | {name: "" for name in TEAM_SETTINGS}  # nothing of a team setup leaks in


def start_embedded(home: Path, port: int, log_dir: Path) -> procs.Proc:
    """Start `archsearch serve --port PORT` and return once it answers /readyz."""
    proc = procs.start("serve", ["serve", "--port", str(port)], embedded_env(home), log_dir)
    procs.wait_http(f"http://127.0.0.1:{port}/readyz", proc, timeout=120)
    return proc
