"""docker-compose.yml cannot be started here (no Docker engine), so its consistency with the
settings and the CLI, and its safe defaults, are checked on the parsed files."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from archsearch.cli.main import main
from archsearch.jobs.platform.settings import Settings
from tests.conftest import REPO_ROOT

COMPOSE_TEXT = (REPO_ROOT / "docker-compose.yml").read_text()
COMPOSE = yaml.safe_load(COMPOSE_TEXT)
SERVICES = COMPOSE["services"]
DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
ENV_EXAMPLE = (REPO_ROOT / ".env.example").read_text()

# Compose interpolation, the forms this file uses: `$$` (a literal $), `${VAR}`, `${VAR:?msg}`.
INTERPOLATION = re.compile(r"\$\$|\$\{(?P<name>\w+)(?P<required>:\?[^}]*)?\}")
SECRETS = {
    "POSTGRES_PASSWORD",
    "REDIS_PASSWORD",
    "MINIO_ROOT_USER",
    "MINIO_ROOT_PASSWORD",
    "SESSION_SECRET",
}


class MissingVariable(Exception):
    pass


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """What `docker compose` makes of `value` with the variables of `env` (its .env file)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match["name"]
        if match["required"] and not env.get(name):
            raise MissingVariable(name)
        return env.get(name, "")

    return INTERPOLATION.sub(substitute, value)


def env_file(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and line[0] != "#")
    return {name.strip(): value.strip() for name, value in pairs}


FILLED_ENV = {
    **env_file(ENV_EXAMPLE),
    **{name: f"filled-{name.lower().replace('_', '-')}" for name in SECRETS},
}
# The API refuses a session secret shorter than 32 characters at start.
FILLED_ENV["SESSION_SECRET"] = "filled-session-secret-of-forty-characters"
FILLED = interpolate(COMPOSE, FILLED_ENV)
FILLED_SERVICES = FILLED["services"]


def archsearch_services() -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in FILLED_SERVICES.items() if svc.get("build")}


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
    assert {"postgres", "redis", "migrate", "bootstrap", "api", "worker-cpu", "worker-gpu"} <= set(
        SERVICES
    )
    gpu = SERVICES["worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"] and devices[0]["driver"] == "nvidia"
    # API and workers share the artifact volume; the database has its own.
    for name in ("api", "worker-cpu", "worker-gpu"):
        assert "artifacts:/var/lib/archsearch/artifacts" in SERVICES[name]["volumes"], name
    assert SERVICES["migrate"]["command"] == ["db", "upgrade"]
    assert {"pgdata", "artifacts"} <= set(COMPOSE["volumes"])
    readme = (REPO_ROOT / "README.md").read_text()
    assert "docker compose up" in readme


def test_the_stack_refuses_to_start_until_every_secret_is_filled() -> None:
    example = env_file(ENV_EXAMPLE)
    assert {name for name, value in example.items() if not value} == SECRETS
    for name in SECRETS:
        with pytest.raises(MissingVariable, match=name):
            interpolate(COMPOSE, {**FILLED_ENV, name: example[name]})
    # Each secret is used only through a required interpolation, never with a default.
    for name in SECRETS:
        uses = re.findall(rf"\$\{{{name}([^}}]*)\}}", COMPOSE_TEXT)
        assert uses and all(use.startswith(":?") for use in uses), (name, uses)


def test_no_default_credentials() -> None:
    env = archsearch_services()["api"]["environment"]
    assert env["ARCHSEARCH_DATABASE_URL"] == (
        "postgresql://archsearch:filled-postgres-password@postgres:5432/archsearch"
    )
    assert env["ARCHSEARCH_BROKER_URL"] == "redis://:filled-redis-password@redis:6379/0"
    assert env["ARCHSEARCH_S3_SECRET_ACCESS_KEY"] == "filled-minio-root-password"
    assert env["ARCHSEARCH_AUTH"] == "token"
    assert FILLED_SERVICES["postgres"]["environment"]["POSTGRES_PASSWORD"] == (
        "filled-postgres-password"
    )
    minio = FILLED_SERVICES["minio"]["environment"]
    assert minio["MINIO_ROOT_PASSWORD"] == "filled-minio-root-password"
    # The bucket step reads the MinIO secret from its environment, not from its command line.
    bucket_command = " ".join(FILLED_SERVICES["minio-bucket"]["command"])
    assert "filled-minio" not in bucket_command and '"$MINIO_ROOT_PASSWORD"' in bucket_command


def test_redis_requires_a_password() -> None:
    redis = FILLED_SERVICES["redis"]
    command = redis["command"]
    assert command[command.index("--requirepass") + 1] == "filled-redis-password"
    # Its health check must authenticate too, or it reports a healthy Redis as down.
    assert redis["environment"]["REDISCLI_AUTH"] == "filled-redis-password"


def test_ports_are_published_on_loopback_only() -> None:
    published = {name: port for name, svc in SERVICES.items() for port in svc.get("ports", [])}
    assert "api" in published
    for name, port in published.items():
        assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond this host"


def test_containers_run_as_an_unprivileged_user() -> None:
    users = [line.split()[1] for line in DOCKERFILE.splitlines() if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    # USER comes after the last RUN, so nothing that runs at start is root.
    lines = [line.split()[0] for line in DOCKERFILE.splitlines() if line and line[0].isupper()]
    assert max(i for i, word in enumerate(lines) if word == "RUN") < lines.index("USER")
    assert not any("user" in svc for svc in SERVICES.values() if svc.get("build"))


def test_a_cpu_host_can_start_the_stack() -> None:
    cpu, gpu = SERVICES["worker-cpu"], SERVICES["worker-gpu"]
    assert cpu["profiles"] == ["cpu"] and cpu["command"] == ["worker", "--device", "cpu"]
    assert "deploy" not in cpu
    assert gpu["profiles"] == ["gpu"] and gpu["command"] == ["worker", "--device", "cuda"]
    # Every service that asks for a GPU is behind a profile; .env.example starts the CPU one.
    for name, svc in SERVICES.items():
        if "deploy" in svc:
            assert svc.get("profiles"), f"{name} reserves a GPU without a profile"
    assert env_file(ENV_EXAMPLE)["COMPOSE_PROFILES"] == "cpu"


def test_a_bootstrap_step_creates_the_first_admin() -> None:
    bootstrap = SERVICES["bootstrap"]
    assert bootstrap["command"][:2] == ["admin", "bootstrap"]
    assert bootstrap["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    # A profile of its own: `docker compose run --rm bootstrap`, never part of `up`.
    assert bootstrap["profiles"] == ["bootstrap"]
    readme = (REPO_ROOT / "README.md").read_text()
    assert "docker compose run --rm bootstrap" in readme
    assert "cp .env.example .env" in readme


def test_ci_runs_the_readme_test_command() -> None:
    readme_blocks = (REPO_ROOT / "README.md").read_text().split("```bash\n")
    install_and_serve, install_and_test = (
        block.split("\n```")[0].strip() for block in readme_blocks[1:3]
    )
    assert install_and_serve.endswith("archsearch serve")
    assert install_and_test in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
