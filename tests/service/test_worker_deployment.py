"""A Celery worker's job writes its ONNX file and check from the child process its pool
process forks for them (`core.deploy.forked`), as one process wrote them."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime
import pytest

from archsearch.client import ArchsearchClient

pytestmark = pytest.mark.slow


def test_a_workers_job_exports_and_checks_its_onnx_model(
    client: ArchsearchClient, tmp_path: Path
) -> None:
    job_id = client.submit({"method": "train", "dataset": {"name": "digits"}}).id
    job = client.wait(job_id, timeout=180)
    assert job.status == "succeeded", job.error
    onnx_file = client.download_artifact(job.id, "model.onnx", tmp_path / "model.onnx")
    deployment = client.download_artifact(job.id, "deployment.json", tmp_path / "d.json")
    record = json.loads(deployment.read_text())["onnx"]
    assert record["exported"], record
    assert 0 <= record["max_abs_diff"] < 1e-4
    assert record["latency"]["batch_1_s"] > 0
    session = onnxruntime.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].name == "input"
