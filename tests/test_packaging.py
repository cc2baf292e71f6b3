"""The wheel as a user gets it: one name in site-packages, and a light base install.

The wheel is built from a copy of the sources (the tree stays clean) and installed into
fresh virtual environments: one with only the base dependencies from the package index
(the client and the CLI: no torch, no server), one on top of this machine's packages with
the wheel alone, to import the server side from the installed copy.
"""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

GENERIC_NAMES = {"api", "cli", "client", "core", "jobs", "migrations", "worker", "server"}
SERVER_ONLY = ["torch", "sqlalchemy", "celery", "fastapi", "matplotlib", "scipy", "numpy"]


def run(*args: str | Path, cwd: Path) -> str:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(REPO_ROOT / "archsearch", source / "archsearch", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", dist,
        source, cwd=source)  # fmt: skip
    (built,) = dist.glob("archsearch-*.whl")
    return built


def venv(where: Path, *options: str) -> Path:
    # Without pip of its own (seeding one costs seconds): this pip installs into it.
    run(sys.executable, "-m", "venv", "--without-pip", *options, where, cwd=where.parent)
    return where / "bin"


def pip_install(bin_: Path, *args: str | Path) -> None:
    python = bin_ / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", *args, cwd=bin_)


def test_the_wheel_holds_archsearch_and_its_migrations_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {
        "archsearch",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    for expected in (
        "archsearch/migrations/env.py",
        "archsearch/migrations/script.py.mako",
        "archsearch/server/commands.py",
        "archsearch/client/client.py",
    ):
        assert expected in names
    assert any(n.startswith("archsearch/migrations/versions/0001_") for n in names)


def test_the_base_install_is_the_light_client(wheel: Path, tmp_path: Path) -> None:
    bin_ = venv(tmp_path / "light")
    pip_install(bin_, wheel)

    assert run(bin_ / "archsearch", "--version", cwd=tmp_path).strip() == "archsearch 0.1.0"
    run(bin_ / "python", "-c", "import archsearch.client, archsearch.cli.main", cwd=tmp_path)
    # The spec vocabulary is light: the schema prints and a spec parses without the server.
    schema = json.loads(run(bin_ / "archsearch", "spec-schema", "prune", cwd=tmp_path))
    assert schema["properties"]["method"]["const"] == "prune"
    spec = "{'method': 'train', 'dataset': {'name': 'digits'}}"
    parse = f"import archsearch.specs as s; s.parse_job_spec({spec})"
    run(bin_ / "python", "-c", parse, cwd=tmp_path)
    found = run(
        bin_ / "python",
        "-c",
        "import importlib.util as u, sys; "
        f"print(*[m for m in {SERVER_ONLY!r} if u.find_spec(m)], sep=',')",
        cwd=tmp_path,
    )
    assert found.strip() == ""
    (site_packages,) = (tmp_path / "light" / "lib").glob("python3*/site-packages")
    assert not GENERIC_NAMES & {p.name for p in site_packages.iterdir()}

    # A server command without the server: one line saying what to install.
    serve = subprocess.run(
        [bin_ / "archsearch", "serve"], cwd=tmp_path, capture_output=True, text=True
    )
    assert serve.returncode == 1
    assert serve.stdout.strip().splitlines() == [
        "error: `archsearch serve` needs the server, which is not installed here: "
        "pip install 'archsearch[server]'"
    ]


def see_this_environment(bin_: Path) -> None:
    """Let a fresh venv import the packages of the environment running the tests.

    `venv --system-site-packages` would show it the base interpreter's packages, which are
    not these when the tests themselves run in a virtualenv. A .pth line per site directory
    of this interpreter does, after the venv's own site-packages, so the wheel installed
    there wins; .pth files inside those directories (this checkout's editable finder) are not
    processed, so the editable install is never looked at.
    """
    (site_packages,) = bin_.parent.glob("lib/python3*/site-packages")
    (site_packages / "parent_environment.pth").write_text("\n".join(site.getsitepackages()))


def test_the_installed_copy_serves_the_server_side(wheel: Path, tmp_path: Path) -> None:
    bin_ = venv(tmp_path / "full")
    see_this_environment(bin_)
    # --ignore-installed: the editable install of this machine is never looked at, nor touched.
    pip_install(bin_, "--no-deps", "--ignore-installed", wheel)
    where = run(
        bin_ / "python",
        "-c",
        "import archsearch.core, archsearch.api.app, archsearch.server.commands as s; "
        "print(archsearch.core.__file__); print(archsearch.api.app.__file__); print(s.__file__)",
        cwd=tmp_path,
    )
    for path in where.split():
        assert Path(path).is_relative_to(tmp_path / "full"), where
