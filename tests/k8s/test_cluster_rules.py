"""deploy/k8s as a cluster admin reviews it: NetworkPolicies that let in only the ingress
controller and let out only DNS, the state services and public HTTP(S); a ServiceAccount
with no token; size limits on every scratch volume with ephemeral-storage to match; the API
spread over nodes; workers probed on their progress; PgBouncer for the workers only; KEDA
scale-down that leaves a busy worker its hand-back; the Kueue overlay's labels; and the
README's overlay, which needs `kubectl` alone.

The NetworkPolicies are checked by evaluating them here, as a network plugin would, on the
connections that matter (`allowed`): the rendered objects are the input, not their text."""

from __future__ import annotations

import configparser
import ipaddress
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.k8s.conftest import K8S_ROOT, OVERLAYS, SCHEMAS, ensure_python_tool, kubectl
from tests.k8s.test_manifests import (
    Objects,
    configured_settings,
    containers,
    of_kind,
    pod_specs,
)

README = (REPO_ROOT / "README.md").read_text()
SECTION = README.split("## Running on Kubernetes")[1].split("\n## ")[0]
QUANTITY = re.compile(r"^(\d+)(Ki|Mi|Gi|Ti)?$")
UNITS = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
INGRESS_NAMESPACE = {"kubernetes.io/metadata.name": "ingress-nginx"}
PRIVATE = ("10.1.2.3", "172.20.0.5", "192.168.1.1", "169.254.169.254", "100.64.0.1", "127.0.0.1")


def size(quantity: str) -> int:
    match = QUANTITY.match(str(quantity))
    assert match, f"unexpected quantity {quantity!r}"
    return int(match[1]) * UNITS[match[2]]


def pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each workload's pod template by workload name."""
    return {
        o["metadata"]["name"]: o["spec"]["template"]
        for o in objects
        if o["kind"] in ("Deployment", "Job")
    }


# The NetworkPolicy semantics (networking.k8s.io/v1), for the peers these tests use: a pod
# of some namespace, or an IP address outside the cluster.


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        present = labels.get(expression["key"])
        if expression["operator"] == "In" and present not in expression["values"]:
            return False
        if expression["operator"] == "Exists" and present is None:
            return False
    return True


def peer_matches(rule_peer: dict[str, Any], peer: dict[str, Any], own_ns: str) -> bool:
    if "ipBlock" in rule_peer:
        if "ip" not in peer:
            return False
        address = ipaddress.ip_address(peer["ip"])
        block = rule_peer["ipBlock"]
        if address.version != ipaddress.ip_network(block["cidr"]).version:
            return False
        excepted = [ipaddress.ip_network(cidr) for cidr in block.get("except", [])]
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in network for network in excepted if network.version == address.version
        )
    if "ip" in peer:
        return False
    ns_selector = rule_peer.get("namespaceSelector")
    if ns_selector is None and peer["namespace"] != own_ns:
        return False
    if ns_selector is not None and not selects(ns_selector, peer["namespace_labels"]):
        return False
    return selects(rule_peer.get("podSelector", {}), peer["labels"])


def rule_allows(rule: dict[str, Any], side: str, peer: dict[str, Any], port: int) -> bool:
    ports = rule.get("ports")
    if ports is not None and not any(p["port"] == port for p in ports):
        return False
    peers = rule.get(side)
    return peers is None or any(peer_matches(p, peer, "archsearch") for p in peers)


def allowed(
    objects: list[dict[str, Any]],
    pod: dict[str, str],
    direction: str,
    peer: dict[str, Any],
    port: int,
) -> bool:
    """Whether the policies let `pod` (its labels) take (Ingress) or make (Egress) a TCP/UDP
    connection with `peer` on `port`."""
    kind, side = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    policies = [
        p["spec"]
        for p in of_kind(objects, "NetworkPolicy")
        if direction in p["spec"]["policyTypes"] and selects(p["spec"]["podSelector"], pod)
    ]
    if not policies:
        return True
    return any(rule_allows(r, side, peer, port) for p in policies for r in p.get(kind, []))


def in_cluster(namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "namespace_labels": {"kubernetes.io/metadata.name": namespace},
        "labels": labels or {},
    }


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_is_covered_by_the_default_deny(rendered: Objects, overlay: str) -> None:
    objects = rendered[overlay]
    stranger = in_cluster("default", {"app": "anything"})
    for name, template in pods(objects).items():
        labels = template["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "archsearch", name
        if labels["app.kubernetes.io/component"] != "api":
            for port in (8000, 6432, 22):
                if labels["app.kubernetes.io/component"] == "pgbouncer" and port == 6432:
                    continue
                assert not allowed(objects, labels, "Ingress", stranger, port), (name, port)
        assert not allowed(objects, labels, "Egress", {"ip": "203.0.113.9"}, 22), name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_api_is_reached_only_from_the_ingress_controller(
    rendered: Objects, overlay: str
) -> None:
    objects = rendered[overlay]
    api = pods(objects)["archsearch-api"]["metadata"]["labels"]
    controller = in_cluster("ingress-nginx", {"app.kubernetes.io/name": "ingress-nginx"})
    assert allowed(objects, api, "Ingress", controller, 8000)
    assert not allowed(objects, api, "Ingress", controller, 5432)
    assert not allowed(objects, api, "Ingress", in_cluster("default"), 8000)
    worker = pods(objects)["archsearch-worker-cpu"]["metadata"]["labels"]
    assert not allowed(objects, api, "Ingress", in_cluster("archsearch", worker), 8000)
    assert not allowed(objects, worker, "Ingress", controller, 8000)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_reach_dns_their_services_and_public_webhooks_only(
    rendered: Objects, overlay: str
) -> None:
    objects = rendered[overlay]
    dns = {
        "namespace": "kube-system",
        "namespace_labels": {"kubernetes.io/metadata.name": "kube-system"},
        "labels": {"k8s-app": "kube-dns"},
    }
    database = {"ip": "10.0.5.7"}  # a managed database at a private address
    for name, template in pods(objects).items():
        labels = template["metadata"]["labels"]
        assert allowed(objects, labels, "Egress", dns, 53), name
        assert allowed(objects, labels, "Egress", database, 5432), name
        assert not allowed(objects, labels, "Egress", in_cluster("default"), 53), name
        webhooks = labels["app.kubernetes.io/component"] in ("api", "worker")
        for port in (443, 80):
            assert allowed(objects, labels, "Egress", {"ip": "93.184.216.34"}, port) is webhooks
            assert allowed(objects, labels, "Egress", {"ip": "2606:2800::1"}, port) is webhooks
            for address in (*PRIVATE, "fd00::1", "fe80::1", "::1", "::ffff:10.0.0.1"):
                assert not allowed(objects, labels, "Egress", {"ip": address}, port), address
        if labels["app.kubernetes.io/component"] in ("api", "worker"):
            for port in (6379, 9000, 6432):
                assert allowed(objects, labels, "Egress", {"ip": "10.0.9.9"}, port), name


def test_pgbouncer_takes_the_workers_and_keda_only(rendered: Objects) -> None:
    objects = rendered["keda"]
    bouncer = pods(objects)["archsearch-pgbouncer"]["metadata"]["labels"]
    worker = pods(objects)["archsearch-worker-gpu"]["metadata"]["labels"]
    api = pods(objects)["archsearch-api"]["metadata"]["labels"]
    assert allowed(objects, bouncer, "Ingress", in_cluster("archsearch", worker), 6432)
    assert allowed(objects, bouncer, "Ingress", in_cluster("keda", {"app": "keda-operator"}), 6432)
    assert not allowed(objects, bouncer, "Ingress", in_cluster("archsearch", api), 6432)
    assert not allowed(objects, bouncer, "Ingress", in_cluster("default"), 6432)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_runs_as_the_service_account_without_a_token(
    rendered: Objects, overlay: str
) -> None:
    objects = rendered[overlay]
    (account,) = of_kind(objects, "ServiceAccount")
    assert account["metadata"]["name"] == "archsearch"
    assert account["automountServiceAccountToken"] is False
    for spec in pod_specs(objects):
        assert spec["serviceAccountName"] == "archsearch"
        assert spec["automountServiceAccountToken"] is False


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_scratch_volume_is_bounded_and_requested(rendered: Objects, overlay: str) -> None:
    for name, template in pods(rendered[overlay]).items():
        spec = template["spec"]
        limits = {
            v["name"]: size(v["emptyDir"]["sizeLimit"]) for v in spec["volumes"] if "emptyDir" in v
        }
        assert all(limits.values()), name
        for container in containers(spec):
            resources = container["resources"]
            assert size(resources["requests"]["ephemeral-storage"]) > 0, container["name"]
            mounted = [m["name"] for m in container["volumeMounts"] if m["name"] in limits]
            if container in spec["containers"]:
                # The pod is evicted past its containers' limits, emptyDir usage included.
                total = sum(limits[v] for v in mounted)
                assert size(resources["limits"]["ephemeral-storage"]) >= total, (name, mounted)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_api_replicas_spread_over_nodes(rendered: Objects, overlay: str) -> None:
    api = pods(rendered[overlay])["archsearch-api"]
    constraints = api["spec"]["topologySpreadConstraints"]
    (per_node,) = [c for c in constraints if c["topologyKey"] == "kubernetes.io/hostname"]
    assert per_node["whenUnsatisfiable"] == "DoNotSchedule" and per_node["maxSkew"] == 1
    assert selects(per_node["labelSelector"], api["metadata"]["labels"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_are_probed_on_their_heartbeat(
    rendered: Objects, overlay: str, tmp_path: Path
) -> None:
    objects = rendered[overlay]
    settings = configured_settings(objects)
    heartbeat = settings.lease_seconds / 3  # presence.start_presence's interval
    alive_file = settings.resolved_worker_alive_file
    workers = {n: t for n, t in pods(objects).items() if n.startswith("archsearch-worker")}
    assert workers
    for name, template in workers.items():
        (container,) = template["spec"]["containers"]
        for probe in ("startupProbe", "livenessProbe"):
            command = container[probe]["exec"]["command"]
            # The light entry point, not the CLI: a probe a minute in every worker pod.
            assert command[:3] == ["python", "-m", "archsearch.server.alive"], (name, probe)
            max_age = float(command[command.index("--max-age") + 1])
            assert max_age >= 3 * heartbeat, "a probe must survive a few slow heartbeats"
            # The command exists, with these options.
            help_ = subprocess.run(
                [sys.executable, *command[1:], "--help"], capture_output=True, text=True
            )
            assert help_.returncode == 0 and "--max-age" in help_.stdout, help_.stderr
        # The alive file is on a writable volume of the worker (the root is read-only).
        mounts = [Path(m["mountPath"]) for m in container["volumeMounts"] if not m.get("readOnly")]
        assert any(alive_file.is_relative_to(mount) for mount in mounts), alive_file


@pytest.mark.parametrize("overlay", ["keda", "kueue"])
def test_scale_down_leaves_a_busy_worker_its_hand_back(rendered: Objects, overlay: str) -> None:
    objects = rendered[overlay]
    settings = configured_settings(objects)
    graces = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        for o in of_kind(objects, "Deployment")
    }
    for scaled in of_kind(objects, "ScaledObject"):
        target = scaled["spec"]["scaleTargetRef"]["name"]
        assert graces[target] >= settings.stop_grace_seconds + settings.lease_seconds + 60
        behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        scale_down = behavior["scaleDown"]
        assert scale_down["stabilizationWindowSeconds"] >= 60
        assert scale_down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 60}]


@pytest.mark.parametrize("overlay", ["keda", "kueue"])
def test_workers_pool_their_connections_and_the_api_listens_directly(
    rendered: Objects, overlay: str
) -> None:
    objects = rendered[overlay]

    def database_key(template: dict[str, Any]) -> str:
        container = template["spec"]["containers"][0]
        (var,) = [v for v in container["env"] if v["name"] == "ARCHSEARCH_DATABASE_URL"]
        return str(var["valueFrom"]["secretKeyRef"]["key"])

    for name, template in pods(objects).items():
        if name.startswith("archsearch-worker"):
            assert database_key(template) == "database-url-pooled", name
        elif name in ("archsearch-api", "archsearch-migrate"):
            assert database_key(template) == "database-url", name
    (config,) = [
        c
        for c in of_kind(objects, "ConfigMap")
        if c["metadata"]["name"].startswith("archsearch-pg")
    ]
    ini = configparser.ConfigParser(inline_comment_prefixes=(";",), comment_prefixes=(";",))
    ini.read_string(config["data"]["pgbouncer.ini"])
    assert ini["pgbouncer"]["pool_mode"] == "transaction"
    assert int(ini["pgbouncer"]["max_prepared_statements"]) > 0
    assert ini["pgbouncer"]["listen_port"] == "6432"
    (service,) = [
        s for s in of_kind(objects, "Service") if s["metadata"]["name"].endswith("pgbouncer")
    ]
    assert service["spec"]["ports"][0]["port"] == 6432
    assert "archsearch-pgbouncer:6432/" in SECTION  # the README's pooled URL names the Service


def test_psycopg_drops_prepared_statements_as_pgbouncer_understands() -> None:
    # Under transaction pooling PgBouncer (1.21+) follows prepared statements that the
    # protocol creates and closes; a SQL `DEALLOCATE name`, which psycopg sends when its
    # libpq is older than 17, would fail on whichever server connection it reached.
    assert psycopg.capabilities.has_send_close_prepared(), psycopg.pq.version()


def test_the_kueue_overlay_labels_the_worker_pods_only(rendered: Objects) -> None:
    label = "kueue.x-k8s.io/queue-name"
    example = yaml.safe_load((K8S_ROOT / "overlays" / "kueue" / "localqueue.yaml").read_text())
    for o in rendered["kueue"]:
        labelled = o["metadata"].get("labels", {}).get(label)
        if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("archsearch-worker"):
            assert labelled == example["metadata"]["name"]
            assert o["spec"]["template"]["metadata"]["labels"][label] == labelled
        else:
            assert labelled is None, o["metadata"]["name"]
            template = o.get("spec", {}).get("template", {}).get("metadata", {})
            assert label not in template.get("labels", {}), o["metadata"]["name"]


def test_the_example_local_queue_validates_against_kueues_crd(tmp_path: Path) -> None:
    ensure_python_tool("check_jsonschema")
    crd = yaml.safe_load((SCHEMAS / "kueue.x-k8s.io_localqueues.yaml").read_text())
    example = yaml.safe_load((K8S_ROOT / "overlays" / "kueue" / "localqueue.yaml").read_text())
    group, version = example["apiVersion"].split("/")
    assert crd["spec"]["group"] == group
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert served["served"] is True
    schema = tmp_path / "localqueue.schema.json"
    schema.write_text(json.dumps(served["schema"]["openAPIV3Schema"]))
    command = [sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema)]
    document = tmp_path / "localqueue.json"
    document.write_text(json.dumps(example))
    result = subprocess.run([*command, str(document)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # The schema is live: a ClusterQueue name that is not a name is rejected.
    document.write_text(json.dumps({**example, "spec": {"clusterQueue": "Not A Name"}}))
    result = subprocess.run([*command, str(document)], capture_output=True, text=True)
    assert result.returncode == 1, result.stdout


@pytest.mark.parametrize("base", OVERLAYS)
def test_the_readmes_overlay_sets_the_images_with_kubectl_alone(base: str, tmp_path: Path) -> None:
    assert "kustomize edit" not in SECTION  # a separate `kustomize` binary, not in kubectl
    (heredoc,) = re.findall(r"<<'EOF'\n(.*?)^EOF$", SECTION, re.DOTALL | re.MULTILINE)
    overlay = tmp_path / "mine"
    overlay.mkdir()
    # The README's overlay sits beside ours; here it points at the same overlay from tmp.
    relative = os.path.relpath(K8S_ROOT / "overlays" / base, overlay)
    (overlay / "kustomization.yaml").write_text(heredoc.replace("../cpu ", f"{relative} "))
    result = subprocess.run(
        [kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    images = {
        c["image"]
        for o in yaml.safe_load_all(result.stdout)
        if o and o["kind"] in ("Deployment", "Job")
        for c in containers(o["spec"]["template"]["spec"])
    }
    ours = {image for image in images if "archsearch" in image}
    assert ours and all(image.startswith("registry.example.com/") for image in ours), ours
