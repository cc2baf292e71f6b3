"""docker-compose.yml cannot be started here (no Docker engine), so its consistency with the
settings and the CLI, and its safe defaults, are checked on the parsed files."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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
    "MINIO_APP_USER",
    "MINIO_APP_PASSWORD",
    "SESSION_SECRET",
    "SECRET_KEYS",
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
# ... and keys that are not Fernet keys (32 bytes of url-safe base64).
FILLED_ENV["SECRET_KEYS"] = "ZmlsbGVkLXNlY3JldC1rZXlzLW9mLTMyLWJ5dGVzLi4="
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
    assert env["ARCHSEARCH_S3_SECRET_ACCESS_KEY"] == "filled-minio-app-password"
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


def dockerfile_stages() -> dict[str, list[str]]:
    """The instruction lines of each named stage (`FROM ... AS name`), continuations joined."""
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in DOCKERFILE.replace("\\\n", " ").splitlines():
        if line.startswith("FROM "):
            current = stages.setdefault(line.split()[-1], [])
        if line and line[0].isupper():
            current.append(line)
    return stages


def test_containers_run_as_an_unprivileged_user() -> None:
    for name, lines in dockerfile_stages().items():
        words = [line.split()[0] for line in lines]
        if "ENTRYPOINT" not in words:
            continue  # a stage only built upon
        users = [line.split()[1] for line in lines if line.startswith("USER ")]
        assert users and users[-1].split(":")[0] not in {"root", "0"}, name
        # USER comes after the last RUN, so nothing that runs at start is root.
        assert max(i for i, word in enumerate(words) if word == "RUN") < words.index("USER")
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


# ---- images, object-store user, compose schema ------------------------------------------

SCHEMA = REPO_ROOT / "tests" / "compose" / "schemas" / "compose-spec.json"
VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
ENGINE = {"torch", "torchdiffeq", "safetensors", "scikit-learn", "matplotlib", "onnx"}


def check_schema(path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA), str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_compose_file_is_valid_against_the_compose_spec(tmp_path: Path) -> None:
    # As written (interpolation left to compose) and as compose sees it with .env filled.
    assert check_schema(REPO_ROOT / "docker-compose.yml").returncode == 0
    filled = tmp_path / "filled.yml"
    filled.write_text(yaml.safe_dump(FILLED))
    result = check_schema(filled)
    assert result.returncode == 0, result.stdout + result.stderr
    # The schema bites: a misspelt key is refused.
    broken = tmp_path / "broken.yml"
    broken.write_text(COMPOSE_TEXT.replace("    healthcheck:", "    healtcheck:", 1))
    assert check_schema(broken).returncode == 1


def test_the_api_and_workers_never_use_the_object_store_root() -> None:
    for name, service in archsearch_services().items():
        values = " ".join(str(v) for v in service["environment"].values())
        assert "filled-minio-root" not in values, name
        assert service["environment"]["ARCHSEARCH_S3_ACCESS_KEY_ID"] == "filled-minio-app-user"
    bucket = FILLED_SERVICES["minio-bucket"]
    script = " ".join(bucket["command"])
    for step in ("mc admin user add", "mc admin policy create", "mc admin policy attach"):
        assert step in script
    assert "filled-minio" not in script  # secrets come from the environment
    # The policy names the bucket of ARCHSEARCH_STORAGE_URL and nothing wider.
    policy_file = REPO_ROOT / "deploy" / "minio" / "bucket-policy.json"
    assert (
        f"./{policy_file.relative_to(REPO_ROOT)}:/policy/bucket-policy.json:ro"
        in (bucket["volumes"])
    )
    storage_url = archsearch_services()["api"]["environment"]["ARCHSEARCH_STORAGE_URL"]
    bucket_name = storage_url.removeprefix("s3://").split("/")[0]
    resources = {
        r for st in json.loads(policy_file.read_text())["Statement"] for r in st["Resource"]
    }
    assert resources == {f"arn:aws:s3:::{bucket_name}", f"arn:aws:s3:::{bucket_name}/*"}
    assert all(not a.startswith("s3:*") and "admin" not in a for a in policy_actions(policy_file))


def policy_actions(path: Path) -> list[str]:
    return [a for st in json.loads(path.read_text())["Statement"] for a in st["Action"]]


def test_each_image_is_built_once_from_a_target_and_tagged() -> None:
    stages = dockerfile_stages()
    builds: dict[str, dict[str, Any]] = {}
    for name, service in archsearch_services().items():
        build, image = service["build"], service.get("image")
        assert isinstance(build, dict) and build["target"] in stages, name
        assert image and image.endswith(f":{VERSION}"), (name, image)
        assert builds.setdefault(image, build) == build, f"{image} built two ways"
    targets = {name: svc["build"]["target"] for name, svc in archsearch_services().items()}
    assert targets == {
        "migrate": "api",
        "bootstrap": "api",
        "api": "api",
        "worker-cpu": "worker",
        "worker-gpu": "worker",
    }


def test_the_api_has_a_healthcheck_in_compose_and_in_its_image() -> None:
    api = FILLED_SERVICES["api"]
    port = api["command"][api["command"].index("--port") + 1]
    probe = " ".join(api["healthcheck"]["test"])
    assert api["healthcheck"]["test"][0] == "CMD" and f"127.0.0.1:{port}/healthz" in probe
    healthchecks = [line for line in dockerfile_stages()["api"] if line.startswith("HEALTHCHECK")]
    assert healthchecks and "/healthz" in healthchecks[0] and " CMD " in healthchecks[0]


def test_the_images_install_only_pinned_packages() -> None:
    runs = [line for lines in dockerfile_stages().values() for line in lines]
    installs = [part for line in runs for part in line.split("&&") if "pip install" in part]
    assert installs and all("-c constraints.txt" in part for part in installs), installs
    pins = dict(
        line.split("==")
        for line in (REPO_ROOT / "deploy" / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = extras["dependencies"] + [
        r for extra in ("api", "server", "gpu") for r in extras["optional-dependencies"][extra]
    ]
    for text in wanted:
        requirement = Requirement(text)
        if requirement.name == "archsearch":
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned in deploy/constraints.txt"
        assert requirement.specifier.contains(pins[name]), (text, pins[name])
    assert not {canonicalize_name(Requirement(r).name) for r in api_extra()} & ENGINE


def api_extra() -> list[str]:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["api"]


# The API process as `archsearch api` builds it, in a Python whose import system refuses
# every module of a distribution the API image does not install (argv[1]: their names).
API_PROCESS = """
import importlib.abc, json, sys
ABSENT = set(json.loads(sys.argv[1]))

class NotInTheImage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"{name} is not installed in the API image")

sys.meta_path.insert(0, NotInTheImage())
from archsearch.api.app import create_app
from archsearch.cli.main import main
from archsearch.server.processes import serve_team_api
from archsearch.jobs.platform.broker import CeleryEnqueuer
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
settings = Settings(broker_url="redis://127.0.0.1:1/0")
create_app(Services.from_settings(settings), CeleryEnqueuer(settings))
"""


def closure(requirements: list[str], extras: tuple[str, ...] = ()) -> set[str]:
    """The distributions these requirements install, from this machine's package metadata."""
    found: set[str] = set()
    todo = [(Requirement(text), extras) for text in requirements]
    while todo:
        requirement, _ = todo.pop()
        name = canonicalize_name(requirement.name)
        if requirement.name == "archsearch" or (name, *sorted(requirement.extras)) in found:
            continue
        found |= {name, (name, *sorted(requirement.extras))}  # type: ignore[arg-type]
        for text in metadata.distribution(requirement.name).requires or []:
            sub = Requirement(text)
            chosen = ("", *requirement.extras)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in chosen):
                sub.marker = None
                todo.append((sub, ()))
    return {item for item in found if isinstance(item, str)}


def test_the_api_image_installs_everything_the_api_process_imports(tmp_path: Path) -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    installed = closure(project["dependencies"] + api_extra()) | {"archsearch"}
    absent = sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if not {canonicalize_name(d) for d in dists} & installed
    )
    assert "torch" in absent and "fastapi" not in absent
    env = {"PATH": "/usr/bin:/bin", "ARCHSEARCH_HOME": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", API_PROCESS, json.dumps(absent)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
