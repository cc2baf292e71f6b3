"""The autoscaler counts slots: each KEDA ScaledObject's `targetQueryValue` is its workers'
`ARCHSEARCH_WORKER_SLOTS`, copied by the overlay's replacements from the Deployment, so
that KEDA asks for ceil(jobs / slots) pods. Rendered with the real `kubectl kustomize`, as
shipped and from a copy of the tree whose slots were changed in the Deployments alone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from archsearch.jobs.platform.settings import Settings
from tests.k8s.conftest import K8S_ROOT, kubectl, render

WORKERS = {"archsearch-worker-cpu": "base/worker.yaml",
           "archsearch-worker-gpu": "components/gpu-worker/worker-gpu.yaml"}  # fmt: skip
SLOTS_LINE = '- name: ARCHSEARCH_WORKER_SLOTS\n              value: "1"'


def slots_and_targets(objects: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Each worker Deployment's slots and its ScaledObject's target, by Deployment name."""
    slots = {}
    for deployment in (o for o in objects if o["kind"] == "Deployment"):
        if deployment["metadata"]["name"] in WORKERS:
            (container,) = deployment["spec"]["template"]["spec"]["containers"]
            env = {var["name"]: var.get("value") for var in container["env"]}
            slots[deployment["metadata"]["name"]] = int(env["ARCHSEARCH_WORKER_SLOTS"])
    targets = {}
    for scaled in (o for o in objects if o["kind"] == "ScaledObject"):
        (trigger,) = scaled["spec"]["triggers"]
        targets[scaled["spec"]["scaleTargetRef"]["name"]] = int(
            trigger["metadata"]["targetQueryValue"]
        )
    return {name: (slots[name], targets[name]) for name in WORKERS}


def test_shipped_targets_are_the_workers_slots() -> None:
    found = slots_and_targets(render("keda"))
    assert all(slots == target for slots, target in found.values()), found
    # The default: one job per pod, as before slots.
    assert found["archsearch-worker-cpu"][0] == Settings().worker_slots == 1


def test_changing_a_deployments_slots_changes_its_target(tmp_path: Path) -> None:
    tree = tmp_path / "k8s"
    shutil.copytree(K8S_ROOT, tree)
    for name, slots in (("archsearch-worker-cpu", 2), ("archsearch-worker-gpu", 4)):
        manifest = tree / WORKERS[name]
        text = manifest.read_text()
        assert text.count(SLOTS_LINE) == 1, f"{WORKERS[name]} names its slots once"
        manifest.write_text(text.replace(SLOTS_LINE, SLOTS_LINE.replace('"1"', f'"{slots}"')))
    result = subprocess.run(
        [kubectl(), "kustomize", str(tree / "overlays" / "keda")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        pytest.fail(f"kubectl kustomize failed:\n{result.stderr}")
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    assert slots_and_targets(objects) == {
        "archsearch-worker-cpu": (2, 2),
        "archsearch-worker-gpu": (4, 4),
    }
