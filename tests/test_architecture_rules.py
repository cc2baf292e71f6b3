"""The house rules of ARCHITECTURE.md, enforced: who may import whom, and no torch in the API."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT


def test_import_contracts_hold() -> None:
    result = subprocess.run(["lint-imports"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.split("Contracts:")[-1] or " 0 broken" in result.stdout


def test_api_process_never_loads_torch() -> None:
    code = (
        "import sys; import archsearch.api.app, archsearch.api.routes.jobs, archsearch.api.routes.artifacts, archsearch.api.routes.datasets, "
        "archsearch.jobs.domain.service, archsearch.jobs.domain.validation, archsearch.jobs.platform.broker, archsearch.client, archsearch.cli.main; "
        "loaded = [m for m in ('torch', 'archsearch.worker', 'archsearch.worker.tasks', 'archsearch.jobs.runtime') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_core_reads_no_environment() -> None:
    offenders = [
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "archsearch" / "core").rglob("*.py")
        if "os.environ" in path.read_text() or "getenv(" in path.read_text()
    ]
    assert offenders == []
