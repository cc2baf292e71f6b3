"""What a worker's main process imports. Every pool process is forked from it and counts the
pages it inherits in its own resident memory, so the modules only the command line, the API,
the schema check or the webhook deliverer use stay out of it."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT

PARENT_ONLY = ("alembic", "optuna", "httpx", "fastapi", "uvicorn", "archsearch.api")


def modules_after(code: str) -> set[str]:
    probe = f"{code}; import sys; print(' '.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return set(done.stdout.split())


def test_the_worker_app_leaves_out_what_only_the_main_process_or_the_cli_needs() -> None:
    loaded = modules_after("import archsearch.worker.__main__")
    assert "archsearch.worker.app" in loaded and "torch" in loaded
    assert sorted(set(PARENT_ONLY) & loaded) == []


def test_the_optuna_driver_loads_when_a_study_advances_not_with_the_studies() -> None:
    loaded = modules_after("import archsearch.jobs.domain.studies.service")
    assert "optuna" not in loaded and "archsearch.jobs.domain.studies.adaptive" not in loaded
