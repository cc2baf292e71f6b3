"""The Models page in Debian's headless chromium: a team's model is listed with its aliases;
its page shows each version's key metrics and lineage (job link, the version it built on,
dataset), aliases and their history, and downloads the version's files; a job is promoted,
an alias set and removed, a version archived and restored from the page (each write with the
session's CSRF token); another team's model says it is not found."""

from __future__ import annotations

import hashlib
import uuid

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from archsearch.schemas.jobs import JobStatus
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
    expect(version.locator('dd[data-metric="test_accuracy"]')).to_have_text("0.93")
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


def test_promote_alias_archive_and_restore_from_the_page(
    alice: Page,
    api_url: str,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
    console_errors: ConsoleErrors,
) -> None:
    base, name = f"base-{uuid.uuid4().hex[:6]}", f"acts-{uuid.uuid4().hex[:6]}"
    pruned, _ = record_job(sessions, service_env, "alpha")
    spec = {"method": "transfer", "dataset": {"name": "digits"}, "source_job": str(pruned)}
    transfer, _ = record_job(sessions, service_env, "alpha", JobStatus.succeeded, spec)
    alice.goto(f"{api_url}/models")
    for model, job in ((base, pruned), (name, transfer)):
        alice.goto(f"{api_url}/models")
        alice.fill("#promote input[name=name]", model)
        alice.fill("#promote input[name=job]", str(job)[:10])  # the start of its id will do
        alice.click("#promote button[type=submit]")
        alice.wait_for_url(f"{api_url}/models/{model}#v1")
    first = alice.locator('#versions tr[data-version="1"]')
    expect(first.locator("a.parent-model")).to_have_text(f"{base}@1")
    expect(first.locator("a.parent-model")).to_have_attribute("href", f"/models/{base}")
    expect(first.locator("a.job-link")).to_have_attribute("href", f"/jobs/{transfer}")

    first.locator("input[name=alias]").fill("production")
    first.locator("form.set-alias button").click()
    expect(first.locator('.tag[data-alias="production"]')).to_have_count(1)
    first.locator("button.archive").click()  # refused while the alias points here
    expect(alice.locator("#action-error")).to_contain_text("move or remove the alias first")
    first.locator("button.remove-alias").click()
    expect(first.locator(".tag")).to_have_count(0)
    expect(alice.locator("#action-error")).to_be_hidden()
    first.locator("button.archive").click()
    expect(alice.locator("#versions tbody tr")).to_have_count(0)
    expect(alice.locator("#archived-count")).to_have_text("1")
    alice.click("#archived-versions summary")
    alice.locator('#archived tr[data-version="1"] button.restore').click()
    expect(alice.locator('#versions tr[data-version="1"]')).to_have_count(1)
    expect(alice.locator("#archived-versions")).to_be_hidden()
    history = alice.locator("#alias-history li")
    expect(history).to_have_count(2)
    expect(history.nth(1)).to_contain_text("production: 1 removed by alice")
    # The promote form on a model's page makes the next version of that model.
    alice.fill("#promote input[name=job]", str(transfer))
    alice.click("#promote button[type=submit]")
    expect(alice.locator('#versions tr[data-version="2"]')).to_have_count(1)
    # The one refused archive, which the browser logs as a failed request, and nothing else.
    assert len(console_errors) == 1 and "409 (Conflict)" in console_errors[0], console_errors
