"""The `archsearch` client commands against the real API and worker."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsearch.cli.main import main
from archsearch.client import ApiError, ArchsearchClient
from tests.service import procs

pytestmark = pytest.mark.service
QUICK = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}
LOCAL_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}")


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

    # `list` shows a prefix that every command takes, and times with their offset.
    listing = runner.invoke(main, ["list", "--method", "train"]).output
    (row,) = [line for line in listing.splitlines() if line.split()[:1] == [job_id[:8]]]
    assert "succeeded" in row and LOCAL_TIME.search(row), listing
    shown = job_id[:8]
    status = runner.invoke(main, ["status", shown])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["id"] == job_id
    assert json.loads(status.output)["status"] == "succeeded"

    downloaded = runner.invoke(main, ["download", shown, "--out", str(tmp_path / "out")])
    assert downloaded.exit_code == 0, downloaded.output
    assert {"model.safetensors", "architecture.json", "metrics.json"} <= {
        p.name for p in (tmp_path / "out").iterdir()
    }
    assert runner.invoke(main, ["wait", job_id[:12]]).exit_code == 0

    # `logs` prints the worker's lines of the run, first to last; --follow ends with the job.
    for args in (["logs", shown], ["logs", "-f", shown]):
        logs = runner.invoke(main, args)
        assert logs.exit_code == 0, logs.output
        lines = logs.output.splitlines()
        assert f"job {job_id} running on worker" in lines[0] and LOCAL_TIME.match(lines[0])
        assert lines[-1].endswith("run ended: succeeded (finished)"), logs.output
        # One line per epoch, with the loss and the accuracy, and the phase it belongs to.
        assert any("phase train starts at epoch 1 of 2" in line for line in lines), logs.output
        assert any("train epoch 2/2: train_loss" in line for line in lines), logs.output

    # `list --sort` orders on the server; owners show by name.
    ranked = runner.invoke(main, ["list", "--sort", "-test_accuracy", "--limit", "5"])
    assert ranked.exit_code == 0, ranked.output
    assert "alice" in ranked.output and "params" in ranked.output

    refused = runner.invoke(main, ["cancel", shown])
    assert refused.exit_code == 1 and "409" in refused.output

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"method": "train", "dataset": {"name": "minst"}}))
    rejected = runner.invoke(main, ["submit", str(bad)])
    assert (
        rejected.exit_code == 1
        and "dataset.name" in rejected.output
        and "available" in rejected.output
    )


def test_wait_exits_3_when_the_job_succeeded_with_a_usefulness_warning(
    api_url: str, worker: procs.Proc, token: str, tmp_path: Path
) -> None:
    runner = CliRunner(env={"ARCHSEARCH_TOKEN": token, "ARCHSEARCH_URL": api_url})
    spec = tmp_path / "collapsed.json"
    # A weight-free network with almost no links left predicts one class: a warning, not a
    # failure (the job succeeded).
    collapsed = {"method": "prune", "weights": "free", "density": 1e-4, "training": {"epochs": 1}}
    spec.write_text(json.dumps({**collapsed, "dataset": {"name": "digits"}}))
    submitted = runner.invoke(main, ["submit", str(spec), "--wait"])
    assert submitted.exit_code == 3, submitted.output
    assert "succeeded" in submitted.output and "warning:" in submitted.output
    job_id = submitted.output.splitlines()[0].strip()
    waited = runner.invoke(main, ["wait", job_id[:12]])
    assert waited.exit_code == 3 and "collapsed_predictions" in waited.output, waited.output


def test_an_ambiguous_or_unknown_prefix_is_one_line(
    api_url: str, worker: procs.Proc, token: str
) -> None:
    runner = CliRunner(env={"ARCHSEARCH_TOKEN": token, "ARCHSEARCH_URL": api_url})
    with ArchsearchClient(api_url, token=token) as client:
        # 17 ids cannot all start with different hex digits: submit until two share one.
        by_first: dict[str, list[str]] = {}
        while not any(len(ids) > 1 for ids in by_first.values()):
            job = client.submit(QUICK)
            by_first.setdefault(str(job.id)[0], []).append(str(job.id))
        digit = next(d for d, ids in by_first.items() if len(ids) > 1)
        for ids in by_first.values():
            for job_id in ids:
                with contextlib.suppress(ApiError):  # 409: it finished already
                    client.cancel(job_id)

    ambiguous = runner.invoke(main, ["status", digit])
    assert ambiguous.exit_code == 1
    (line,) = ambiguous.output.splitlines()
    assert line.startswith(f"error: job id '{digit}' is ambiguous")
    candidates = re.findall(r"[0-9a-f]{8}-[0-9a-f-]{27}", line)
    assert len(candidates) >= 2 and all(c.startswith(digit) for c in candidates)

    unknown = runner.invoke(main, ["cancel", "0123456789ab0123456789ab"])
    assert unknown.exit_code == 1 and "no job id starts with" in unknown.output
    not_hex = runner.invoke(main, ["wait", "mnist"])
    assert not_hex.exit_code == 1 and "is not a job id" in not_hex.output
