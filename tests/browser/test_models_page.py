"""The Models page in Debian's headless chromium: a team's model is listed with its aliases;
its page shows each version's lineage (job link, metrics, dataset), aliases and their
history, and downloads the version's files; another team's model says it is not found."""

from __future__ import annotations

import hashlib
import uuid

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from tests.browser.conftest import ConsoleErrors, sign_in
from tests.service.conftest import Accounts
from tests.service.test_models import record_job

pytestmark = [pytest.mark.service, pytest.mark.browser]


def test_the_models_page_shows_versions_aliases_and_downloads(
    alice: Page,
    api_url: str,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
    console_errors: ConsoleErrors,
) -> None:
    name = f"page-{uuid.uuid4().hex[:6]}"
    job_id, weights = record_job(sessions, service_env, "alpha")
    headers = {"Authorization": f"Bearer {accounts.tokens['alice']}"}
    body = {"job_id": str(job_id)}
    assert httpx.post(f"{api_url}/v1/models/{name}/versions", json=body, headers=headers).is_success
    alias = httpx.put(
        f"{api_url}/v1/models/{name}/aliases/production", json={"version": 1}, headers=headers
    )
    assert alias.is_success
    alice.click("nav >> text=Models")
    row = alice.locator(f'#models tr[data-name="{name}"]')
    expect(row).to_contain_text("production → 1")
    row.locator("a").click()
    alice.wait_for_url(f"{api_url}/models/{name}")
    version = alice.locator('#versions tr[data-version="1"]')
    expect(version).to_contain_text("test_accuracy 0.93")
    expect(version).to_contain_text("digits")
    expect(version.locator(f'a[href="/jobs/{job_id}"]')).to_have_count(1)
    expect(alice.locator("#alias-history li")).to_contain_text("production: → 1 by alice")
    with alice.expect_download() as info:
        version.locator("a", has_text="model.safetensors").click()
    path = info.value.path()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(weights).hexdigest()
    assert console_errors == []


def test_another_teams_model_page_says_not_found(
    browser: Browser,
    alice: Page,
    api_url: str,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
) -> None:
    name = f"hidden-{uuid.uuid4().hex[:6]}"
    job_id, _ = record_job(sessions, service_env, "alpha")
    headers = {"Authorization": f"Bearer {accounts.tokens['alice']}"}
    body = {"job_id": str(job_id)}
    assert httpx.post(f"{api_url}/v1/models/{name}/versions", json=body, headers=headers).is_success
    carol = browser.new_context().new_page()
    sign_in(carol, api_url, accounts.tokens["carol"])
    carol.goto(f"{api_url}/models/{name}")
    expect(carol.locator("#model-error")).to_contain_text(f"no model '{name}'")
    expect(carol.locator("#versions tbody tr")).to_have_count(0)
