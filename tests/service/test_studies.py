"""Studies through the real API and Celery worker on PostgreSQL: a fixed study summarised
with its artifacts, refusals (invalid arm, cap), team isolation, and cancellation."""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from archsearch.cli.main import main
from archsearch.client import ArchsearchClient
from archsearch.client.errors import ApiError
from tests.service import procs
from tests.service.conftest import Accounts

pytestmark = pytest.mark.service

DIGITS = {"name": "digits", "train_subset": 400}
# 400 samples at batch size 100: 4 steps an epoch; 8 steps is two epochs of every arm.
BASE = {"training": {"batch_size": 100}}
MLP32 = {"name": "mlp", "hidden": [32]}


@pytest.fixture()
def carol(api_url: str, accounts: Accounts) -> Iterator[ArchsearchClient]:
    with ArchsearchClient(api_url, token=accounts.tokens["carol"]) as c:
        yield c


def small_study(**fields: object) -> dict[str, object]:
    return {
        "name": "small",
        "dataset": DIGITS,
        "base": BASE,
        "budget": {"steps": 8},
        "seeds": [0, 1],
        "arms": [
            {
                "label": "train-w16",
                "spec": {"method": "train", "model": {"name": "mlp", "hidden": [16]}},
            },
            {"label": "prune-d0.2", "spec": {"method": "prune", "density": 0.2, "model": MLP32}},
        ],
        **fields,
    }


def test_a_study_runs_its_arms_and_summarises_them(
    client: ArchsearchClient, api_url: str, token: str, tmp_path: Path
) -> None:
    submitted = client.submit_study(small_study())
    assert submitted.counts == {"queued": 4} and submitted.budget == {"steps": 8, "epochs": None}
    study = client.wait_study(submitted.id, timeout=120)

    assert (study.status, study.counts) == ("finished", {"succeeded": 4})
    arms = {arm.label: arm for arm in study.arms}
    assert set(arms) == {"train-w16", "prune-d0.2"}
    for arm in arms.values():
        assert arm.jobs == 2 and arm.test_accuracy is not None and arm.test_accuracy.n == 2
        # Each trial held training rows apart, and the front was chosen on them.
        assert arm.val_accuracy is not None and arm.val_accuracy.n == 2
        assert arm.optimizer_steps is not None and arm.optimizer_steps.mean == 8  # as planned
        assert not arm.over_budget and arm.compact_bytes is not None
    prune, train = arms["prune-d0.2"], arms["train-w16"]
    assert prune.parameters is not None and train.parameters is not None
    smallest = min(arms.values(), key=lambda arm: arm.parameters.mean)  # type: ignore[union-attr]
    assert smallest.on_front and study.pareto[0].label == smallest.label

    rows = list(
        csv.DictReader(io.StringIO(client.study_artifact(study.id, "results.csv").decode()))
    )
    assert len(rows) == 4 and {r["arm"] for r in rows} == set(arms)
    assert client.study_artifact(study.id, "pareto.png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.study_artifact(study.id, "curves.png")[:4] == b"\x89PNG"
    report = client.study_artifact(study.id, "report.md").decode()
    assert "Who wins at which size" in report and "prune-d0.2" in report
    assert "The front is chosen on validation accuracy" in report
    assert all(point.val_accuracy is not None for point in study.pareto)
    jobs = client.list_jobs(study=study.id).data  # exactly this study's jobs, with their arm
    assert len(jobs) == 4 and {job.study_id for job in jobs} == {study.id}
    assert sorted(job.study_arm or "" for job in jobs) == sorted(2 * list(arms))

    # The CLI shows the same study, and downloads its artifacts.
    runner = CliRunner(env={"ARCHSEARCH_TOKEN": token, "ARCHSEARCH_URL": api_url})
    listing = runner.invoke(main, ["study", "list"])
    assert listing.exit_code == 0 and str(study.id)[:8] in listing.output, listing.output
    status = runner.invoke(main, ["study", "status", str(study.id)])
    assert status.exit_code == 0 and "prune-d0.2" in status.output, status.output
    out = tmp_path / "results"
    results = runner.invoke(main, ["study", "results", str(study.id), "--out", str(out)])
    assert results.exit_code == 0, results.output
    assert {p.name for p in out.iterdir()} == set(study.artifacts) and len(study.artifacts) == 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(small_study(arms=[{"label": "x", "spec": {"method": "nope"}}])))
    refused = runner.invoke(main, ["study", "submit", str(bad)])
    assert refused.exit_code != 0 and "arms[x].method" in refused.output, refused.output


def test_an_invalid_arm_is_refused_naming_it(client: ArchsearchClient) -> None:
    arms = [{"label": "bad-density", "spec": {"method": "prune", "density": 2}}]
    with pytest.raises(ApiError) as caught:
        client.submit_study(small_study(arms=arms))
    assert caught.value.status == 422
    assert caught.value.detail[0].field == "arms[bad-density].density"  # type: ignore[union-attr]


def test_a_model_that_does_not_fit_the_dataset_names_the_arm(client: ArchsearchClient) -> None:
    arms = [
        {
            "label": "cnn4",
            "spec": {"method": "train", "model": {"name": "cnn", "channels": [4, 4, 4, 4]}},
        }
    ]
    with pytest.raises(ApiError) as caught:
        client.submit_study(small_study(arms=arms, budget=None))
    assert caught.value.status == 422
    assert caught.value.detail[0].field.startswith("arms[cnn4].")  # type: ignore[union-attr]


def test_a_study_over_the_cap_is_refused(client: ArchsearchClient) -> None:
    arms = [{"label": f"a{i}", "spec": {"method": "train"}} for i in range(30)]
    with pytest.raises(ApiError) as caught:
        client.submit_study(small_study(arms=arms, seeds=list(range(20))))
    assert caught.value.status == 422
    assert "600 jobs" in str(caught.value) and "ARCHSEARCH_STUDY_MAX_JOBS" in str(caught.value)


def test_another_teams_study_is_not_found(
    client: ArchsearchClient, carol: ArchsearchClient, api_url: str, accounts: Accounts
) -> None:
    study = client.submit_study(small_study(name="private", seeds=[0]))
    with pytest.raises(ApiError) as caught:
        carol.get_study(study.id)
    assert caught.value.status == 404
    with pytest.raises(ApiError) as cancel:
        carol.cancel_study(study.id)
    assert cancel.value.status == 404
    assert study.id not in {s.id for s in carol.list_studies()}
    assert carol.list_jobs(study=study.id).data == []  # the filter never crosses teams
    assert study.id in {s.id for s in client.list_studies()}
    headers = {"Authorization": f"Bearer {accounts.tokens['carol']}"}
    answer = httpx.get(f"{api_url}/v1/studies/{study.id}/artifacts/report.md", headers=headers)
    assert answer.status_code == 404
    assert httpx.get(f"{api_url}/v1/studies/{uuid.uuid4()}", headers=headers).status_code == 404
    client.wait_study(study.id, timeout=120)


def test_cancelling_a_study_cancels_its_queued_and_running_jobs(
    client: ArchsearchClient, worker: procs.Proc
) -> None:
    long = {"method": "train", "training": {"epochs": 200}, "dataset": {"name": "digits"}}
    arms = [{"label": f"long{i}", "spec": long} for i in range(3)]
    study = client.submit_study(small_study(name="doomed", arms=arms, budget=None, seeds=[0, 1]))
    procs.wait_log(worker, "running on worker", timeout=30)
    client.cancel_study(study.id)
    ended = client.wait_study(study.id, timeout=60)
    assert ended.status == "cancelled" and ended.cancel_requested
    assert set(ended.counts) == {"cancelled"} and sum(ended.counts.values()) == 6


def test_an_adaptive_study_whose_base_cannot_run_is_refused(client: ArchsearchClient) -> None:
    request = {
        "name": "bad-base",
        "dataset": DIGITS,
        "base": {"method": "train", "model": {"name": "cnn", "channels": [4, 4, 4, 4]}},
        "sampler": "random",
        "space": {"training.optimizer.lr": {"low": 1e-3, "high": 1e-1, "log": True}},
        "n_trials": 3,
    }
    with pytest.raises(ApiError) as caught:
        client.submit_study(request)
    assert caught.value.status == 422
    assert caught.value.detail[0].field.startswith("arms[base].")  # type: ignore[union-attr]
    assert not [s for s in client.list_studies() if s.name == "bad-base"]
