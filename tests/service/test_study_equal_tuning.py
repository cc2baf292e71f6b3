"""Equal tuning through the real API, worker and PostgreSQL: when arms sweep a training knob,
the baseline that leaves it unset runs at every value too, and the report says so."""

from __future__ import annotations

import httpx
import pytest

from archsearch.client import ArchsearchClient

pytestmark = pytest.mark.service

MLP32 = {"name": "mlp", "hidden": [32]}


def swept_prune_and_a_baseline() -> dict[str, object]:
    def prune(lr: float) -> dict[str, object]:
        spec = {"method": "prune", "model": MLP32, "training": {"optimizer": {"lr": lr}}}
        return {"label": f"prune-lr{lr:g}", "spec": spec}

    return {
        "name": "tuned",
        "dataset": {"name": "digits", "train_subset": 400},
        "base": {"training": {"batch_size": 100}},
        "budget": {"steps": 4},
        "seeds": [0],
        "arms": [prune(0.001), prune(0.01), {"label": "train", "spec": {"method": "train"}}],
    }


def test_the_baseline_gets_the_sweep_and_the_report_says_so(
    client: ArchsearchClient, api_url: str, token: str
) -> None:
    request = swept_prune_and_a_baseline()
    plan = client.plan_study(request)
    assert {arm.label for arm in plan.arms} == {
        "prune-lr0.001", "prune-lr0.01", "train,lr=0.001", "train,lr=0.01",
    }  # fmt: skip
    study = client.wait_study(client.submit_study(request).id, timeout=120)
    assert study.status == "finished" and study.counts == {"succeeded": 4}
    assert study.config["equal_tuning"] == {"training.optimizer.lr": [0.001, 0.01]}
    lrs = {
        job.label: job.spec["training"]["optimizer"]["lr"]
        for job in client.list_jobs(study=study.id).data
        if job.method == "train"
    }
    assert sorted(lrs.values()) == [0.001, 0.01]
    headers = {"Authorization": f"Bearer {token}"}
    report = httpx.get(f"{api_url}/v1/studies/{study.id}/artifacts/report.md", headers=headers)
    assert report.status_code == 200
    assert "Equal tuning: the arms sweep `training.optimizer.lr` over [0.001, 0.01]" in report.text
