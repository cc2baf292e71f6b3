"""The queue page's usage table in Debian's headless chromium: this week's device time of
the viewer's team, from `GET /v1/usage`, and no other team's."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from tests.browser.conftest import ConsoleErrors
from tests.service.test_usage import run_job

pytestmark = [pytest.mark.service, pytest.mark.browser]


def test_the_queue_page_shows_this_weeks_usage_of_the_team(
    alice: Page, api_url: str, sessions: sessionmaker[Session], console_errors: ConsoleErrors
) -> None:
    run_job(sessions, "alpha", "alice", "train", 0.3)
    run_job(sessions, "beta", "carol", "train", 0.3)
    alice.click("nav >> text=Queue")
    row = alice.locator('#usage tr[data-team="alpha"][data-device="cpu"]')
    expect(row).to_have_count(1)
    hours = float(row.locator("td").nth(2).inner_text())
    assert 0 < hours < 1
    expect(alice.locator('#usage tr[data-team="beta"]')).to_have_count(0)
    assert console_errors == []
