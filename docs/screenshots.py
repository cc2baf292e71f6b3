"""Regenerate docs/screenshots/*.png: the dashboard's pages in Debian's headless chromium.

Runs an embedded `archsearch serve` on a scratch home (SQLite, in-process runner), submits a
few small jobs on the digits dataset, uploads a tiny dataset, and photographs each page at
1280 px (the jobs page also at 390 px). Nothing is written outside the scratch home but the
PNGs.

    python docs/screenshots.py            # writes docs/screenshots/*.png
    python docs/screenshots.py studies    # only the studies pages (studies*.png)
    python docs/screenshots.py models     # only the models pages (models*.png)
    python docs/screenshots.py runs       # only the runs table's columns and the knob plot
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from playwright.sync_api import Page, sync_playwright

OUT = Path(__file__).parent / "screenshots"
SHARED_DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
TRAIN = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 4}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(home: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "ARCHSEARCH_HOME": str(home),
        "ARCHSEARCH_DATA_DIR": str(SHARED_DATASETS),
        "OMP_NUM_THREADS": "1",
    }
    argv = [sys.executable, "-m", "archsearch.cli.main", "serve", "--port", str(port)]
    log = open(home / "serve.log", "wb")
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(url: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"archsearch serve did not answer at {url}")


def submit(url: str, spec: dict[str, Any], *tags: str) -> str:
    response = httpx.post(f"{url}/v1/jobs", json=spec, params=[("tag", t) for t in tags])
    response.raise_for_status()
    return str(response.json()["id"])


def wait_finished(url: str, job_id: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/v1/jobs/{job_id}").json()["status"] in ("succeeded", "failed"):
            return
        time.sleep(1)
    raise TimeoutError(f"job {job_id} did not finish")


def upload_dataset(url: str) -> str:
    """Three classes of 8x8 blobs, enough for a preview grid and class counts."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 40)
    x = rng.random((len(y), 8, 8)).astype(np.float32) * 0.3
    for i, label in enumerate(y):
        x[i, 2 * label : 2 * label + 3, 2:6] += 0.7
    buffer = io.BytesIO()
    np.savez(buffer, x=x[:, None], y=y)  # (N, 1, 8, 8): grey images with a channel axis
    files = {"file": ("blobs.npz", buffer.getvalue(), "application/octet-stream")}
    response = httpx.post(f"{url}/v1/datasets", files=files, data={"name": "blobs"}, timeout=60)
    response.raise_for_status()
    return str(response.json()["id"])


def shoot(page: Page, url: str, name: str, width: int = 1280) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(url)
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(800)  # charts draw after their data arrives
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
    print(f"wrote {OUT / name}.png")


# A small study: three arms at one budget of 24 steps, two seeds, for its table and plot.
STUDY = {
    "name": "best-small-mlp",
    "dataset": {"name": "digits", "train_subset": 800},
    "base": {"training": {"batch_size": 100}},
    "budget": {"steps": 24},
    "seeds": [0, 1],
    "arms": [
        {
            "label": "train-w16",
            "spec": {"method": "train", "model": {"name": "mlp", "hidden": [16]}},
        },
        {
            "label": "train-w64",
            "spec": {"method": "train", "model": {"name": "mlp", "hidden": [64]}},
        },
        {
            "label": "prune-d0.2",
            "spec": {"method": "prune", "density": 0.2, "model": {"name": "mlp", "hidden": [64]}},
        },
    ],
}


def photograph_studies(url: str) -> None:
    response = httpx.post(f"{url}/v1/studies", json=STUDY, timeout=60)
    response.raise_for_status()
    study_id = response.json()["id"]
    deadline = time.monotonic() + 600
    while not httpx.get(f"{url}/v1/studies/{study_id}").json()["artifacts"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"study {study_id} did not end with its artifacts")
        time.sleep(1)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page()
        shoot(page, f"{url}/studies", "studies")
        shoot(page, f"{url}/studies/{study_id}", "studies-study")
        browser.close()


def photograph_models(url: str) -> None:
    """Two versions of a model (one archived), a pruned model and a transfer built on it."""
    small = submit(url, {**TRAIN, "model": {"name": "mlp", "hidden": [32]}}, "models")
    large = submit(url, {**TRAIN, "model": {"name": "mlp", "hidden": [128]}}, "models")
    pruned = submit(url, {**TRAIN, "method": "prune", "density": 0.2}, "models")
    for job_id in (small, large, pruned):
        wait_finished(url, job_id)
    transfer = {"method": "transfer", "dataset": {"name": "digits"}, "source_job": pruned}
    moved = submit(url, {**transfer, "steps": 60}, "models")
    wait_finished(url, moved)
    for name, job_id in (("digits-mlp", small), ("digits-mlp", large), ("digits-sparse", pruned)):
        httpx.post(f"{url}/v1/models/{name}/versions", json={"job_id": job_id}).raise_for_status()
    httpx.post(f"{url}/v1/models/digits-transfer/versions", json={"job_id": moved})
    httpx.put(f"{url}/v1/models/digits-mlp/aliases/production", json={"version": 2})
    httpx.patch(f"{url}/v1/models/digits-mlp/versions/1", json={"archived": True})
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page()
        shoot(page, f"{url}/models", "models")
        shoot(page, f"{url}/models/digits-mlp", "models-versions")
        shoot(page, f"{url}/models/digits-transfer", "models-lineage")
        browser.close()


# The runs table with a metric and a spec column, a metric filter and a sort on the spec.
RUNS_TABLE = (
    "/?col=metrics.test_accuracy&col=spec.training.optimizer.lr"
    "&where=metrics.test_accuracy%3E0.5&sort=-spec.training.optimizer.lr"
)


def photograph_runs(url: str) -> None:
    """Four runs that differ in their optimizer and learning rate: the runs table's chosen
    columns, and accuracy against the learning rate on Compare (the section alone)."""
    runs = [("sgd", 0.1), ("sgd", 0.01), ("adam", 0.01), ("adam", 0.001)]
    ids = [
        submit(
            url, {**TRAIN, "training": {"epochs": 3, "optimizer": {"name": n, "lr": lr}}}, "runs"
        )
        for n, lr in runs
    ]
    for job_id in ids:
        wait_finished(url, job_id)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page()
        page.set_viewport_size({"width": 1280, "height": 600})
        page.goto(f"{url}{RUNS_TABLE}")
        page.locator("#jobs tbody tr").first.wait_for()
        # The chosen columns come last: scrolled into view, as a user would.
        page.locator(".table-wrap").evaluate("wrap => { wrap.scrollLeft = wrap.scrollWidth; }")
        page.screenshot(path=str(OUT / "runs-columns.png"))
        print(f"wrote {OUT / 'runs-columns'}.png")
        page.goto(f"{url}/compare?tag=runs&knob=spec.training.optimizer.lr")
        knob = page.locator("section", has=page.locator("#knob-plot"))
        knob.locator("circle").first.wait_for()
        knob.screenshot(path=str(OUT / "compare-knob.png"))
        print(f"wrote {OUT / 'compare-knob'}.png")
        browser.close()


def main() -> None:
    pages = {"models": photograph_models, "runs": photograph_runs}
    if len(sys.argv) == 2 and sys.argv[1] in pages:  # only those pages
        with tempfile.TemporaryDirectory(prefix="archsearch-shots-") as scratch:
            port = free_port()
            server = serve(Path(scratch), port)
            try:
                wait_ready(f"http://127.0.0.1:{port}")
                pages[sys.argv[1]](f"http://127.0.0.1:{port}")
            finally:
                server.send_signal(signal.SIGINT)
                server.wait(timeout=30)
        return
    only_studies = sys.argv[1:] == ["studies"]
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="archsearch-shots-") as scratch:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = serve(Path(scratch), port)
        try:
            wait_ready(url)
            if not only_studies:
                photograph(url)
                photograph_models(url)
            photograph_studies(url)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)


def photograph(url: str) -> None:
    dataset = upload_dataset(url)
    small = submit(url, {**TRAIN, "model": {"name": "mlp", "hidden": [32]}}, "demo", "small")
    large = submit(url, {**TRAIN, "model": {"name": "mlp", "hidden": [256, 128]}}, "demo")
    cnn = submit(url, {**TRAIN, "model": {"name": "cnn"}}, "demo", "cnn")
    for job_id in (small, large, cnn):
        wait_finished(url, job_id)
    # Two long jobs: one runs, one waits behind it (the queue page shows why).
    waiting = [submit(url, {**TRAIN, "training": {"epochs": 200}}, "long") for _ in range(2)]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page()
        shoot(page, f"{url}/", "jobs")
        shoot(page, f"{url}/", "jobs-390", width=390)
        shoot(page, f"{url}/jobs/{large}", "job")
        shoot(page, f"{url}/submit", "submit")
        shoot(page, f"{url}/compare?tag=demo", "compare")
        shoot(page, f"{url}/queue", "queue")
        shoot(page, f"{url}/datasets#{dataset}", "datasets")
        browser.close()
    for job_id in waiting:
        httpx.post(f"{url}/v1/jobs/{job_id}/cancel")


if __name__ == "__main__":
    main()
