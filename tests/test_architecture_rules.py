"""The house rules of ARCHITECTURE.md, enforced: who may import whom, no torch in the API,
no import hidden in a function, no settings read at import, no system path in the engine."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

API_SIDE_MODULES = (
    "archsearch.api.app",
    "archsearch.api.presenters",
    "archsearch.api.routes.jobs",
    "archsearch.api.routes.artifacts",
    "archsearch.api.routes.datasets",
    "archsearch.api.routes.queue",
    "archsearch.jobs.domain.jobs.service",
    "archsearch.jobs.domain.jobs.validation",
    "archsearch.jobs.domain.datasets.service",
    "archsearch.jobs.domain.metadata",
    "archsearch.jobs.platform.broker",
    "archsearch.schemas.jobs",
    "archsearch.client",
    "archsearch.cli.main",
)
RUN_TIME_MODULES = ("torch", "archsearch.worker", "archsearch.jobs.runtime")
# Function-local imports that are not dodging a cycle or a contract, with their reason.
ALLOWED_LOCAL_IMPORTS = {
    # `serve` answers at once; torch loads when the embedded runner takes its first job.
    ("archsearch/jobs/runtime/runner.py", "archsearch.jobs.runtime.executor"),
    # ... and the torch thread count is set then too (device.py imports torch).
    ("archsearch/jobs/runtime/runner.py", "archsearch.jobs.runtime.device"),
    # boto3 costs every process 8 MB resident; only an s3:// store needs it.
    ("archsearch/jobs/platform/objects/__init__.py", "archsearch.jobs.platform.objects.s3"),
    # A worker's main process checks the schema in a child and starts webhooks after the pool
    # forked: every pool process inherits its modules and counts them in its resident memory.
    ("archsearch/worker/app.py", "archsearch.jobs.platform.migrate"),
    ("archsearch/worker/app.py", "archsearch.jobs.domain.webhooks.deliverer"),
    # Optuna (some 100 modules) serves adaptive studies alone; a pool process advances studies.
    ("archsearch/jobs/domain/studies/service.py", "archsearch.jobs.domain.studies"),
}


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )


def test_import_contracts_hold() -> None:
    # The running interpreter's own lint-imports: a PATH lookup could find another
    # environment's copy (the system's, from inside a virtualenv) and check nothing of ours.
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([lint_imports], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 broken" in result.stdout or "broken" not in result.stdout.split("Contracts:")[-1]


def test_api_process_never_loads_torch() -> None:
    code = (
        f"import importlib, sys; [importlib.import_module(m) for m in {API_SIDE_MODULES!r}]; "
        f"loaded = [m for m in {RUN_TIME_MODULES!r} if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr


def test_no_import_hides_in_a_function() -> None:
    local = set()
    for room in ("api", "jobs", "worker", "schemas", "migrations"):
        for path in (REPO_ROOT / "archsearch" / room).rglob("*.py"):
            for function in ast.walk(ast.parse(path.read_text())):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    if isinstance(node, ast.ImportFrom):
                        local.add((str(path.relative_to(REPO_ROOT)), node.module))
                    elif isinstance(node, ast.Import):
                        local |= {(str(path.relative_to(REPO_ROOT)), a.name) for a in node.names}
    assert local - ALLOWED_LOCAL_IMPORTS == set()


def test_the_worker_reads_settings_only_when_given_them() -> None:
    # An unusable setting in the environment: importing must not read it, building must use
    # exactly the Settings passed in.
    code = (
        "from archsearch.jobs.platform.settings import Settings\n"
        "from archsearch.worker.app import create_app\n"
        "app = create_app(Settings(broker_url='redis://127.0.0.1:6379/13', lease_seconds=5,"
        " queue_name='q-test'))\n"
        "assert 'archsearch.run_job' in app.tasks, sorted(app.tasks)\n"
        "assert app.conf.task_default_queue == 'q-test', app.conf.task_default_queue\n"
    )
    result = run_python(code, ARCHSEARCH_LEASE_SECONDS="not-a-number")
    assert result.returncode == 0, result.stderr


def test_core_reads_no_environment() -> None:
    offenders = [
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "archsearch" / "core").rglob("*.py")
        if "os.environ" in path.read_text() or "getenv(" in path.read_text()
    ]
    assert offenders == []


def test_core_names_no_system_path() -> None:
    system_path = re.compile(r"""["'](/usr|/etc|/opt|/var|/srv|/home)/""")
    offenders = [
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "archsearch" / "core").rglob("*.py")
        if system_path.search(path.read_text())
    ]
    assert offenders == []
