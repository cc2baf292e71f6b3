"""Every fenced snippet of the README runs as written, or is checked for what it claims.

The snippets run in README order in one scratch folder, against real servers: an embedded
`archsearch serve`, and for the team section a real API and Celery worker on a fresh
PostgreSQL database and Redis. The only thing a test changes is where they point: the
server's port comes from ARCHSEARCH_URL / ARCHSEARCH_PORT (free ports, as a user with
8000 taken would do), and in python the address `http://127.0.0.1:8000` is that URL. The
`pip install` lines are not executed; their extras are checked against pyproject.toml.
`console` fences run their `$ ` lines (the output lines shown are not compared). The `py`
fences run in test_readme_deploy.py, the `sh` fence (Kubernetes) is checked against the
manifests in tests/k8s; the `dotenv` fence names settings that exist; the `text` fence is
the layout, whose folders exist.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from archsearch.jobs.platform.settings import Settings
from tests.conftest import REPO_ROOT, TEST_DATASETS
from tests.embedded import start_embedded
from tests.service import procs

pytestmark = pytest.mark.slow

README = (REPO_ROOT / "README.md").read_text()
FENCES = re.findall(r"^```(\w*)\n(.*?)^```", README, re.DOTALL | re.MULTILINE)
SNIPPETS = [(language, text) for language, text in FENCES if language in ("bash", "python")]
DEFAULT_URL = "http://127.0.0.1:8000"
TEAM_COMMANDS = ("archsearch db upgrade", "archsearch admin")


def snippets(kind: str) -> list[str]:
    """The snippets of one kind: install lines, team commands, or the rest (client side)."""
    out = []
    for language, text in SNIPPETS:
        if "pip install" in text:
            group = "install"
        elif any(command in text for command in TEAM_COMMANDS):
            group = "team"
        else:
            group = language
        if group == kind:
            out.append(text)
    return out


def fences(language: str) -> list[str]:
    return [text for kind, text in FENCES if kind == language]


def test_every_snippet_is_covered() -> None:
    counts = {kind: len(snippets(kind)) for kind in ("install", "team", "bash", "python")}
    assert sum(counts.values()) == len(SNIPPETS)
    assert counts == {"install": 2, "team": 2, "bash": 2, "python": 2}
    languages = {kind: len(fences(kind)) for kind, _ in FENCES}
    # Every fence has a language, and each language is run or checked by a test here.
    # `sh` is the Kubernetes bootstrap, checked against the manifests in tests/k8s.
    expected = {"bash": 6, "python": 2, "console": 1, "dotenv": 1, "py": 2, "text": 1, "sh": 1}
    assert languages == expected


def console_commands(text: str) -> str:
    """The `$ ` lines of a console fence, as one script."""
    return "\n".join(line[2:] for line in text.splitlines() if line.startswith("$ "))


def test_the_dotenv_fence_names_real_settings() -> None:
    (text,) = fences("dotenv")
    names = re.findall(r"^([A-Z0-9_]+)=", text, re.MULTILINE)
    settings = {f"ARCHSEARCH_{name.upper()}" for name in Settings.model_fields}
    for name in names:
        assert name in settings or name.startswith("AWS_"), name
    for mentioned in re.findall(r"ARCHSEARCH_[A-Z0-9_]+", text):
        assert mentioned in settings, mentioned


def test_the_layout_names_folders_that_exist() -> None:
    (text,) = fences("text")
    for folder in re.findall(r"^ *([a-z_]+)/ ", text, re.MULTILINE):
        assert any((base / folder).is_dir() for base in (REPO_ROOT, REPO_ROOT / "archsearch")), (
            folder
        )


def test_the_install_lines_name_the_right_extras() -> None:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    serve, test = (text.strip() for text in snippets("install"))
    assert serve == "pip install torch==2.13.0 -e '.[server]' && archsearch serve"
    assert test == "pip install torch==2.13.0 -e '.[server,dev]' && python -m pytest"
    assert "archsearch[api]" in extras["server"]  # the API's packages, then the engine's
    server_needs = " ".join(extras["server"] + extras["api"])
    for package in ("torch", "fastapi", "uvicorn", "sqlalchemy", "alembic", "celery"):
        assert package in server_needs
    assert any(requirement.startswith("pytest") for requirement in extras["dev"])


def run_bash(script: str, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"{script}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def embedded_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port, logs = procs.free_port(), tmp_path_factory.mktemp("logs")
    server = start_embedded(tmp_path_factory.mktemp("home"), port, logs)
    yield f"http://127.0.0.1:{port}"
    server.stop()


def test_the_client_snippets_run_against_an_embedded_server(
    embedded_url: str, tmp_path: Path
) -> None:
    first_job, _ = snippets("bash")
    shown = run_bash(first_job, tmp_path, {"ARCHSEARCH_URL": embedded_url})
    assert "succeeded" in shown
    assert {"spec.json", "model.safetensors", "architecture.json"} <= {
        p.name for p in (tmp_path / "result").iterdir()
    }

    client, rebuild = snippets("python")
    assert DEFAULT_URL in client
    for code in (client.replace(DEFAULT_URL, embedded_url), rebuild):
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
        )
        assert result.returncode == 0, f"{code}\n{result.stderr}"
        if code is not rebuild:
            assert result.stdout.startswith("succeeded "), result.stdout
    assert (tmp_path / "out" / "model.safetensors").is_file()


@pytest.mark.timeout(1200)
def test_the_study_example_runs_as_written(embedded_url: str, tmp_path: Path) -> None:
    """The study's file, then the console fence's commands: a dry run, the study, its table
    once it has ended, and its results."""
    _, study_file = snippets("bash")
    (study,) = fences("console")
    script = study_file + console_commands(study)
    shown = run_bash(script, tmp_path, {"ARCHSEARCH_URL": embedded_url}, timeout=1100)
    assert "10 jobs" in shown and "Nothing was queued" in shown  # the dry run
    assert "finished" in shown and "grow-p" in shown and "prune-units-d0.2" in shown
    assert "rigl-d0.2" in shown
    folder = next(tmp_path.glob("study-*"))
    assert {"results.csv", "report.md"} <= {p.name for p in folder.iterdir()}


@pytest.fixture()
def team_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    name = f"archsearch_readme_{uuid.uuid4().hex[:10]}"
    port = procs.free_port()
    env = {
        "ARCHSEARCH_DATABASE_URL": procs.create_database(name),
        "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"archsearch-readme-{uuid.uuid4().hex[:8]}",
        "ARCHSEARCH_HOME": str(tmp_path / "home"),
        "ARCHSEARCH_ARTIFACT_ROOT": str(tmp_path / "artifacts"),
        "ARCHSEARCH_DATA_DIR": str(TEST_DATASETS),
        "ARCHSEARCH_PORT": str(port),
        "ARCHSEARCH_URL": f"http://127.0.0.1:{port}",
    }
    yield env
    procs.drop_database(name)


@pytest.mark.service
def test_the_team_snippets_run_against_postgres_and_redis(
    team_env: dict[str, str], tmp_path: Path
) -> None:
    start, bootstrap = snippets("team")
    log = tmp_path / "team.log"
    # The snippet backgrounds the API and the worker: they live in its process group.
    with open(log, "wb") as handle:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", f"{start}\nwait"],
            cwd=tmp_path,
            env={**os.environ, **team_env},
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proc = procs.Proc("team", shell, log)
    try:
        procs.wait_http(f"{team_env['ARCHSEARCH_URL']}/readyz", proc, timeout=180)
        procs.wait_log(proc, "ready.", timeout=180)
        listed = run_bash(bootstrap, tmp_path, team_env)
        assert "id" in listed and "created" in listed
    finally:
        proc.stop()
    assert "database at revision" in proc.log()
    assert "Context impl" not in proc.log()  # Alembic's INFO lines stay out of sight
