"""The dashboard in a real browser: Debian's headless chromium, driven by Playwright, against
real API and worker processes on PostgreSQL and Redis (the service suite's fixtures).

The browser is Debian's `chromium` package, never one Playwright downloads: when it is
missing, this installs it with apt-get, and fails (never skips) when that cannot be done.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, sync_playwright

from tests.conftest import TEST_DATASETS
from tests.service import procs
from tests.service.conftest import (  # noqa: F401 (fixtures, found by name)
    Accounts,
    accounts,
    log_dir,
    pg_url,
    sessions,
    start_worker,
)
from tests.service.procs import REDIS_URL

CHROMIUM = Path("/usr/bin/chromium")
# The browser suite's API, worker and browser end with its last test ("package" scope), not
# with the session: their pooled PostgreSQL connections would otherwise stay open through the
# service suite, whose 64-claimer test needs 64 of the server's 100 at once.
# How long a wait for a page event (a job's end, a study's end) may take before the test
# calls it a hang. Waits end on the event itself; this bound only has to outlast a loaded
# machine, so it is generous.
EVENT_TIMEOUT_MS = 300_000


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        apt = shutil.which("apt-get")
        if apt is None:
            pytest.fail(f"{CHROMIUM} is missing and apt-get is not here to install chromium")
        result = subprocess.run(
            [apt, "install", "-y", "--no-install-recommends", "chromium"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if result.returncode != 0 or not CHROMIUM.exists():
            output = result.stdout[-2000:] + result.stderr[-2000:]
            pytest.fail(f"apt-get install chromium failed:\n{output}")
    return CHROMIUM


@pytest.fixture(scope="package")
def service_env(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:  # noqa: F811
    home = tmp_path_factory.mktemp("browser-home")
    return {
        "ARCHSEARCH_DATABASE_URL": pg_url,
        "ARCHSEARCH_BROKER_URL": REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"archsearch-browser-{uuid.uuid4().hex[:8]}",
        "ARCHSEARCH_HOME": str(home),
        "ARCHSEARCH_ARTIFACT_ROOT": str(home / "artifacts"),
        "ARCHSEARCH_DATA_DIR": str(TEST_DATASETS),
        "ARCHSEARCH_LEASE_SECONDS": "5",
        "ARCHSEARCH_AUTH": "token",
        "ARCHSEARCH_SESSION_SECRET": uuid.uuid4().hex,
        "OMP_NUM_THREADS": "1",
    }


@pytest.fixture(scope="package")
def api_url(service_env: dict[str, str], log_dir: Path) -> Iterator[str]:  # noqa: F811
    port = procs.free_port()
    proc = procs.start("api", ["api", "--port", str(port)], service_env, log_dir)
    url = f"http://127.0.0.1:{port}"
    procs.wait_http(f"{url}/healthz", proc)
    yield url
    proc.stop()


@pytest.fixture(scope="package")
def worker(service_env: dict[str, str], log_dir: Path) -> Iterator[procs.Proc]:  # noqa: F811
    proc = start_worker(service_env, log_dir, "browser-worker")
    yield proc
    proc.stop()


@pytest.fixture(scope="package")
def browser(chromium: Path) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium))
        yield browser
        browser.close()


class ConsoleErrors(list[str]):
    """Console errors and uncaught exceptions of the pages of one context."""

    def watch(self, page: Page) -> None:
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.append(f"pageerror: {error}"))

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.append(f"{message.text} at {message.location.get('url')}")


@pytest.fixture()
def console_errors() -> ConsoleErrors:
    return ConsoleErrors()


@pytest.fixture()
def context(browser: Browser, tmp_path: Path) -> Iterator[BrowserContext]:
    context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
    yield context
    context.close()


def sign_in(page: Page, api_url: str, token: str) -> None:
    page.goto(f"{api_url}/signin")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{api_url}/")


@pytest.fixture()
def alice(
    context: BrowserContext,
    api_url: str,
    worker: procs.Proc,
    accounts: Accounts,  # noqa: F811
    console_errors: ConsoleErrors,
) -> Page:
    """A page of the dashboard, signed in as alice (team alpha)."""
    page = context.new_page()
    console_errors.watch(page)
    sign_in(page, api_url, accounts.tokens["alice"])
    return page
