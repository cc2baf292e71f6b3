"""The studies pages in Debian's headless chromium, against real API and worker processes:
a tiny study submitted over REST is followed to its end on its page (per-arm table, the
accuracy-against-parameters plot, artifacts, job links), another is cancelled from its page,
and another team's study is a 404."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import EVENT_TIMEOUT_MS, ConsoleErrors, sign_in
from tests.service.conftest import Accounts

pytestmark = [pytest.mark.service, pytest.mark.browser]

# 400 samples at batch size 100: 4 steps an epoch, so the 8-step budget is two epochs.
ARMS = [
    {"label": "train-w16", "spec": {"method": "train", "model": {"name": "mlp", "hidden": [16]}}},
    {
        "label": "prune-d0.2",
        "spec": {"method": "prune", "density": 0.2, "model": {"name": "mlp", "hidden": [32]}},
    },
]
TINY = {
    "name": "page-tiny",
    "dataset": {"name": "digits", "train_subset": 400},
    "base": {"training": {"batch_size": 100}},
    "budget": {"steps": 8},
    "seeds": [0],
    "arms": ARMS,
}


def submit_study(api_url: str, token: str, study: dict[str, Any]) -> str:
    response = httpx.post(
        f"{api_url}/v1/studies", json=study, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_a_study_page_follows_the_study_to_its_table_plot_and_artifacts(
    alice: Page, api_url: str, accounts: Accounts, console_errors: ConsoleErrors
) -> None:
    study_id = submit_study(api_url, accounts.tokens["alice"], TINY)
    alice.click("nav >> text=Studies")
    row = alice.locator(f'#studies tr[data-id="{study_id}"]')
    expect(row).to_contain_text("page-tiny")
    row.locator("a").click()
    alice.wait_for_url(f"{api_url}/studies/{study_id}")
    alice.evaluate("window.__notReloaded = true")
    expect(alice.locator("#arms tbody tr")).to_have_count(2)
    expect(alice.locator("#study-jobs tbody tr")).to_have_count(2)

    expect(alice.locator("#status")).to_have_text("finished", timeout=EVENT_TIMEOUT_MS)
    assert alice.evaluate("window.__notReloaded") is True  # reached its end live
    expect(alice.locator('#counts [data-status="succeeded"]')).to_have_text("2 succeeded")
    expect(alice.locator('#study-jobs tr[data-status="succeeded"]')).to_have_count(2)
    for label in ("train-w16", "prune-d0.2"):
        arm = alice.locator(f'#arms tr[data-arm="{label}"]')
        cells = arm.locator("td")
        accuracy = float(cells.nth(2).inner_text())  # one seed: the mean, no ± std
        assert 0.1 < accuracy <= 1.0, accuracy
        assert 0.0 < float(cells.nth(3).inner_text()) <= 1.0  # on the held-out rows
        assert int(cells.nth(4).inner_text().replace(",", "")) > 0  # parameters
        assert cells.nth(8).inner_text().endswith("/ 8")  # steps spent / budget, not over
        expect(alice.locator(f'#pareto-plot circle[data-arm="{label}"]')).to_have_count(1)
    # The smaller arm, or the more accurate one, is on the front: never neither.
    assert alice.locator("#arms tr.on-front").count() >= 1
    expect(alice.locator("#pareto-plot polyline.front-line")).to_have_count(1)
    expect(alice.locator('#study-artifacts li[data-name="results.csv"] a')).to_be_visible(
        timeout=EVENT_TIMEOUT_MS
    )
    image = alice.locator("#pareto-png img")
    expect(image).to_be_visible()
    # Polled by Playwright's own assertion: a string predicate polled in the page is eval,
    # which the dashboard's CSP refuses once the image takes a while (a chart drawn on demand).
    image = alice.locator("#pareto-png img").first
    expect(image).to_have_js_property("complete", True)
    assert image.evaluate("img => img.naturalWidth") > 100
    expect(alice.locator("#cancel")).to_be_hidden()

    first_job = alice.locator("#study-jobs tbody tr").first
    job_id = first_job.get_attribute("data-id")
    first_job.locator("a").click()
    alice.wait_for_url(f"{api_url}/jobs/{job_id}")
    expect(alice.locator("#status")).to_have_text("succeeded")
    assert console_errors == []


def test_a_study_is_cancelled_from_its_page_and_hidden_from_another_team(
    alice: Page, api_url: str, accounts: Accounts, console_errors: ConsoleErrors
) -> None:
    long = {"method": "train", "training": {"epochs": 200}}
    doomed = {
        **TINY,
        "name": "page-doomed",
        "budget": None,
        "arms": [{"label": "long0", "spec": long}, {"label": "long1", "spec": long}],
    }
    study_id = submit_study(api_url, accounts.tokens["alice"], doomed)
    alice.goto(f"{api_url}/studies/{study_id}")
    expect(alice.locator("#status")).to_have_text("running")
    alice.click("#cancel")
    expect(alice.locator("#status")).to_have_text("cancelled", timeout=EVENT_TIMEOUT_MS)
    expect(alice.locator("#cancel")).to_be_hidden()
    expect(alice.locator('#study-jobs tr[data-status="cancelled"]')).to_have_count(
        2, timeout=EVENT_TIMEOUT_MS
    )
    alice.reload()
    expect(alice.locator('#counts [data-status="cancelled"]')).to_have_text("2 cancelled")
    assert console_errors == []

    carol = httpx.get(
        f"{api_url}/v1/studies/{study_id}",
        headers={"Authorization": f"Bearer {accounts.tokens['carol']}"},
    )
    assert carol.status_code == 404
    page = alice.context.browser.new_page()  # type: ignore[union-attr]
    try:
        sign_in(page, api_url, accounts.tokens["carol"])
        response = page.goto(f"{api_url}/studies/{study_id}")
        assert response is not None and response.status == 404
        expect(page.get_by_test_id("not-found")).to_contain_text(f"study {study_id}")
    finally:
        page.close()
