"""The README's deployment snippets run as written, on real job downloads.

An embedded `archsearch serve` runs a prune job of an MLP and one of a CNN on MNIST (small
subsets: the snippets check reproduction, not accuracy); their artifacts are downloaded with
the client, as `archsearch download` does. Each snippet then runs in a fresh interpreter in a
folder holding only `out/` (the download) and `mnist/` (the raw IDX files): the plain-PyTorch
one on the MLPs, the onnxruntime one on all (the MLP also pruned at unit granularity: its
compact model is a smaller dense MLP). Each asserts the accuracy it computes equals the job's
reported `test_accuracy`; the plain-PyTorch one must not import archsearch.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from archsearch.client import ArchsearchClient
from tests.conftest import REPO_ROOT, TEST_DATASETS
from tests.embedded import start_embedded
from tests.service import procs

pytestmark = pytest.mark.slow

SECTION = (REPO_ROOT / "README.md").read_text().split("## Deploying a model without archsearch")[1]
SNIPPETS = re.findall(r"```py\n(.*?)```", SECTION.split("\n## ")[0], re.DOTALL)
SMALL = {"name": "mnist", "train_subset": 2000}
JOBS = {
    "mlp": {"model": {"name": "mlp", "hidden": [64, 32]}},
    "cnn": {"model": {"name": "cnn", "channels": [8, 16], "hidden": [32]}},
    # Unit granularity: the compact model is a smaller dense network, every layer `dense`.
    "mlp-units": {"model": {"name": "mlp", "hidden": [64, 32]}, "granularity": "unit"},
}


@pytest.fixture(scope="module")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    port, logs = procs.free_port(), tmp_path_factory.mktemp("logs")
    server = start_embedded(tmp_path_factory.mktemp("home"), port, logs)
    try:
        with ArchsearchClient(f"http://127.0.0.1:{port}") as client:
            ids = {
                name: client.submit(
                    {"method": "prune", "dataset": SMALL, "density": 0.1, "training": {"epochs": 1}}
                    | body
                ).id
                for name, body in JOBS.items()
            }
            folders = {}
            for name, job_id in ids.items():
                job = client.wait(job_id)
                assert job.status == "succeeded", job
                folder = tmp_path_factory.mktemp(name)
                client.download_all(job_id, folder / "out")
                (folder / "mnist").symlink_to(TEST_DATASETS / "mnist")
                folders[name] = folder
        yield folders
    finally:
        server.stop()


def run_snippet(code: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{code}\n{result.stderr}"
    return result.stdout


def test_the_section_has_the_two_snippets() -> None:
    assert len(SNIPPETS) == 2
    plain, _ = SNIPPETS
    assert "archsearch" not in plain and "safetensors" in plain and "sparse_csr" in plain


@pytest.mark.parametrize("job", ["mlp", "mlp-units"])
def test_plain_pytorch_snippet_reproduces_the_mlp_accuracy(
    downloads: dict[str, Path], job: str
) -> None:
    plain, _ = SNIPPETS
    shown = run_snippet(plain, downloads[job])
    assert shown.startswith("accuracy "), shown


@pytest.mark.parametrize("family", sorted(JOBS))
def test_onnx_snippet_reproduces_the_accuracy(downloads: dict[str, Path], family: str) -> None:
    _, onnx = SNIPPETS
    shown = run_snippet(onnx, downloads[family])
    assert shown.startswith("accuracy ") and "first: " in shown, shown
