"""What the client commands print for people and for scripts: `submit --wait` ends with a
short summary (status, key metrics, where the files are) or, with `--json`, the job's JSON
alone; `archsearch usage` prints the usage report as a table or JSON, with the API's period
options; a study's dry run prints minutes measured on this server. Also the API's side of
the queue page: the team's limits and hold in `GET /v1/queue`, and a priority change
recorded as an event of the job (who and when)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session, sessionmaker

from archsearch.cli.main import main
from archsearch.client import ArchsearchClient
from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.platform.db import transaction
from tests.service import procs
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service
QUICK = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}


def test_submit_wait_summarises_and_json_is_for_scripts(
    api_url: str, worker: procs.Proc, token: str, tmp_path: Path
) -> None:
    runner = CliRunner(env={"ARCHSEARCH_TOKEN": token, "ARCHSEARCH_URL": api_url})
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(QUICK))
    human = runner.invoke(main, ["submit", str(spec), "--wait"])
    assert human.exit_code == 0, human.output
    lines = human.output.splitlines()
    job_id = lines[0].strip()
    assert any(line.startswith("succeeded in ") and "train on digits" in line for line in lines)
    (accuracy,) = [line.split() for line in lines if line.split()[:2] == ["test", "accuracy"]]
    assert 0 < float(accuracy[2]) <= 1, human.output
    assert f"{api_url}/v1/jobs/{job_id}/artifacts/NAME" in human.output
    assert f"archsearch download {job_id[:8]}" in human.output
    assert "model.safetensors" in human.output and "{" not in human.output  # no JSON wall

    scripted = runner.invoke(main, ["submit", str(spec), "--wait", "--json"])
    assert scripted.exit_code == 0, scripted.output
    ended = json.loads(scripted.output)  # the whole output is the JSON
    assert ended["status"] == "succeeded" and "test_accuracy" in ended["latest_metrics"]
    queued = json.loads(runner.invoke(main, ["submit", str(spec), "--json"]).output)
    assert queued["status"] in ("queued", "running", "succeeded")
    # Waited for, so that no job of this test runs into the next test's usage figures.
    assert runner.invoke(main, ["wait", queued["id"], "--json"]).exit_code == 0

    usage = runner.invoke(main, ["usage"])
    assert usage.exit_code == 0, usage.output
    assert "device time from" in usage.output
    assert any(line.split()[:2] == ["alpha", "cpu"] for line in usage.output.splitlines())
    by_method = json.loads(runner.invoke(main, ["usage", "--group-by", "method", "--json"]).output)
    assert by_method["group_by"] == "method"
    assert "train" in [row["group"] for row in by_method["data"]]
    period = ["usage", "--from", "2020-01-01", "--to", "2020-01-08", "--json"]
    assert json.loads(runner.invoke(main, period).output)["data"] == []
    half = runner.invoke(main, ["usage", "--from", "2020-01-01"])
    assert half.exit_code == 2 and "--to" in half.output

    # A study's dry run prices its train arm in minutes from the train jobs just measured.
    study = tmp_path / "study.json"
    study.write_text(json.dumps({"name": "s", "dataset": QUICK["dataset"], "base": QUICK}))
    plan = runner.invoke(main, ["study", "submit", str(study), "--dry-run"])
    assert plan.exit_code == 0, plan.output
    (row,) = [line.split("│") for line in plan.output.splitlines() if "│ train" in line]
    assert float(row[-2].split()[0]) > 0, plan.output  # minutes/job: measured, not "?"
    assert "wall time: " in plan.output and "past job(s) on cpu" in plan.output


def test_the_queue_shows_the_teams_limits_and_a_priority_change_is_an_event(
    api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    with transaction(sessions) as session:
        team_id = account_repo.team_by_name(session, "alpha").id
        placement = jobs.Placement(actor="alice", team_id=team_id)
        job_id = jobs.create_job(session, "train", QUICK, None, placement).id
    with (
        ArchsearchClient(api_url, token=accounts.tokens["alice"]) as alice,
        ArchsearchClient(api_url, token=accounts.admin_token) as admin,
    ):
        (team,) = alice.queue().teams
        assert (team.team, team.window_days, team.held, team.weekly_device_hours) == (
            "alpha",
            7,
            False,
            None,
        )
        assert {t.team for t in admin.queue().teams} >= {"alpha", "beta", "ops"}
        admin.set_priority(job_id, "urgent")
        admin.set_priority(job_id, "urgent")  # no change, no event
        alice.cancel(job_id)
        changes = [e for e in alice.events(job_id) if e.reason.startswith("priority")]
    assert [(e.reason, e.actor, e.to_status) for e in changes] == [
        ("priority normal -> urgent", "root", "queued")
    ]
