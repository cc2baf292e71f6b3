"""An admin's Models page lists every team's models (here alpha's and beta's), each name
saying whose it is, and opens another team's model; a team's page keeps its own alone (no
team shown)."""

from __future__ import annotations

import uuid

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, expect
from sqlalchemy.orm import Session, sessionmaker

from tests.browser.conftest import ConsoleErrors, sign_in
from tests.service.conftest import Accounts
from tests.service.test_models import record_job

pytestmark = [pytest.mark.service, pytest.mark.browser]


def test_an_admins_models_page_lists_every_team(
    browser: Browser,
    context: BrowserContext,
    api_url: str,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
    console_errors: ConsoleErrors,
) -> None:
    name = f"betas-{uuid.uuid4().hex[:6]}"
    job_id, _ = record_job(sessions, service_env, "beta")
    carol = {"Authorization": f"Bearer {accounts.tokens['carol']}"}
    body = {"job_id": str(job_id)}
    assert httpx.post(f"{api_url}/v1/models/{name}/versions", json=body, headers=carol).is_success
    team_id = httpx.get(f"{api_url}/v1/models/{name}", headers=carol).json()["team_id"]
    alphas_job, _ = record_job(sessions, service_env, "alpha")
    alice = {"Authorization": f"Bearer {accounts.tokens['alice']}"}
    body = {"job_id": str(alphas_job)}
    alphas = f"alphas-{uuid.uuid4().hex[:6]}"
    assert httpx.post(f"{api_url}/v1/models/{alphas}/versions", json=body, headers=alice).is_success

    page = context.new_page()
    console_errors.watch(page)
    sign_in(page, api_url, accounts.admin_token)
    page.goto(f"{api_url}/models")
    row = page.locator(f'#models tr[data-name="{name}"]')
    expect(row).to_contain_text(f"team {team_id[:8]}")
    row.locator("a").click()
    page.wait_for_url(f"{api_url}/models/{name}")
    expect(page.locator('#versions tr[data-version="1"]')).to_be_visible()

    own = browser.new_context()
    team_page = own.new_page()
    sign_in(team_page, api_url, accounts.tokens["carol"])
    team_page.goto(f"{api_url}/models")
    expect(team_page.locator(f'#models tr[data-name="{name}"]')).not_to_contain_text("team ")
    own.close()
