"""The Jobs page as a runs table and the job page's log panel, in headless chromium against
real API and worker processes: sortable columns (sorted by the server), the "hide study
jobs" toggle, and a log panel that follows a running job's log and keeps it after."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.jobs.repository import Placement
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.jobs import JobStatus
from tests.browser.conftest import ConsoleErrors, sign_in
from tests.service import procs
from tests.service.conftest import Accounts

pytestmark = [pytest.mark.service, pytest.mark.browser]

SPEC = {"method": "train", "dataset": {"name": "digits"}}
ACCURACIES = [0.81, 0.97, 0.42, 0.66]


def _finished_jobs(sessions: sessionmaker[Session]) -> tuple[str, str]:
    """A fresh team's token, four finished runs and one study job; returns (token, study job)."""
    suffix = uuid.uuid4().hex[:8]
    with transaction(sessions) as session:
        team = account_repo.create_team(session, f"table-{suffix}", None)
        user = account_repo.create_user(session, team, f"tabler-{suffix}", False, None)
        token = issue_token(session, user.name, "submit", 1)
        placement = Placement(owner_id=user.id, team_id=team.id)
        for i, accuracy in enumerate(ACCURACIES):
            job = repository.create_job(session, "train", SPEC, None, placement)
            job.status, job.latest_metrics = JobStatus.succeeded, {"test_accuracy": accuracy}
            job.started_at = utcnow() - timedelta(seconds=60)
            job.finished_at = job.started_at + timedelta(seconds=10 * (i + 1))
        study = Study(
            name="t",
            team_id=team.id,
            dataset={},
            base_spec={},
            seeds=[0],
            config={},
            status="running",
        )
        session.add(study)
        session.flush()
        in_study = repository.create_job(session, "train", SPEC, None, placement)
        in_study.study_id, in_study.study_arm = study.id, "arm-x"
        in_study.status = JobStatus.cancelled  # no worker time spent on it
    return token, str(in_study.id)


def _shown_accuracies(page: Page) -> list[float]:
    cells = page.locator('#jobs tbody td[data-col="test_accuracy"]').all_inner_texts()
    return [float(text) for text in cells if text != "–"]


def test_columns_sort_on_the_server_and_study_jobs_hide(
    context: BrowserContext,
    api_url: str,
    sessions: sessionmaker[Session],
    console_errors: ConsoleErrors,
) -> None:
    token, in_study = _finished_jobs(sessions)
    page = context.new_page()
    console_errors.watch(page)
    sign_in(page, api_url, token)
    table = page.locator("#jobs")
    expect(page.locator(f'#jobs tr[data-id="{in_study}"]')).to_contain_text("arm-x")
    header = page.locator('#jobs th[data-sort="test_accuracy"]')
    header.get_by_role("button").click()
    expect(table).to_have_attribute("data-loaded", "sort=-test_accuracy")
    expect(header).to_have_attribute("aria-sort", "descending")
    assert _shown_accuracies(page) == sorted(ACCURACIES, reverse=True)
    header.get_by_role("button").click()
    expect(table).to_have_attribute("data-loaded", "sort=test_accuracy")
    assert _shown_accuracies(page) == sorted(ACCURACIES)
    assert page.url.endswith("?sort=test_accuracy")  # the sort is in the URL, to share
    page.locator("#hide-study-jobs").check()
    expect(table).to_have_attribute("data-loaded", "study_jobs=false&sort=test_accuracy")
    expect(page.locator(f'#jobs tr[data-id="{in_study}"]')).to_have_count(0)
    assert len(page.locator("#jobs tbody tr").all()) == len(ACCURACIES)
    page.locator('#jobs th[data-sort="duration"]').get_by_role("button").click()
    expect(table).to_have_attribute("data-loaded", "study_jobs=false&sort=-duration")
    durations = page.locator('#jobs tbody td[data-col="duration"]').all_inner_texts()
    assert durations == ["40s", "30s", "20s", "10s"]
    assert console_errors == []


def test_the_log_panel_follows_a_running_job_then_keeps_its_log(
    alice: Page, api_url: str, worker: procs.Proc, accounts: Accounts
) -> None:
    token = accounts.tokens["alice"]
    headers = {"Authorization": f"Bearer {token}"}
    spec = {**SPEC, "training": {"epochs": 400}}
    job_id = httpx.post(f"{api_url}/v1/jobs", json=spec, headers=headers).json()["id"]
    alice.goto(f"{api_url}/jobs/{job_id}")
    log = alice.locator("#log")
    epoch_lines = log.locator(".log-line", has_text="train epoch")
    expect(epoch_lines.first).to_be_visible(timeout=150_000)
    expect(alice.locator("#status")).to_have_text("running")
    expect(log).to_have_attribute("data-state", "following")
    # New epochs arrive on the open stream while the job still runs: no reload, no poll.
    lines = log.locator(".log-line")
    expect(lines.nth(lines.count())).to_be_attached(timeout=60_000)
    expect(alice.locator("#status")).to_have_text("running")
    expect(log).to_contain_text("phase train starts at epoch 1 of 400")
    expect(log).to_contain_text("test_accuracy")
    alice.click("#cancel")
    expect(log).to_have_attribute("data-state", "ended", timeout=60_000)
    expect(log).to_contain_text("run ended: cancelled")
    # Opened after the end, the page shows the whole log at once.
    alice.reload()
    expect(alice.locator("#log")).to_have_attribute("data-state", "ended")
    expect(alice.locator("#log .log-line").first).to_contain_text("running on worker")
    expect(alice.locator("#log")).to_contain_text("run ended: cancelled")
