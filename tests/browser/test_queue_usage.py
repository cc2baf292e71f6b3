"""The queue page in Debian's headless chromium: the device time of the viewer's team in the
quota's window (the last 7 days, rolling), from `GET /v1/usage`, and no other team's; the
team's limits (running against its limit, device-hours against its quota) and its hold;
the jobs table says what Duration counts; a priority change shows on the job page, with who."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.usage import quota
from archsearch.jobs.platform.db import transaction
from tests.browser.conftest import ConsoleErrors, sign_in
from tests.service import procs
from tests.service.conftest import Accounts
from tests.service.test_usage import run_job

pytestmark = [pytest.mark.service, pytest.mark.browser]


def test_the_queue_page_shows_this_weeks_usage_of_the_team(
    alice: Page, api_url: str, sessions: sessionmaker[Session], console_errors: ConsoleErrors
) -> None:
    run_job(sessions, "alpha", "alice", "train", 0.3)
    run_job(sessions, "beta", "carol", "train", 0.3)
    # The jobs table (where sign-in lands) says what its Duration counts.
    duration = alice.locator('#jobs th[data-sort="duration"]')
    expect(duration).to_have_attribute("title", re.compile("first claimed.*back in the queue"))
    alice.click("nav >> text=Queue")
    row = alice.locator('#usage tr[data-team="alpha"][data-device="cpu"]')
    expect(row).to_have_count(1)
    hours = float(row.locator("td").nth(2).inner_text())
    assert 0 < hours < 1
    expect(alice.locator('#usage tr[data-team="beta"]')).to_have_count(0)
    expect(alice.locator("#usage-window")).to_contain_text("the last 7 days, rolling")
    team = alice.locator('#teams tr[data-team="alpha"]')
    expect(team.locator('[data-col="running"]')).to_contain_text(" / ")
    expect(team.locator('[data-col="hours"]')).to_contain_text("h / no quota")
    expect(team.locator('[data-col="held"]')).to_have_text("not held")
    expect(alice.locator('#teams tr[data-team="beta"]')).to_have_count(0)
    assert console_errors == []


def test_an_admin_sees_a_held_team_and_why(
    browser: Browser,
    api_url: str,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    worker: procs.Proc,
) -> None:
    run_job(sessions, "ops", "root", "train", 0.3)
    with transaction(sessions) as session:  # a quota the team has used up: held
        account_repo.set_weekly_device_hours(
            session, account_repo.team_by_name(session, "ops"), 1e-5
        )
        quota.update_holds(session)
    try:
        root = browser.new_context().new_page()
        sign_in(root, api_url, accounts.admin_token)
        root.goto(f"{api_url}/queue")
        held = root.locator('#teams tr[data-team="ops"]')
        expect(held.locator('[data-col="held"]')).to_contain_text("held: team ops used")
        expect(held.locator('[data-col="hours"]')).to_contain_text("h / 0.00001 h")
        expect(root.locator('#teams tr[data-team="alpha"]')).to_have_count(1)  # every team
    finally:
        with transaction(sessions) as session:
            ops = account_repo.team_by_name(session, "ops")
            account_repo.set_weekly_device_hours(session, ops, None)
            quota.update_holds(session)


def test_a_priority_change_shows_on_the_job_page_with_who_made_it(
    alice: Page, api_url: str, accounts: Accounts, sessions: sessionmaker[Session]
) -> None:
    with transaction(sessions) as session:  # queued without a message: no worker takes it
        team_id = account_repo.team_by_name(session, "alpha").id
        placement = jobs.Placement(actor="alice", team_id=team_id)
        job_id = jobs.create_job(session, "train", {"method": "train"}, None, placement).id
    admin = {"Authorization": f"Bearer {accounts.admin_token}"}
    urgent = httpx.patch(f"{api_url}/v1/jobs/{job_id}", json={"priority": "urgent"}, headers=admin)
    assert urgent.status_code == 200, urgent.text
    alice.goto(f"{api_url}/jobs/{job_id}")
    expect(alice.locator("#events li").last).to_contain_text("priority normal -> urgent (root)")
    alice_token = {"Authorization": f"Bearer {accounts.tokens['alice']}"}
    httpx.post(f"{api_url}/v1/jobs/{job_id}/cancel", headers=alice_token)
