"""The runs table as MLflow users know it, and the knob-against-metric plot, in headless
chromium against a real API on PostgreSQL: a spec column added and kept in the URL, sorted
by the server, a metric filter, the CSV of exactly the shown table; on Compare and on a
study page any knob against any metric; chart legends that read values before any hover."""

from __future__ import annotations

import csv
import io
import uuid

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.accounts.service import issue_token
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.jobs.repository import Placement
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.jobs import JobStatus
from tests.browser.conftest import ConsoleErrors, sign_in

pytestmark = [pytest.mark.service, pytest.mark.browser]

# (optimizer, learning rate, test accuracy) of each finished run.
RUNS = [("sgd", 0.1, 0.81), ("adam", 0.001, 0.93), ("sgd", 0.05, 0.62), ("adam", 0.01, 0.97)]
LR = "spec.training.optimizer.lr"


def _seeded(sessions: sessionmaker[Session]) -> tuple[str, list[str], str]:
    """A fresh team's token, RUNS as finished jobs of one study (with curves); returns
    (token, job ids, study id)."""
    suffix = uuid.uuid4().hex[:8]
    with transaction(sessions) as session:
        team = account_repo.create_team(session, f"cols-{suffix}", None)
        user = account_repo.create_user(session, team, f"colls-{suffix}", False, None)
        token = issue_token(session, user.name, "submit", 1)
        study = Study(
            name="knobs", team_id=team.id, dataset={"name": "digits"}, base_spec={},
            seeds=[0], config={}, status="finished",
        )  # fmt: skip
        session.add(study)
        session.flush()
        ids = []
        for name, lr, accuracy in RUNS:
            spec = {"method": "train", "dataset": {"name": "digits"},
                    "training": {"optimizer": {"name": name, "lr": lr}}}  # fmt: skip
            job = repository.create_job(
                session, "train", spec, None, Placement(owner_id=user.id, team_id=team.id)
            )
            job.status, job.study_id, job.study_arm = JobStatus.succeeded, study.id, name
            job.latest_metrics = {"test_accuracy": accuracy, "parameters": 1000.0}
            session.flush()
            curve = [(step, "test_accuracy", accuracy * step / 3) for step in (1, 2, 3)]
            repository.record_metrics(session, job.id, curve)
            ids.append(str(job.id))
    return token, ids, str(study.id)


@pytest.fixture()
def seeded(sessions: sessionmaker[Session]) -> tuple[str, list[str], str]:
    return _seeded(sessions)


def _column(page: Page, key: str) -> list[str]:
    return page.locator(f'#jobs tbody td[data-col="{key}"]').all_inner_texts()


def test_a_chosen_column_sorts_filters_stays_in_the_url_and_downloads(
    context: BrowserContext,
    api_url: str,
    seeded: tuple[str, list[str], str],
    console_errors: ConsoleErrors,
) -> None:
    token, ids, _ = seeded
    page = context.new_page()
    console_errors.watch(page)
    sign_in(page, api_url, token)
    table = page.locator("#jobs")
    page.fill("#column-key", LR)
    page.click("#add-column button[type=submit]")
    expect(table).to_have_attribute("data-loaded", f"col={LR}")
    page.locator(f'#jobs th[data-sort="{LR}"] button.sort').click()
    expect(table).to_have_attribute("data-loaded", f"sort=-{LR}&col={LR}")
    assert _column(page, LR) == ["0.1", "0.05", "0.01", "0.001"]

    page.fill("#filters input[name=where]", "metrics.test_accuracy>0.8")
    page.click("#filters button[type=submit]")
    loaded = f"where=metrics.test_accuracy%3E0.8&sort=-{LR}&col={LR}"
    expect(table).to_have_attribute("data-loaded", loaded)
    assert _column(page, LR) == ["0.1", "0.01", "0.001"]  # 0.62 is filtered out
    page.reload()  # the columns, filter and sort are the URL's
    expect(table).to_have_attribute("data-loaded", loaded)
    assert _column(page, LR) == ["0.1", "0.01", "0.001"]

    with page.expect_download() as download:
        page.click("#csv")
    rows = list(csv.reader(io.StringIO(download.value.path().read_text())))
    assert rows[0][0] == "id" and rows[0][-1] == LR
    shown = page.locator("#jobs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")
    assert [r[0] for r in rows[1:]] == shown
    assert [r[-1] for r in rows[1:]] == ["0.1", "0.01", "0.001"]

    page.fill("#filters input[name=where]", "test_accuracy high")
    page.click("#filters button[type=submit]")
    expect(page.locator("#list-error")).to_contain_text("query.where")
    assert [e for e in console_errors if "status of 422" not in e] == []


def _knob_points(page: Page, knob: str, metric: str) -> dict[str, str]:
    box = page.locator("#knob-plot")
    box.locator("select[name=knob]").select_option(knob)
    box.locator("select[name=metric]").select_option(metric)
    dots = box.locator("circle")
    expect(dots).to_have_count(len(RUNS))
    return dict(
        zip(
            dots.evaluate_all("ds => ds.map(d => d.dataset.id)"),
            dots.evaluate_all("ds => ds.map(d => d.getAttribute('cx'))"),
            strict=True,
        )
    )


def test_compare_and_study_plot_a_knob_against_a_metric_and_legends_read_before_hover(
    context: BrowserContext,
    api_url: str,
    seeded: tuple[str, list[str], str],
    console_errors: ConsoleErrors,
) -> None:
    token, ids, study_id = seeded
    page = context.new_page()
    console_errors.watch(page)
    sign_in(page, api_url, token)
    page.goto(f"{api_url}/compare?" + "&".join(f"job={i}" for i in ids))
    expect(page.locator("#overlay")).to_have_attribute("data-series", str(len(RUNS)))
    # Before any hover the legend reads the last step and each curve's last value.
    values = page.locator("#overlay .u-legend .u-value").all_inner_texts()
    assert "--" not in values and values[0] == "3", values
    x = _knob_points(page, LR, "metrics.test_accuracy")
    ranked = sorted(ids, key=lambda i: float(x[i]))
    assert ranked == [ids[1], ids[3], ids[2], ids[0]]  # by learning rate
    assert f"knob={LR}" in page.url  # the pick is kept in the URL

    page.goto(f"{api_url}/studies/{study_id}")
    x = _knob_points(page, "spec.training.optimizer.name", "metrics.test_accuracy")
    adam = {float(x[ids[1]]), float(x[ids[3]])}
    sgd = {float(x[ids[0]]), float(x[ids[2]])}
    assert len(adam) == len(sgd) == 1 and adam != sgd  # one column a text value
    assert console_errors == []
