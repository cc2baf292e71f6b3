"""docker-compose.yml cannot be started here (no Docker engine), so its consistency with the
settings and the CLI is checked instead."""

from __future__ import annotations

import shlex

import yaml
from click.testing import CliRunner

from archsearch.cli.main import main
from archsearch.jobs.platform.settings import Settings
from tests.conftest import REPO_ROOT

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def archsearch_services() -> dict[str, dict]:
    return {name: svc for name, svc in SERVICES.items() if svc.get("build")}


def test_every_variable_is_a_setting() -> None:
    fields = {f"ARCHSEARCH_{name.upper()}" for name in Settings.model_fields}
    for name, service in archsearch_services().items():
        unknown = set(service["environment"]) - fields
        assert not unknown, f"{name}: {unknown} are not settings"
        Settings(
            **{k.removeprefix("ARCHSEARCH_").lower(): v for k, v in service["environment"].items()}
        )


def test_every_command_is_a_cli_command() -> None:
    runner = CliRunner()
    for name, service in archsearch_services().items():
        args = [*service["command"], "--help"]
        result = runner.invoke(main, args)
        assert result.exit_code == 0, f"{name}: archsearch {shlex.join(args)}\n{result.output}"


def test_team_stack_shape() -> None:
    assert {"postgres", "redis", "migrate", "api", "worker"} <= set(SERVICES)
    worker = SERVICES["worker"]
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"] and devices[0]["driver"] == "nvidia"
    # API and workers share the artifact volume; the database has its own.
    assert "artifacts:/var/lib/archsearch/artifacts" in worker["volumes"]
    assert "artifacts:/var/lib/archsearch/artifacts" in SERVICES["api"]["volumes"]
    assert SERVICES["migrate"]["command"] == ["db", "upgrade"]
    assert {"pgdata", "artifacts"} <= set(COMPOSE["volumes"])
    readme = (REPO_ROOT / "README.md").read_text()
    assert "docker compose up" in readme


def test_ci_runs_the_readme_test_command() -> None:
    readme_blocks = (REPO_ROOT / "README.md").read_text().split("```bash\n")
    install_and_serve, install_and_test = (
        block.split("\n```")[0].strip() for block in readme_blocks[1:3]
    )
    assert install_and_serve.endswith("archsearch serve")
    assert install_and_test in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
