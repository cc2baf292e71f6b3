"""A finished job's page shows the run's device figures (figures.json): on this CPU worker,
the device "cpu", the process's peak resident memory during the run and its CPU use."""

from __future__ import annotations

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
