"""What a worker's main process does as Celery starts it. The database schema is checked
before, by `archsearch worker` (which exits when it is behind: `tests/service/test_schema.py`);
a check in a Celery signal handler could not refuse, as Celery only logs a handler's error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

START = """
from celery import signals
from archsearch.jobs.platform.settings import Settings
from archsearch.worker.app import create_app

settings = Settings(home={home!r}, database_url={url!r}, broker_url="redis://127.0.0.1:6379/13")
create_app(settings)
failed = [repr(r) for _, r in signals.worker_init.send(sender=None) if isinstance(r, Exception)]
print("failed:", failed)
"""


def test_worker_init_preloads_without_touching_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'never-migrated.db'}"  # behind the code: no revision at all
    probe = START.format(home=str(tmp_path), url=url)
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "failed: []" in done.stdout, done.stdout + done.stderr[-2000:]
    assert not (tmp_path / "never-migrated.db").exists(), "nothing connected to the database"
