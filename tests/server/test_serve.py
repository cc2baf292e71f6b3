"""What a newcomer sees from `archsearch serve`: where to look, no Alembic chatter, a taken
port in one line, and API docs whose scripts come from the server itself, not a CDN."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlparse

import httpx
import pytest
import torch

from tests.embedded import embedded_env, start_embedded
from tests.service import procs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[procs.Proc, int]]:
    port = procs.free_port()
    server = start_embedded(tmp_path_factory.mktemp("home"), port, tmp_path_factory.mktemp("logs"))
    yield server, port
    server.stop()


def test_serve_says_where_to_look_and_nothing_of_alembic(served: tuple[procs.Proc, int]) -> None:
    server, port = served
    log = server.log()
    assert f"archsearch (embedded) at http://127.0.0.1:{port}" in log
    assert f"API docs: http://127.0.0.1:{port}/docs" in log
    assert "alembic" not in log.lower() and "Context impl" not in log


def test_a_taken_port_is_one_line(served: tuple[procs.Proc, int], tmp_path: Path) -> None:
    _, port = served
    second = subprocess.run(
        [sys.executable, "-m", "archsearch.cli.main", "serve", "--port", str(port)],
        env={**os.environ, **embedded_env(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 2
    assert (second.stdout + second.stderr).strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is taken (another archsearch serve?); "
        "stop it or pick another port with --port"
    ]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_load_nothing_from_another_host(served: tuple[procs.Proc, int], page: str) -> None:
    _, port = served
    base = f"http://127.0.0.1:{port}"
    html = httpx.get(base + page).text
    urls = re.findall(r"""https?://[^\s"'<>)]+""", html)
    assert all(urlparse(url).netloc == f"127.0.0.1:{port}" for url in urls), urls
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert any(asset.endswith(".js") for asset in assets), html
    for asset in assets:
        response = httpx.get(urljoin(base + page, asset))
        assert response.status_code == 200 and len(response.content) > 0, asset


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_cuda_job_on_a_server_without_cuda_is_refused_not_queued(
    served: tuple[procs.Proc, int],
) -> None:
    _, port = served
    base = f"http://127.0.0.1:{port}"
    spec = {"method": "train", "dataset": {"name": "digits"}, "resources": {"device": "cuda"}}
    answer = httpx.post(f"{base}/v1/jobs", json=spec, timeout=60)
    assert answer.status_code == 422, answer.text
    [problem] = answer.json()["detail"]
    assert problem["field"] == "resources.device" and "'auto'" in problem["message"]
    assert httpx.get(f"{base}/v1/jobs", timeout=60).json()["data"] == []
