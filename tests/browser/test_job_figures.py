"""A finished job's page shows the run's device figures (figures.json): on this CPU worker,
the device "cpu", the process's peak resident memory during the run and its CPU use; and
every run of the job (the usage API's), a run handed back before the one that finished
included."""

from __future__ import annotations

import psycopg
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import EVENT_TIMEOUT_MS, ConsoleErrors
from tests.browser.test_dashboard import FAST, submit, wait_status
from tests.service.conftest import Accounts

pytestmark = [pytest.mark.service, pytest.mark.browser]


def test_a_job_page_shows_its_device_figures(
    alice: Page, api_url: str, accounts: Accounts, console_errors: ConsoleErrors
) -> None:
    token = accounts.tokens["alice"]
    job_id = submit(api_url, token, FAST)
    job = wait_status(api_url, token, job_id)
    assert job["status"] == "succeeded"
    assert job["latest_metrics"]["device_peak_memory_mb"] > 50  # a torch process, at least
    assert job["latest_metrics"]["device_utilization"] > 0
    alice.goto(f"{api_url}/jobs/{job_id}")
    figures = alice.locator("#figures")
    expect(figures).to_contain_text("cpu · ", timeout=EVENT_TIMEOUT_MS)
    expect(figures).to_contain_text("peak resident memory of the process during the run")
    expect(figures).to_contain_text("cores busy on average")
    alice.set_viewport_size({"width": 390, "height": 844})  # long CPU names wrap on a phone
    assert alice.evaluate("document.getElementById('device-figures').scrollWidth") <= 390
    assert console_errors == []


# The job's one real run becomes its second, after a run that was handed back (as a worker
# leaving on SIGTERM hands its job back) and had no figures to report.
RENUMBER_SQL = "UPDATE job_attempts SET attempt = 2 WHERE job_id = %(job)s"
EARLIER_RUN_SQL = """
INSERT INTO job_attempts (job_id, attempt, team_id, owner_id, method, device, worker,
                          started_at, last_seen_at, ended_at, seconds, device_share, given_back)
SELECT job_id, 1, team_id, owner_id, method, 'cpu', 'leaving-worker',
       started_at - interval '1 minute', started_at - interval '50 seconds',
       started_at - interval '50 seconds', 10, 0.25, true
FROM job_attempts WHERE job_id = %(job)s AND attempt = 2
"""


def test_a_job_page_shows_every_run_and_what_each_was_charged(
    alice: Page, api_url: str, pg_url: str, accounts: Accounts, console_errors: ConsoleErrors
) -> None:
    token = accounts.tokens["alice"]
    job_id = submit(api_url, token, FAST)
    assert wait_status(api_url, token, job_id)["status"] == "succeeded"
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(RENUMBER_SQL, {"job": job_id})
        connection.execute(EARLIER_RUN_SQL, {"job": job_id})
    alice.goto(f"{api_url}/jobs/{job_id}")
    rows = alice.locator("#runs tbody tr")
    expect(rows).to_have_count(2, timeout=EVENT_TIMEOUT_MS)
    handed_back = alice.locator('#runs tr[data-attempt="1"] td')
    expect(handed_back.nth(2)).to_have_text("leaving-worker")
    expect(handed_back.nth(4)).to_have_text("0.25")
    expect(handed_back.nth(5)).to_have_text("2.5 s")  # 10 s held at a quarter of the device
    expect(handed_back.nth(6)).to_have_text("–")  # killed runs report no figures
    expect(handed_back.nth(8)).to_have_text("handed back")
    finished = alice.locator('#runs tr[data-attempt="2"] td')
    expect(finished.nth(1)).to_contain_text("cpu · ")
    expect(finished.nth(6)).not_to_have_text("–")
    expect(finished.nth(7)).to_contain_text("cores")
    expect(alice.locator("#runs-total")).to_contain_text("charged in 2 runs")
    assert console_errors == []
