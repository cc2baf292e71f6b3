"""The Kubernetes manifests rendered by `kubectl kustomize`, and the tools that check them.

No cluster: every overlay is rendered offline and validated against the Kubernetes schemas
(`kubernetes-validate`), and KEDA's and Kueue's CRDs (`check-jsonschema`, the CRDs kept in
`schemas/`).
A missing tool fails the tests; the Python ones are installed here when absent.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts.tables import Team, User
from archsearch.jobs.domain.tables import Job, WorkerRecord
from tests.conftest import REPO_ROOT
from tests.service.conftest import pg_url, sessions  # noqa: F401 (fixtures, found by name)

K8S_ROOT = REPO_ROOT / "deploy" / "k8s"
OVERLAYS = ("cpu", "gpu", "keda", "kueue")
SCHEMAS = Path(__file__).parent / "schemas"
# The same pins as the dev extra in pyproject.toml.
PYTHON_TOOLS = {
    "kubernetes_validate": "kubernetes-validate==1.37.0",
    "check_jsonschema": ("check-jsonschema==0.39.0"),
}


def ensure_python_tool(module: str) -> None:
    if importlib.util.find_spec(module) is not None:
        return
    install = [sys.executable, "-m", "pip", "install", PYTHON_TOOLS[module]]
    result = subprocess.run(install, capture_output=True, text=True, timeout=600)
    if result.returncode != 0 or importlib.util.find_spec(module) is None:
        pytest.fail(f"pip install {PYTHON_TOOLS[module]} failed:\n{result.stderr[-2000:]}")


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail(
            "kubectl is missing: install it (https://kubernetes.io/docs/tasks/tools/); "
            "its `kubectl kustomize` renders the manifests"
        )
    return found


def render(overlay: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [kubectl(), "kustomize", str(K8S_ROOT / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        pytest.fail(f"kubectl kustomize overlays/{overlay} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    """Every overlay's objects, as `kubectl kustomize` renders them."""
    return {overlay: render(overlay) for overlay in OVERLAYS}


@pytest.fixture
def session(sessions: sessionmaker[Session]) -> Iterator[Session]:  # noqa: F811
    """An empty queue and fleet (inside this transaction), rolled back after the test."""
    with sessions() as session:
        for model in (Job, WorkerRecord, User, Team):
            session.query(model).delete()
        yield session
        session.rollback()
