"""A team that does not use Python calls the service through a client generated from its
OpenAPI document. Here a standard generator (openapi-python-client) builds one from the live
`/openapi.json` of a team-mode API, and the generated code submits a job, waits for it and
downloads an artifact, exactly as its own README shows; the document is fetched with the
command our README gives, as written."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.service import procs

GENERATOR = Path(sys.executable).parent / "openapi-python-client"
README = (REPO_ROOT / "README.md").read_text()
PACKAGE = "archsearch_generated_client"


def readme_fetch_command(api_url: str) -> str:
    """The README's command that fetches the OpenAPI document, as written, aimed at `api_url`
    (the generator's own `--url` fetch has a fixed 5 s timeout that a busy server misses)."""
    (command,) = re.findall(r"`(curl [^`]*openapi\.json)`", README.replace("\n", " "))
    return command.replace("http://127.0.0.1:8000", api_url)


@pytest.fixture(scope="module")
def generated(api_url: str, tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    where = tmp_path_factory.mktemp("generated")
    document = where / "openapi.json"
    fetched = subprocess.run(
        readme_fetch_command(api_url), shell=True, capture_output=True, text=True, timeout=120,
        cwd=where,
    )  # fmt: skip
    assert fetched.returncode == 0 and document.exists(), fetched.stderr
    assert GENERATOR.exists(), f"{GENERATOR} is missing: pip install -e '.[dev]'"
    result = subprocess.run(
        [GENERATOR, "generate", "--path", document, "--meta", "none", "--output-path",
         where / PACKAGE],
        capture_output=True, text=True, timeout=300, cwd=where,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    # Every operation of jobs and artifacts is generated; the one warning allowed is the PNG
    # preview, whose content type the generator does not model.
    said = (result.stdout + result.stderr).splitlines()
    skipped = [line for line in said if line.startswith("WARNING")]
    assert skipped == [
        "WARNING parsing GET /v1/datasets/{dataset_id}/preview.png within datasets."
    ], said
    sys.path.insert(0, str(where))
    try:
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(where))


def operation(package: ModuleType, tag: str, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.api.{tag}.{name}")


def model(package: ModuleType, name: str) -> Any:
    return getattr(importlib.import_module(f"{package.__name__}.models"), name)


def test_a_generated_client_submits_waits_and_downloads(
    generated: ModuleType, api_url: str, worker: procs.Proc, token: str
) -> None:
    client = generated.AuthenticatedClient(base_url=api_url, token=token)
    train_job, dataset_ref = model(generated, "TrainJob"), model(generated, "DatasetRef")
    spec = train_job.from_dict(
        {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 2}}
    )
    assert isinstance(spec.dataset, dataset_ref)

    created = operation(generated, "jobs", "create_job").sync(client=client, body=spec)
    assert created.status.value == "queued", created

    job = wait_until_ended(generated, client, created.id)
    assert job.status.value == "succeeded", job
    assert job.latest_metrics["test_accuracy"] > 0.5

    listed = operation(generated, "artifacts", "list_artifacts").sync(client=client, job_id=job.id)
    assert "spec.json" in {artifact.name for artifact in listed.data}
    download = operation(generated, "artifacts", "download_artifact")
    answer = download.sync_detailed(client=client, job_id=job.id, name="spec.json")
    assert answer.status_code == 200
    assert json.loads(answer.content)["training"]["epochs"] == 2


def test_a_generated_client_reads_a_refusal_as_the_error_body(
    generated: ModuleType, api_url: str, token: str
) -> None:
    client = generated.AuthenticatedClient(base_url=api_url, token=token)
    spec = model(generated, "TrainJob").from_dict({"method": "train", "dataset": {"name": "minst"}})
    refused = operation(generated, "jobs", "create_job").sync_detailed(client=client, body=spec)
    assert refused.status_code == 422
    assert isinstance(refused.parsed, model(generated, "ErrorBody"))
    assert "minst" in json.dumps(refused.parsed.to_dict())


def wait_until_ended(package: ModuleType, client: Any, job_id: Any, timeout: float = 300) -> Any:
    read_job = operation(package, "jobs", "read_job")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = read_job.sync(client=client, job_id=job_id)
        if job.status.value in {"succeeded", "failed", "cancelled"}:
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not end within {timeout} s")
