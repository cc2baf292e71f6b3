"""`archsearch worker alive` and its light twin `python -m archsearch.server.alive`, the
worker pods' liveness probe: it passes while the alive
file that each worker heartbeat touches is younger than `--max-age`, and fails on a stale
or missing one. A real worker keeping the file fresh: tests/service/test_worker_alive.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner, Result

from archsearch.cli.main import main


def probe(home: Path, *args: str) -> Result:
    env = {"ARCHSEARCH_HOME": str(home), "ARCHSEARCH_WORKER_ALIVE_FILE": ""}
    return CliRunner().invoke(main, ["worker", "alive", *args], env=env)


def test_a_fresh_heartbeat_passes(tmp_path: Path) -> None:
    (tmp_path / "worker-alive").touch()
    result = probe(tmp_path, "--max-age", "60")
    assert result.exit_code == 0, result.output
    assert "worker alive" in result.output


def test_a_stale_heartbeat_fails_and_says_how_old_it_is(tmp_path: Path) -> None:
    alive = tmp_path / "worker-alive"
    alive.touch()
    ten_minutes_ago = time.time() - 600
    os.utime(alive, (ten_minutes_ago, ten_minutes_ago))
    result = probe(tmp_path, "--max-age", "180")
    assert result.exit_code == 1
    assert "worker stalled" in result.output and "limit 180s" in result.output
    # The same file passes a limit it is within.
    assert probe(tmp_path, "--max-age", "900").exit_code == 0


def test_no_heartbeat_yet_fails(tmp_path: Path) -> None:
    result = probe(tmp_path)
    assert result.exit_code == 1
    assert "no worker heartbeat yet" in result.output


def test_the_file_is_a_setting(tmp_path: Path) -> None:
    elsewhere = tmp_path / "run" / "alive"
    elsewhere.parent.mkdir()
    elsewhere.touch()
    env = {"ARCHSEARCH_HOME": str(tmp_path), "ARCHSEARCH_WORKER_ALIVE_FILE": str(elsewhere)}
    result = CliRunner().invoke(main, ["worker", "alive"], env=env)
    assert result.exit_code == 0, result.output


def light_probe(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The pods' probe, `python -m archsearch.server.alive`, which reports which of the
    CLI's and the server's heavy modules it loaded (none, or it costs a CPU-second again)."""
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['alive', *{list(args)!r}]\n"
        "try:\n    runpy.run_module('archsearch.server.alive', run_name='__main__')\n"
        "except SystemExit as done:\n    code = done.code\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})\n"
        "print('heavy:', heavy)\nsys.exit(code)\n"
    )
    env = {**os.environ, "ARCHSEARCH_HOME": str(home), "ARCHSEARCH_WORKER_ALIVE_FILE": ""}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


HEAVY = ("click", "rich", "torch", "sqlalchemy", "celery", "httpx", "numpy", "psycopg")


def test_the_pods_light_probe_answers_the_same_without_the_cli(tmp_path: Path) -> None:
    assert light_probe(tmp_path).returncode == 1
    alive = tmp_path / "worker-alive"
    alive.touch()
    fresh = light_probe(tmp_path, "--max-age", "60")
    assert fresh.returncode == 0, fresh.stderr
    assert "worker alive" in fresh.stdout and "heavy: []" in fresh.stdout
    ten_minutes_ago = time.time() - 600
    os.utime(alive, (ten_minutes_ago, ten_minutes_ago))
    stale = light_probe(tmp_path, "--max-age", "180")
    assert stale.returncode == 1 and "worker stalled" in stale.stdout
