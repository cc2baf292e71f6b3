"""The `archsearch` client commands against the real API and worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsearch.cli.main import main
from tests.service import procs

pytestmark = pytest.mark.service


def test_submit_wait_list_status_download_cancel(
    api_url: str, worker: procs.Proc, token: str, tmp_path: Path
) -> None:
    runner = CliRunner(env={"ARCHSEARCH_TOKEN": token, "ARCHSEARCH_URL": api_url})
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps({"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 2}})
    )

    submitted = runner.invoke(main, ["submit", str(spec), "--wait"])
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.splitlines()[0].strip()
    assert "succeeded" in submitted.output

    assert job_id[:8] in runner.invoke(main, ["list", "--method", "train"]).output
    status = runner.invoke(main, ["status", job_id])
    assert status.exit_code == 0 and '"status": "succeeded"' in status.output

    downloaded = runner.invoke(main, ["download", job_id, "--out", str(tmp_path / "out")])
    assert downloaded.exit_code == 0, downloaded.output
    assert {"model.safetensors", "architecture.json", "metrics.json"} <= {
        p.name for p in (tmp_path / "out").iterdir()
    }

    refused = runner.invoke(main, ["cancel", job_id])
    assert refused.exit_code == 1 and "409" in refused.output

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"method": "train", "dataset": {"name": "minst"}}))
    rejected = runner.invoke(main, ["submit", str(bad)])
    assert (
        rejected.exit_code == 1
        and "dataset.name" in rejected.output
        and "available" in rejected.output
    )
