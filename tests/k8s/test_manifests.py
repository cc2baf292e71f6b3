"""deploy/k8s: every overlay renders, validates against the Kubernetes and KEDA schemas, and
keeps the rules a cluster would not check for us (non-root, no literal secret, GPU only
where asked, probes, a grace period longer than the worker's own stop deadline)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from archsearch.jobs.platform.settings import Settings
from tests.conftest import REPO_ROOT
from tests.k8s.conftest import OVERLAYS, SCHEMAS, ensure_python_tool

KUBERNETES_VERSION = "1.32.0"
CONFIG = "archsearch-config"
PGBOUNCER = "archsearch-pgbouncer"
GRACE_MARGIN = 60  # seconds beyond the stop grace and one lease
GENERATED_SUFFIX = re.compile(r"(?<=^archsearch-pgbouncer)-[a-z0-9]{10}$")
README = (REPO_ROOT / "README.md").read_text()
Objects = dict[str, list[dict[str, Any]]]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def pod_specs(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o["spec"]["template"]["spec"] for o in objects if o["kind"] in ("Deployment", "Job")]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def names(objects: list[dict[str, Any]]) -> list[str]:
    # A generated ConfigMap's name ends in a hash of its content: compared without it.
    return sorted(f"{o['kind']}/{GENERATED_SUFFIX.sub('', o['metadata']['name'])}" for o in objects)


def archsearch_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (config,) = [o for o in of_kind(objects, "ConfigMap") if o["metadata"]["name"] == CONFIG]
    return config


def test_every_overlay_renders_the_stack(rendered: Objects) -> None:
    common = {
        "ConfigMap/archsearch-config",
        "Deployment/archsearch-api",
        "Deployment/archsearch-worker-cpu",
        "Job/archsearch-migrate",
        "PodDisruptionBudget/archsearch-api",
        "Service/archsearch-api",
        "ServiceAccount/archsearch",
        "NetworkPolicy/archsearch-default-deny",
        "NetworkPolicy/archsearch-api-ingress",
        "NetworkPolicy/archsearch-egress-dns",
        "NetworkPolicy/archsearch-egress-state",
        "NetworkPolicy/archsearch-egress-internet",
    }
    gpu = {"Deployment/archsearch-worker-gpu"}
    keda = {"ScaledObject/archsearch-worker-cpu", "ScaledObject/archsearch-worker-gpu"}
    pgbouncer = {
        "ConfigMap/archsearch-pgbouncer",
        "Deployment/archsearch-pgbouncer",
        "Service/archsearch-pgbouncer",
        "PodDisruptionBudget/archsearch-pgbouncer",
        "NetworkPolicy/archsearch-pgbouncer-ingress",
    }
    assert set(names(rendered["cpu"])) == common
    assert set(names(rendered["gpu"])) == common | gpu
    assert set(names(rendered["keda"])) == common | gpu | keda | pgbouncer
    assert set(names(rendered["kueue"])) == common | gpu | keda | pgbouncer
    for objects in rendered.values():
        assert {o["metadata"]["namespace"] for o in objects} == {"archsearch"}


def test_builtin_kinds_validate_against_the_kubernetes_schemas(
    rendered: Objects, tmp_path: Path
) -> None:
    ensure_python_tool("kubernetes_validate")
    for overlay, objects in rendered.items():
        builtin = [o for o in objects if o["kind"] != "ScaledObject"]
        path = tmp_path / f"{overlay}.yaml"
        path.write_text(yaml.safe_dump_all(builtin))
        command = [
            sys.executable, "-m", "kubernetes_validate", "--strict",
            "-k", KUBERNETES_VERSION, str(path),
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{overlay}: {result.stdout}{result.stderr}"
        assert result.stdout.count("INFO") == len(builtin), result.stdout
    # The schemas are live: a misspelt field is rejected.
    broken = [o for o in rendered["cpu"] if o["kind"] == "Deployment"][0]
    spec = broken["spec"]["template"]["spec"]
    broken = {**broken, "spec": {**broken["spec"], "template": {"spec": {**spec, "grace": 1}}}}
    path.write_text(yaml.safe_dump(broken))
    command[-1] = str(path)
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert "ERROR" in result.stdout and "'grace' was unexpected" in result.stdout


def test_scaled_objects_validate_against_kedas_crd(rendered: Objects, tmp_path: Path) -> None:
    ensure_python_tool("check_jsonschema")
    crd = yaml.safe_load((SCHEMAS / "keda.sh_scaledobjects.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema_path = tmp_path / "scaledobject.schema.json"
    schema_path.write_text(json.dumps(version["schema"]["openAPIV3Schema"]))
    scaled = of_kind(rendered["keda"], "ScaledObject")
    paths = []
    for obj in scaled:
        paths.append(tmp_path / f"{obj['metadata']['name']}.json")
        paths[-1].write_text(json.dumps(obj))
    command = [sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema_path)]
    result = subprocess.run([*command, *map(str, paths)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # The schema is live: a trigger without its `type` is rejected.
    broken = json.loads(paths[0].read_text())
    del broken["spec"]["triggers"][0]["type"]
    paths[0].write_text(json.dumps(broken))
    result = subprocess.run([*command, str(paths[0])], capture_output=True, text=True)
    assert result.returncode == 1 and "type" in result.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_runs_unprivileged(rendered: Objects, overlay: str) -> None:
    for spec in pod_specs(rendered[overlay]):
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
        for container in containers(spec):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["readOnlyRootFilesystem"] is True
            assert security["capabilities"]["drop"] == ["ALL"]
            assert "privileged" not in security and security.get("runAsUser", 1) != 0
            # The writable paths are volumes: /tmp at least.
            assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}
            assert container["resources"]["requests"], container["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_literal_secret(rendered: Objects, overlay: str) -> None:
    objects = rendered[overlay]
    assert not of_kind(objects, "Secret")
    secret_fields = {"DATABASE_URL", "BROKER_URL", "ACCESS_KEY_ID", "SECRET_ACCESS_KEY", "SECRET"}
    for spec in pod_specs(objects):
        for container in containers(spec):
            for var in container.get("env", []):
                if any(var["name"].endswith(field) for field in secret_fields):
                    assert "value" not in var, var["name"]
                    assert var["valueFrom"]["secretKeyRef"]["name"] == "archsearch-secrets"
    config = archsearch_config(objects)
    assert not [k for k in config["data"] if any(k.endswith(f) for f in secret_fields)]
    for config in of_kind(objects, "ConfigMap"):
        assert "@" not in json.dumps(config["data"])  # no URL with credentials in it
        assert "password=" not in json.dumps(config["data"])  # nor a libpq password


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gpu_limits_only_on_gpu_workers(rendered: Objects, overlay: str) -> None:
    for obj in of_kind(rendered[overlay], "Deployment"):
        spec = obj["spec"]["template"]["spec"]
        limits = [c["resources"].get("limits", {}) for c in containers(spec)]
        gpus = sum(int(limit.get("nvidia.com/gpu", 0)) for limit in limits)
        if obj["metadata"]["name"] == "archsearch-worker-gpu":
            assert overlay in ("gpu", "keda", "kueue") and gpus == 1
            assert spec["tolerations"][0]["key"] == "nvidia.com/gpu"
            assert "nvidia.com/gpu.product" in spec["nodeSelector"]
            assert spec["containers"][0]["args"] == ["worker", "--device", "cuda"]
        else:
            assert gpus == 0, obj["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_api_probes_and_disruption_budget(rendered: Objects, overlay: str) -> None:
    objects = rendered[overlay]
    (api,) = [o for o in of_kind(objects, "Deployment") if o["metadata"]["name"].endswith("api")]
    (container,) = api["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    budgets = of_kind(objects, "PodDisruptionBudget")
    (budget,) = [b for b in budgets if b["metadata"]["name"] == "archsearch-api"]
    labels = api["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["spec"]["minAvailable"] == 1 < api["spec"]["replicas"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_get_the_time_to_hand_their_job_back(rendered: Objects, overlay: str) -> None:
    objects = rendered[overlay]
    settings = configured_settings(objects)
    workers = [o for o in of_kind(objects, "Deployment") if "worker" in o["metadata"]["name"]]
    assert workers
    for worker in workers:
        grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        # The stop deadline, one more step, the checkpoint and the hand-back fit the grace,
        # with a margin for Celery's shutdown and a slow object store.
        assert settings.stop_grace_seconds + settings.lease_seconds + GRACE_MARGIN <= grace


def configured_settings(objects: list[dict[str, Any]]) -> Settings:
    config = archsearch_config(objects)
    return Settings.model_validate(
        {k.removeprefix("ARCHSEARCH_").lower(): v for k, v in config["data"].items()}
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_take_the_torch_threads_their_pod_requests(rendered: Objects, overlay: str) -> None:
    workers = [
        o for o in of_kind(rendered[overlay], "Deployment") if "worker" in o["metadata"]["name"]
    ]
    for worker in workers:
        (container,) = worker["spec"]["template"]["spec"]["containers"]
        env = {var["name"]: var for var in container["env"]}
        field = env["ARCHSEARCH_TORCH_THREADS"]["valueFrom"]["resourceFieldRef"]
        assert field == {"resource": "requests.cpu", "divisor": "1"}
        assert int(container["resources"]["requests"]["cpu"]) >= 1


def test_config_keys_are_settings_and_the_migration_runs_upgrade(rendered: Objects) -> None:
    config = archsearch_config(rendered["cpu"])
    fields = {f"ARCHSEARCH_{name.upper()}" for name in Settings.model_fields}
    assert set(config["data"]) <= fields
    (job,) = of_kind(rendered["cpu"], "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]
    for deployment in of_kind(rendered["cpu"], "Deployment"):
        (wait,) = deployment["spec"]["template"]["spec"]["initContainers"]
        assert "archsearch db current" in wait["command"][-1]


def test_readme_creates_every_secret_key_the_manifests_read(rendered: Objects) -> None:
    section = README.split("## Running on Kubernetes")[1].split("\n## ")[0]
    created = set(re.findall(r"--from-literal=([a-z0-9-]+)=", section))
    read = set()
    for spec in pod_specs(rendered["keda"]):
        for container in containers(spec):
            for var in container.get("env", []):
                ref = var.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] == "archsearch-secrets"
                    read.add(ref["key"])
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                assert volume["secret"]["secretName"] == "archsearch-secrets"
                read.update(item["key"] for item in volume["secret"]["items"])
    assert created == read
    for overlay in OVERLAYS:
        assert f"deploy/k8s/overlays/{overlay}" in section or f"overlays/{overlay}" in section


def test_the_api_runs_the_slim_image_and_only_workers_carry_the_engine(rendered: Objects) -> None:
    # Every image resolves through a kustomization's image list (a component's resources are
    # outside the base's list), and the API side never pulls the torch image.
    for overlay, objects in rendered.items():
        for o in objects:
            if o["kind"] not in ("Deployment", "Job") or o["metadata"]["name"] == PGBOUNCER:
                continue
            worker = o["metadata"]["name"].startswith("archsearch-worker")
            expected = "archsearch-worker" if worker else "archsearch-api"
            for container in containers(o["spec"]["template"]["spec"]):
                image = container["image"]
                assert image.startswith(f"ghcr.io/example/{expected}:"), (overlay, image)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_image_is_pinned_to_a_release(rendered: Objects, overlay: str) -> None:
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    for spec in pod_specs(rendered[overlay]):
        for container in containers(spec):
            name, _, tag = container["image"].rpartition(":")
            assert name and "/" not in tag and tag not in ("", "latest"), container["image"]
            if name.startswith("ghcr.io/example/archsearch-"):
                assert tag == version, container["image"]
