"""The dashboard's pages in Debian's headless chromium, against real API and worker processes:
submit through the form, watch a job live, download an artifact, cancel, compare."""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import EVENT_TIMEOUT_MS, ConsoleErrors
from tests.service.conftest import Accounts

pytestmark = [pytest.mark.service, pytest.mark.browser]

FAST = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 1}}


def submit(api_url: str, token: str, spec: dict[str, Any], tags: tuple[str, ...] = ()) -> str:
    response = httpx.post(
        f"{api_url}/v1/jobs",
        json=spec,
        params=[("tag", t) for t in tags],
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def wait_status(api_url: str, token: str, job_id: str, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = httpx.get(
            f"{api_url}/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}
        ).json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return dict(job)
        time.sleep(0.5)
    raise TimeoutError(f"job {job_id} did not finish")


def test_the_form_refuses_a_bad_field_next_to_it(alice: Page, api_url: str) -> None:
    alice.goto(f"{api_url}/submit")
    alice.select_option("#f-dataset\\.name", "name:digits")
    alice.fill("#f-training\\.epochs", "0")
    alice.locator("#f-training\\.epochs").dispatch_event("change")
    alice.click("#submit")
    field = alice.locator('[data-field="training.epochs"]')
    expect(field.locator(".field-error")).to_contain_text("greater than or equal to 1")
    assert alice.url == f"{api_url}/submit"  # nothing was submitted


def test_a_job_submitted_by_the_form_draws_live_then_offers_its_artifacts(
    alice: Page, api_url: str, console_errors: ConsoleErrors, tmp_path: Path
) -> None:
    alice.goto(f"{api_url}/submit")
    alice.select_option("#f-dataset\\.name", "name:digits")
    alice.fill("#f-training\\.epochs", "150")
    alice.locator("#f-training\\.epochs").dispatch_event("change")
    alice.fill("#tags", "live form")
    alice.click("#submit")
    alice.wait_for_url(f"{api_url}/jobs/*")
    job_id = alice.url.rsplit("/", 1)[1]
    alice.evaluate("window.__notReloaded = true")

    progress, points = watch_until_finished(alice)
    assert alice.evaluate("window.__notReloaded") is True
    assert alice.evaluate("document.body.dataset.live") == "stream"  # SSE, not polling
    assert len({p for p in progress if 0 < p < 1}) >= 2, progress  # the bar moved, live
    assert points[-1] > points[0] >= 0 and len(set(points)) >= 3, points  # the curve grew
    expect(alice.locator("#status")).to_have_text("succeeded")

    row = alice.locator('#artifacts tr[data-name="metrics.json"]')
    expect(row).to_be_visible()
    shown_sha = row.locator(".sha").inner_text()
    with alice.expect_download() as download_info:
        row.get_by_role("link", name="download metrics.json").click()
    saved = tmp_path / "metrics.json"
    download_info.value.save_as(saved)
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == shown_sha
    preview = alice.locator('#previews img[alt="curves.png"]')
    preview.scroll_into_view_if_needed()
    expect(preview).to_be_visible()
    # Polled by Playwright's own assertion: a string predicate polled in the page is eval,
    # which the dashboard's CSP refuses once the image takes a while (a chart drawn on demand).
    image = alice.locator("#previews img").first
    expect(image).to_have_js_property("complete", True)
    assert image.evaluate("img => img.naturalWidth") > 100

    alice.goto(f"{api_url}/?tag=form")
    expect(alice.locator(f'#jobs tr[data-id="{job_id}"]')).to_be_visible()
    assert console_errors == []


def watch_until_finished(page: Page) -> tuple[list[float], list[int]]:
    """Every value the progress bar took and every point count of the loss chart, recorded
    in the page as they change (a MutationObserver), until the page shows the job ended.

    Waiting follows the page's own events, so a loaded machine makes the wait longer, never
    the test wrong; the bound only catches a page that never ends."""
    page.evaluate(
        """() => {
          const seen = (window.__seen = { progress: [], points: [] });
          const record = () => {
            seen.progress.push(Number(document.querySelector('#progress').value));
            const chart = document.querySelector('[data-chart="loss"]');
            seen.points.push(Number(chart?.dataset.points || 0));
          };
          record();
          new MutationObserver(record).observe(document.querySelector('main'),
            { attributes: true, childList: true, subtree: true, characterData: true });
        }"""
    )
    # A locator wait, not a string predicate: the pages' CSP forbids eval.
    ended = re.compile(r"^(succeeded|failed|cancelled)$")
    expect(page.locator("#status")).to_have_text(ended, timeout=EVENT_TIMEOUT_MS)
    seen = page.evaluate("window.__seen")
    return [float(p) for p in seen["progress"]], [int(p) for p in seen["points"]]


def test_cancel_from_the_job_page(alice: Page, api_url: str, accounts: Accounts) -> None:
    token = accounts.tokens["alice"]
    job_id = submit(api_url, token, {**FAST, "training": {"epochs": 500}})
    alice.goto(f"{api_url}/jobs/{job_id}")
    alice.click("#cancel")
    expect(alice.locator("#status")).to_have_text("cancelled", timeout=EVENT_TIMEOUT_MS)
    assert wait_status(api_url, token, job_id)["status"] == "cancelled"


def test_compare_two_jobs_by_tag_and_by_pick(
    alice: Page, api_url: str, accounts: Accounts, console_errors: ConsoleErrors
) -> None:
    token = accounts.tokens["alice"]
    tag = f"pair-{uuid.uuid4().hex[:6]}"
    small = {**FAST, "model": {"name": "mlp", "hidden": [16]}}
    large = {**FAST, "model": {"name": "mlp", "hidden": [128, 64]}}
    ids = [submit(api_url, token, spec, (tag,)) for spec in (small, large)]
    for job_id in ids:
        assert wait_status(api_url, token, job_id)["status"] == "succeeded"

    alice.goto(f"{api_url}/compare?tag={tag}")
    expect(alice.locator("#compare-table tbody tr")).to_have_count(2)
    expect(alice.locator("#overlay")).to_have_attribute("data-series", "2")
    for scatter in ("#scatter-params", "#scatter-macs"):
        expect(alice.locator(f"{scatter} circle")).to_have_count(2)
        assert alice.locator(f"{scatter} circle.front").count() >= 1

    alice.goto(f"{api_url}/compare")
    for job_id in ids:
        alice.check(f'#candidates input[value="{job_id}"]')
    alice.click("#pick button[type=submit]")
    expect(alice.locator("#compare-table tbody tr")).to_have_count(2)
    assert console_errors == []


def test_the_short_ids_the_tables_show_open_pages_and_compare(
    alice: Page, api_url: str, accounts: Accounts, console_errors: ConsoleErrors
) -> None:
    token = accounts.tokens["alice"]
    ids = [submit(api_url, token, FAST) for _ in range(2)]
    for job_id in ids:
        assert wait_status(api_url, token, job_id)["status"] == "succeeded"
    short = [job_id[:8] for job_id in ids]  # as the CLI and the jobs table show them

    alice.goto(f"{api_url}/jobs/{short[0]}")
    alice.wait_for_url(f"{api_url}/jobs/{ids[0]}")  # the page's own address is whole
    expect(alice.locator("#status")).to_have_text("succeeded")

    alice.goto(f"{api_url}/compare?job={short[0]}&job={short[1]}")
    expect(alice.locator("#compare-table tbody tr")).to_have_count(2)
    expect(alice.locator("#overlay")).to_have_attribute("data-series", "2")
    assert console_errors == []


def test_pages_are_readable_at_390_px(alice: Page, api_url: str) -> None:
    alice.set_viewport_size({"width": 390, "height": 844})
    for path in ("/", "/submit", "/compare", "/queue", "/datasets"):
        alice.goto(f"{api_url}{path}")
        alice.wait_for_load_state("networkidle")
        width = alice.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} is {width} px wide at a 390 px viewport"


def test_the_keyboard_reaches_the_navigation_and_the_form(
    alice: Page, api_url: str, console_errors: ConsoleErrors
) -> None:
    alice.goto(f"{api_url}/submit")
    alice.wait_for_load_state("networkidle")
    reached = []
    for _ in range(80):
        alice.keyboard.press("Tab")
        reached.append(
            alice.evaluate("document.activeElement.id || document.activeElement.textContent.trim()")
        )
        if reached[-1] == "submit":
            break
    assert reached[0] == "Skip to content"
    for link in ("Jobs", "Submit", "Compare", "Queue", "Datasets", "Sign out"):
        assert link in reached
    assert {"method", "f-dataset.name", "f-training.epochs", "submit"} <= set(reached)
    assert console_errors == []


@pytest.mark.slow  # a prune job through the worker, then the page: about 20 s under load
def test_a_unit_pruned_job_page_lists_the_units_each_layer_kept(
    alice: Page, api_url: str, accounts: Accounts, console_errors: ConsoleErrors
) -> None:
    token = accounts.tokens["alice"]
    spec = {
        "method": "prune",
        "dataset": {"name": "digits"},
        "model": {"name": "mlp", "hidden": [24, 16]},
        "granularity": "unit",
        "density": 0.25,
        "training": {"epochs": 1},
    }
    job_id = submit(api_url, token, spec)
    assert wait_status(api_url, token, job_id)["status"] == "succeeded"
    alice.goto(f"{api_url}/jobs/{job_id}")
    rows = alice.locator("#units tbody tr")
    expect(rows).to_have_count(2, timeout=EVENT_TIMEOUT_MS)
    cells = [rows.nth(i).locator("td").all_inner_texts()[:4] for i in range(2)]
    assert cells == [["layers.0", "layers.1", "24", "6"], ["layers.1", "layers.2", "16", "4"]]
    expect(alice.locator("#layers tbody tr")).to_have_count(3)  # the compact model's layers
    assert console_errors == []
