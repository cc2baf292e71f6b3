"""A run's device figures through the service: measured by the worker that ran the job,
kept in its metrics and in `figures.json`, and exported to Prometheus."""

from __future__ import annotations

import json

import httpx
import pytest

from archsearch.client import ArchsearchClient
from tests.service import procs
from tests.service.conftest import Accounts
from tests.service.test_metrics import DIGITS_JOB, delta, scrape, settled_scrape

pytestmark = pytest.mark.service


def test_a_run_records_its_figures_and_metrics_export_them(
    api_url: str, worker: procs.Proc, accounts: Accounts, tmp_path
) -> None:
    admin = accounts.admin_token
    before = settled_scrape(api_url, admin)
    with ArchsearchClient(api_url, token=accounts.tokens["alice"]) as client:
        job = client.wait(client.submit(DIGITS_JOB).id, timeout=180)
        assert job.status == "succeeded", job.error
        path = client.download_artifact(job.id, "figures.json", tmp_path / "figures.json")
    after = scrape(api_url, admin)
    figures = json.loads(path.read_text())
    assert figures["device"] == "cpu" and figures["device_name"]
    assert figures["peak_memory_kind"] == "rss_since_run_start"
    assert figures["utilization_kind"] == "process_cpu_time_over_wall"
    peak_mb = job.latest_metrics["device_peak_memory_mb"]
    assert peak_mb == pytest.approx(figures["peak_memory_bytes"] / 2**20)
    assert peak_mb > 50  # at least the resident part of a process that imported torch
    assert job.latest_metrics["device_utilization"] == pytest.approx(figures["utilization"])

    peak = "archsearch_job_peak_memory_bytes"
    assert delta(before, after, f"{peak}_count", method="train") == 1
    assert delta(before, after, f"{peak}_sum", method="train") == pytest.approx(
        figures["peak_memory_bytes"], rel=1e-6
    )
    busy = "archsearch_job_device_utilization"
    assert delta(before, after, f"{busy}_count", method="train") == 1

    # The usage of that job, run by run: its one run, charged whole, with its figures.
    def job_usage(user: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {accounts.tokens[user]}"}
        return httpx.get(f"{api_url}/v1/usage/jobs/{job.id}", headers=headers)

    answer = job_usage("alice")
    assert answer.status_code == 200, answer.text
    (run,) = answer.json()["runs"]
    assert (run["attempt"], run["device"], run["device_share"]) == (1, "cpu", 1.0)
    assert run["device_seconds"] == pytest.approx(answer.json()["device_seconds"])
    assert run["peak_memory_mb"] == pytest.approx(peak_mb)
    assert run["utilization"] == pytest.approx(figures["utilization"])
    other_team = job_usage("carol")  # carol is in another team: the job is not hers to see
    assert other_team.status_code == 404 and other_team.json()["error"] == "not_found"
